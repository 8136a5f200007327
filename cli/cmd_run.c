/* cmd_run.c — `tandem run CONFIG`: command-line front end of runner/run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/args.h"
#include "cli/cmds.h"
#include "runner/config.h"
#include "runner/progress.h"
#include "runner/run.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem run CONFIG.yaml [--store URL] [--set key=value ...] [options]\n"
            "\n"
            "Starts the TANDEM run described by CONFIG, or resumes the run its store already\n"
            "holds: the same command the first time and after every preemption.\n"
            "\n"
            "  --store URL             where the run lives: file:///path or a directory\n"
            "                          (default: the config's `store`, else runs/<config name>)\n"
            "  --set key=value         override one config key (repeatable), e.g. --set tandem.K=3\n"
            "  --precision fp32|bf16   compute precision (run.precision; bf16 needs run.device=cuda)\n"
            "  --allow-change k1,k2    resume although these pinned keys changed (recorded)\n"
            "  --quiet                 no progress output\n"
            "  --json                  progress as one JSON object per line (stderr)\n"
            "\n"
            "Exit codes: 0 finished; 75 stopped by SIGTERM/SIGINT/SIGUSR1 after committing\n"
            "(requeue to resume); 2 config or usage error; 3 store unreachable, corrupt or\n"
            "fenced out; 4 nondeterministic replay; 1 internal error.\n"
            "\n"
            "Config keys:\n");
    config_print_help(f);
}

/* Splits "a,b,c" into the list (pointers into a strdup'ed copy kept in *owned). */
static int add_keys(const char *v, char ***list, int *n, char ***owned, int *nowned) {
    char *copy = strdup(v);
    if (!copy) return -1;
    char **o = realloc(*owned, (size_t)(*nowned + 1) * sizeof *o);
    if (!o) {
        free(copy);
        return -1;
    }
    *owned = o;
    o[(*nowned)++] = copy;
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        char **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
        if (!l) return -1;
        *list = l;
        l[(*n)++] = tok;
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.progress = PROGRESS_TEXT};
    char **sets = NULL, **allow = NULL, **owned = NULL;
    int nsets = 0, nallow = 0, nowned = 0, rc = 0;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        const char *f = it.flag, *v = NULL;
        if (!*f) {
            rc = args_positional(&it, &o.config_path, "CONFIG", &e);
        } else if (!strcmp(f, "--help")) {
            usage(stdout);
            goto out;
        } else if (!strcmp(f, "--store")) {
            rc = args_value(&it, &o.store_url, &e);
        } else if (!strcmp(f, "--set")) {
            rc = args_value(&it, &v, &e);
            if (!rc) {
                char **s = realloc(sets, (size_t)(nsets + 1) * sizeof *s);
                if (!s) rc = err_set(&e, ERR_INTERNAL, "out of memory");
                else (sets = s)[nsets++] = (char *)v;
            }
        } else if (!strcmp(f, "--precision")) {
            rc = args_value(&it, &v, &e);
            if (!rc) {
                size_t n = strlen("run.precision=") + strlen(v) + 1;
                char *kv = malloc(n), **s = realloc(sets, (size_t)(nsets + 1) * sizeof *s);
                char **o2 = realloc(owned, (size_t)(nowned + 1) * sizeof *o2);
                if (s) sets = s;
                if (o2) owned = o2;
                if (!kv || !s || !o2) {
                    free(kv);
                    rc = err_set(&e, ERR_INTERNAL, "out of memory");
                } else {
                    snprintf(kv, n, "run.precision=%s", v);
                    owned[nowned++] = kv;
                    sets[nsets++] = kv;
                }
            }
        } else if (!strcmp(f, "--allow-change")) {
            rc = args_value(&it, &v, &e);
            if (!rc && add_keys(v, &allow, &nallow, &owned, &nowned))
                rc = err_set(&e, ERR_INTERNAL, "out of memory");
        } else if (!strcmp(f, "--quiet")) {
            o.progress = PROGRESS_QUIET;
        } else if (!strcmp(f, "--json")) {
            o.progress = PROGRESS_JSON;
        } else {
            rc = err_set(&e, ERR_USAGE, "unknown option %s (see tandem run --help)", f);
        }
    }
    if (!rc && !o.config_path) rc = err_set(&e, ERR_USAGE, "a CONFIG file is required (see tandem run --help)");
    if (!rc) {
        o.sets = sets;
        o.nsets = nsets;
        o.allow = allow;
        o.nallow = nallow;
        rc = run_main(&o, &e);
    }
    if (rc && rc != 75) fprintf(stderr, "tandem run: %s\n", e.msg);
out:
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(sets);
    free(allow);
    return rc;
}
