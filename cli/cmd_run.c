/* cmd_run.c — `tandem run CONFIG`: command-line front end of runner/run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "runner/config.h"
#include "runner/progress.h"
#include "runner/run.h"

static void run_more_help(FILE *f) {
    fprintf(f,
            "Exit codes: 0 finished; 75 stopped by SIGTERM/SIGINT/SIGUSR1 after committing\n"
            "(requeue to resume); 2 config or usage error; 3 store unreachable, corrupt or\n"
            "fenced out; 4 nondeterministic replay; 1 internal error.\n"
            "\n"
            "Config keys:\n");
    config_print_help(f);
}

static const cli_opt OPTS[] = {
    {"--store", CLI_STR, "URL", "where the run lives: file:///path or a directory\n"
                                "(default: the config's `store`, else runs/<config name>)", NULL, 0, 0, NULL, NULL},
    {"--set", CLI_LIST, "key=value", "override one config key (repeatable), e.g. --set tandem.K=3", NULL, 0, 0, NULL, NULL},
    {"--precision", CLI_ALIAS, "fp32|bf16", "compute precision (run.precision; bf16 needs run.device=cuda)",
     NULL, 0, 0, "--set", "run.precision="},
    {"--allow-change", CLI_LIST, "k1,k2", "resume although these pinned keys changed (recorded)", NULL, 0, 0, NULL, NULL},
    {"--quiet", CLI_SWITCH, NULL, "no progress output", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "events as JSON lines on stdout (start, memory, episode, commit,\n"
                                 "signal, error, end; each with its unix time: docs/json.md);\n"
                                 "human text stays on stderr", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"run", "CONFIG.yaml", 1, 1,
                              "a CONFIG file is required (see tandem run --help)",
                              "Starts the TANDEM run described by CONFIG, or resumes the run its store already\n"
                              "holds: the same command the first time and after every preemption.",
                              OPTS, run_more_help};

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

static int run_run(const cli_args *a) {
    run_opts o = {.progress = PROGRESS_TEXT};
    char **allow = NULL, **owned = NULL;
    int nallow = 0, nowned = 0, rc = 0, nlist = 0;
    tdm_err e = {0};
    o.config_path = a->arg[0];
    o.store_url = cli_str(a, "--store", NULL);
    o.sets = cli_list(a, "--set", &o.nsets);
    char **lists = cli_list(a, "--allow-change", &nlist);
    for (int i = 0; !rc && i < nlist; i++)
        if (add_keys(lists[i], &allow, &nallow, &owned, &nowned)) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (cli_given(a, "--quiet")) o.progress = PROGRESS_QUIET;
    if (cli_given(a, "--json")) o.progress = PROGRESS_JSON;
    if (!rc) {
        o.allow = allow;
        o.nallow = nallow;
        rc = run_main(&o, &e);
    }
    if (rc && rc != 75) fprintf(stderr, "tandem run: %s\n", e.msg);
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(allow);
    return rc;
}

int cmd_run(int argc, char **argv) { return cli_run(&SPEC, run_run, argc, argv); }
