/* cmd_manifest.c — `tandem manifest slurm|k8s CONFIG`: command-line front end of
 * deploy/manifest.h. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "storage/s3_resolve.h"
#include "storage/url.h"
#include "config/config.h"
#include "util/args.h"
#include "deploy/manifest.h"
#include "deploy/sweep.h"
#include "util/outfile.h"

static void manifest_more_help(FILE *f) {
    fprintf(f, "Warnings go to standard error. Exit codes: 0 rendered; 2 config or usage error;\n"
               "1 internal error.\n");
}

static const cli_opt OPTS[] = {
    {"--set", CLI_LIST, "key=value", "override a config key (repeatable); passed on to tandem run", NULL, 0, 0, NULL,
     NULL},
    {"--store", CLI_STR, "URL", "where the run lives (default: the config's `store`, else\n"
                                "runs/<config name>, relative to the job's directory)", NULL, 0, 0, NULL, NULL},
    {"--config-path", CLI_STR, "PATH", "Slurm: the config's path on the nodes (default: its absolute\n"
                                       "path here; the nodes must see it)", NULL, 0, 0, NULL, NULL},
    {"--sweep", CLI_LIST, "key=v1,v2,..", "a study: one Slurm job array / Kubernetes Indexed Job of\n"
                                           "every combination of the values, each point its own run\n"
                                           "in STORE/<key=value,...> (repeatable)", NULL, 0, 0, NULL, NULL},
    {"--compare", CLI_STR, "dmo|finals", "the job(s) of `tandem compare CONFIG` instead of a run: dmo =\n"
                                          "its TANDEM run; finals = its four final runs (Uniform,\n"
                                          "Natural, TANDEM's alpha*, UniMax) as one job array / Indexed Job,\n"
                                          "to submit once the DMO has finished; then `tandem compare\n"
                                          "CONFIG --store STORE` reports (default STORE: the config's\n"
                                          "store, else runs/<config name>-compare)",
     "dmo|finals", 0, 0, NULL, NULL},
    {"--final-seed", CLI_STR, "N", "with --compare: passed on to tandem compare", NULL, 0, 0, NULL, NULL},
    {"--out", CLI_STR, "FILE", "write FILE instead of standard output", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {
    "manifest", "slurm|k8s CONFIG.yaml", 1, 2, "a kind: expected slurm or k8s (see tandem manifest --help)",
    "Renders what runs CONFIG on a cluster and requeues it on preemption (nothing is\n"
    "submitted); the cluster.* keys of the config describe the cluster (tandem run\n"
    "--help lists them; docs/scheduling.md explains them):\n"
    "  slurm   an sbatch script: --requeue, --signal=B:USR1@cluster.signal_lead_s, traps\n"
    "          that forward USR1/TERM to tandem, exit 75 -> scontrol requeue\n"
    "  k8s     a ConfigMap with the config and a batch/v1 Job (an Indexed Job and a\n"
    "          headless Service when cluster.nodes > 1) with a podFailurePolicy that\n"
    "          ignores preemptions and exit 75",
    OPTS, manifest_more_help};

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

/* Writes the rendering to FILE whole or not at all (util/outfile.h): a failed render or a
 * full disk never leaves half a script behind. */
static int render_to(const char *path, int kind_slurm, const manifest_opts *o, const char *config_path, tdm_err *e) {
    if (!path)
        return kind_slurm ? manifest_slurm(stdout, stderr, o, e) : manifest_k8s(stdout, stderr, o, e);
    /* the rendering names the config, which the job reads: written over it, the config was
     * lost and the job read its own script (through links and other spellings too) */
    struct stat so, sc;
    if (stat(path, &so) == 0 && stat(config_path, &sc) == 0 && so.st_dev == sc.st_dev && so.st_ino == sc.st_ino)
        return err_set(e, ERR_USAGE, "--out %s is the config %s itself, which the rendered job reads: write the "
                       "rendering to another file", path, config_path);
    outfile f;
    int rc = outfile_open(&f, "--out", path, e);
    if (!rc) rc = kind_slurm ? manifest_slurm(f.f, stderr, o, e) : manifest_k8s(f.f, stderr, o, e);
    if (rc && f.f && ferror(f.f)) { /* which file the write failed on; exit 2 as outfile_close's */
        err_prefix(e, "--out %s: ", path);
        rc = e->code = ERR_USAGE;
    }
    return rc ? outfile_close(&f, rc, 0, e) : outfile_close(&f, 0, kind_slurm ? 0755 : 0644, e);
}

