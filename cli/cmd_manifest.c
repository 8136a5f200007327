/* cmd_manifest.c — `tandem manifest slurm|k8s CONFIG`: command-line front end of
 * runner/manifest.h. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/args.h"
#include "cli/cmds.h"
#include "runner/config.h"
#include "runner/manifest.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem manifest slurm|k8s CONFIG.yaml [--set key=value ...] [--store URL]\n"
            "                                [--config-path PATH] [--out FILE]\n"
            "\n"
            "Renders what runs CONFIG on a cluster and requeues it on preemption (nothing is\n"
            "submitted); the cluster.* keys of the config describe the cluster (tandem run\n"
            "--help lists them; docs/scheduling.md explains them):\n"
            "  slurm   an sbatch script: --requeue, --signal=B:USR1@cluster.signal_lead_s, traps\n"
            "          that forward USR1/TERM to tandem, exit 75 -> scontrol requeue\n"
            "  k8s     a ConfigMap with the config and a batch/v1 Job (an Indexed Job and a\n"
            "          headless Service when cluster.nodes > 1) with a podFailurePolicy that\n"
            "          ignores preemptions and exit 75\n"
            "\n"
            "  --set key=value     override a config key (repeatable); passed on to tandem run\n"
            "  --store URL         where the run lives (default: the config's `store`, else\n"
            "                      runs/<config name>, relative to the job's directory)\n"
            "  --config-path PATH  Slurm: the config's path on the nodes (default: its absolute\n"
            "                      path here; the nodes must see it)\n"
            "  --out FILE          write FILE instead of standard output\n"
            "\n"
            "Warnings go to standard error. Exit codes: 0 rendered; 2 config or usage error;\n"
            "1 internal error.\n");
}

/* The config file's name without directory and extension (as `tandem run` names its
 * default store runs/<name>). */
static void config_name(const char *path, char *out, size_t cap) {
    char *copy = strdup(path);
    const char *base = copy ? basename(copy) : "run";
    snprintf(out, cap, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
    free(copy);
}

/* "tandem manifest KIND ARGS" for the header comment, --out left out. */
static char *command_line(int argc, char **argv) {
    size_t cap = 64;
    for (int i = 0; i < argc; i++) cap += strlen(argv[i]) * 4 + 3;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t n = (size_t)snprintf(s, cap, "tandem manifest");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--out=", 6)) continue;
        bool plain = argv[i][0] != '\0';
        for (const char *p = argv[i]; plain && *p; p++)
            plain = strchr(" \t'\"\\$`!*?[]{}()<>|&;#~", *p) == NULL;
        if (plain) {
            n += (size_t)snprintf(s + n, cap - n, " %s", argv[i]);
            continue;
        }
        n += (size_t)snprintf(s + n, cap - n, " '");
        for (const char *p = argv[i]; *p; p++)
            n += (size_t)snprintf(s + n, cap - n, *p == '\'' ? "'\\''" : "%c", *p);
        n += (size_t)snprintf(s + n, cap - n, "'");
    }
    return s;
}

/* Writes the rendering to FILE via a temporary file in its directory and a rename, so a
 * failed render never leaves half a script behind. */
static int render_to(const char *path, int kind_slurm, const manifest_opts *o, tdm_err *e) {
    if (!path)
        return kind_slurm ? manifest_slurm(stdout, stderr, o, e) : manifest_k8s(stdout, stderr, o, e);
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp) return err_set(e, ERR_INTERNAL, "out of memory");
    snprintf(tmp, len, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return err_set(e, ERR_USAGE, "--out %s: cannot create a file there: %m", path);
    }
    FILE *f = fdopen(fd, "w");
    int rc = f ? 0 : err_set(e, ERR_INTERNAL, "fdopen: %m");
    if (!rc) rc = kind_slurm ? manifest_slurm(f, stderr, o, e) : manifest_k8s(f, stderr, o, e);
    if (f && fchmod(fd, kind_slurm ? 0755 : 0644) != 0 && !rc)
        rc = err_set(e, ERR_INTERNAL, "chmod %s: %m", tmp);
    if (f && fclose(f) != 0 && !rc) rc = err_set(e, ERR_USAGE, "--out %s: write failed: %m", path);
    if (!f) close(fd);
    if (!rc && rename(tmp, path) != 0) rc = err_set(e, ERR_USAGE, "--out %s: rename failed: %m", path);
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

int cmd_manifest(int argc, char **argv) {
    const char *kind = NULL, *config_path = NULL, *store = NULL, *node_config = NULL, *out = NULL;
    char **sets = NULL;
    int nsets = 0, rc = 0;
    tdm_err e = {0};
    config *cfg = NULL;
    char *cmdline = NULL;
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        const char *f = it.flag, *v = NULL;
        if (!*f) {
            if (!kind) kind = it.value;
            else rc = args_positional(&it, &config_path, "CONFIG", &e);
        } else if (!strcmp(f, "--help")) {
            usage(stdout);
            goto done;
        } else if (!strcmp(f, "--store")) {
            rc = args_value(&it, &store, &e);
        } else if (!strcmp(f, "--config-path")) {
            rc = args_value(&it, &node_config, &e);
        } else if (!strcmp(f, "--out")) {
            rc = args_value(&it, &out, &e);
        } else if (!strcmp(f, "--set")) {
            rc = args_value(&it, &v, &e);
            if (!rc) {
                char **s = realloc(sets, (size_t)(nsets + 1) * sizeof *s);
                if (!s) rc = err_set(&e, ERR_INTERNAL, "out of memory");
                else (sets = s)[nsets++] = (char *)v;
            }
        } else {
            rc = err_set(&e, ERR_USAGE, "unknown option %s (see tandem manifest --help)", f);
        }
    }
    if (!rc && (!kind || (strcmp(kind, "slurm") && strcmp(kind, "k8s"))))
        rc = err_set(&e, ERR_USAGE, "%s%s%s: expected slurm or k8s (see tandem manifest --help)",
                     kind ? "'" : "", kind ? kind : "a kind", kind ? "'" : "");
    if (!rc && !config_path)
        rc = err_set(&e, ERR_USAGE, "a CONFIG file is required (see tandem manifest --help)");
    if (!rc && node_config && node_config[0] != '/')
        rc = err_set(&e, ERR_USAGE, "--config-path %s: expected an absolute path", node_config);
    if (!rc && !(cfg = malloc(sizeof *cfg))) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = config_load(cfg, config_path, sets, nsets, &e);
    if (!rc) {
        char name[256], cwd[PATH_MAX], abs[PATH_MAX], self[PATH_MAX], url[CONFIG_STR_MAX + 300];
        config_name(config_path, name, sizeof name);
        if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
        if (!realpath(config_path, abs)) snprintf(abs, sizeof abs, "%s", config_path);
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        if (store) snprintf(url, sizeof url, "%s", store);
        else if (cfg->store[0]) snprintf(url, sizeof url, "%s", cfg->store);
        else snprintf(url, sizeof url, "file://runs/%s", name);
        cmdline = command_line(argc, argv);
        manifest_opts o = {.cfg = cfg,
                           .config_path = node_config ? node_config : abs,
                           .config_name = name,
                           .store_url = url,
                           .sets = sets,
                           .nsets = nsets,
                           .tandem_binary = self[0] ? self : NULL,
                           .workdir = cwd,
                           .rendered_from = cmdline};
        rc = render_to(out, !strcmp(kind, "slurm"), &o, &e);
    }
    if (rc) fprintf(stderr, "tandem manifest: %s\n", e.msg);
done:
    free(cmdline);
    free(cfg);
    free(sets);
    return rc;
}