/* argc, argv: the command line as typed, quoted in the rendering's header. */
static int run_manifest(const cli_args *a, int argc, char **argv) {
    const char *kind = a->arg[0], *config_path = a->nargs > 1 ? a->arg[1] : NULL;
    const char *store = cli_str(a, "--store", NULL), *node_config = cli_str(a, "--config-path", NULL);
    const char *out = cli_str(a, "--out", NULL);
    int nsets = 0, rc = 0;
    char **sets = cli_list(a, "--set", &nsets);
    tdm_err e = {0};
    config *cfg = NULL;
    char *cmdline = NULL;
    if (strcmp(kind, "slurm") && strcmp(kind, "k8s"))
        rc = err_set(&e, ERR_USAGE, "'%s': expected slurm or k8s (see tandem manifest --help)", kind);
    if (!rc && !config_path)
        rc = err_set(&e, ERR_USAGE, "a CONFIG file is required (see tandem manifest --help)");
    if (!rc && node_config && node_config[0] != '/')
        rc = err_set(&e, ERR_USAGE, "--config-path %s: expected an absolute path", node_config);
    if (rc) { /* the checks the rows cannot make: a usage error like the parser's */
        fprintf(stderr, "tandem manifest: %s\n", e.msg);
        cli_usage(a->spec, stderr);
        return rc;
    }
    int nsweeps = 0;
    char **sweeps = cli_list(a, "--sweep", &nsweeps);
    const char *compare = cli_str(a, "--compare", NULL), *final_seed = cli_str(a, "--final-seed", NULL);
    uint64_t seed_value;
    if (compare && nsweeps > 0)
        rc = err_set(&e, ERR_USAGE, "--compare and --sweep: a comparison's runs are its own (sweep "
                     "run.seed by rendering one comparison per seed, each with its own --store)");
    else if (final_seed && !compare)
        rc = err_set(&e, ERR_USAGE, "--final-seed is for --compare");
    else if (final_seed && args_parse_u64(final_seed, &seed_value))
        rc = err_set(&e, ERR_USAGE, "--final-seed: '%s' is not a non-negative integer", final_seed);
    if (rc) {
        fprintf(stderr, "tandem manifest: %s\n", e.msg);
        cli_usage(a->spec, stderr);
        return rc;
    }
    sweep sw;
    memset(&sw, 0, sizeof sw);
    if (!(cfg = malloc(sizeof *cfg))) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = config_load(cfg, config_path, sets, nsets, &e);
    if (!rc && nsweeps > 0) rc = sweep_parse(&sw, sweeps, nsweeps, &e);
    /* --compare finals: four points, numbered for the array; tandem compare --only final
     * finds its point as tandem run --sweep does */
    static const char *const finals[] = {"uniform", "natural", "tandem", "unimax"};
    if (compare && !strcmp(compare, "finals")) sw.npoints = 4;
    /* every point must load: a bad value is said now, not by a task hours later */
    if (!rc && nsweeps > 0) rc = sweep_check_points(&sw, config_path, sets, nsets, &e);
    if (!rc) {
        char name[256], cwd[PATH_MAX], abs[PATH_MAX], self[PATH_MAX], url[CONFIG_STR_MAX + 300];
        config_name(config_path, name, sizeof name);
        if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
        if (!realpath(config_path, abs)) snprintf(abs, sizeof abs, "%s", config_path);
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        if (store) snprintf(url, sizeof url, "%s", store);
        else if (cfg->store[0]) snprintf(url, sizeof url, "%s", cfg->store);
        else snprintf(url, sizeof url, "file://./runs/%s%s", name, compare ? "-compare" : "");
        cmdline = command_line(argc, argv);
        store_url_parts su; /* a URL that means something else is refused as tandem run would */
        if (store_url_parse(url, &su, &e)) rc = e.code;
        /* an S3 URL as tandem run checks it (bucket name, prefix): a job is not queued to
         * fail at its start */
        s3_config *s3c = !rc && su.kind == STORE_URL_S3 ? malloc(sizeof *s3c) : NULL;
        if (s3c && s3_url_check(su.canon, s3c, &e)) rc = e.code;
        free(s3c);
        const char *args[4];
        int nargs = 0;
        if (compare) { /* the jobs' names say which part of the comparison they run */
            args[nargs++] = "--only";
            args[nargs++] = strcmp(compare, "dmo") ? "final" : "dmo";
            if (final_seed) args[nargs++] = "--final-seed", args[nargs++] = final_seed;
        }
        char suffix[16] = "";
        if (compare) snprintf(suffix, sizeof suffix, "-%s", compare);
        manifest_opts o = {.cfg = cfg,
                           .config_path = node_config ? node_config : abs,
                           .config_name = name,
                           .store_url = url,
                           .sets = sets,
                           .nsets = nsets,
                           .tandem_binary = self[0] ? self : NULL,
                           .workdir = cwd,
                           .rendered_from = cmdline,
                           .sweep = &sw,
                           .sweep_texts = sweeps,
                           .nsweeps = nsweeps,
                           .command = compare ? "compare" : NULL,
                           .command_args = args,
                           .ncommand_args = nargs,
                           .point_names = compare ? finals : NULL,
                           .name_suffix = suffix};
        if (!rc) rc = render_to(out, !strcmp(kind, "slurm"), &o, config_path, &e);
    }
    if (rc) fprintf(stderr, "tandem manifest: %s\n", e.msg);
    free(cmdline);
    free(cfg);
    sweep_free(&sw);
    return rc;
}

/* Not cli_run: the rendering's header quotes the command line as it was typed, which the
 * parsed options no longer hold (order, --name=value), so run_manifest gets argv too. */
int cmd_manifest(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&SPEC, argc, argv, &a);
    if (rc == 0) rc = run_manifest(&a, argc, argv);
    else if (rc < 0) rc = 0; /* --help */
    cli_args_free(&a);
    return rc;
}
