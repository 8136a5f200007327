/* cmd_run.c — `tandem run CONFIG`: command-line front end of runner/run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/config.h"
#include "report/progress.h"
#include "runner/run.h"
#include "deploy/sweep.h"

void cli_run_exit_codes(FILE *f) {
    fprintf(f,
            "Exit codes: 0 finished; 75 stopped by a signal after committing (requeue to\n"
            "resume: TERM, INT, USR1, USR2, HUP unless ignored, XCPU, PWR, QUIT, ALRM);\n"
            "2 config or usage error; 3 store unreachable, corrupt or fenced out;\n"
            "4 nondeterministic replay; 5 diverged (a loss, gradient or alpha not finite: a\n"
            "retry diverges again, do not requeue); 1 internal error.\n");
}

static void run_more_help(FILE *f) {
    cli_run_exit_codes(f);
    fprintf(f, "\nConfig keys:\n");
    config_print_help(f);
}

static const cli_opt OPTS[] = {
    {"--store", CLI_STR, "URL", "where the run lives: file:///path or a directory\n"
                                "(default: the config's `store`, else runs/<config name>)", NULL, 0, 0, NULL, NULL},
    {"--set", CLI_LIST, "key=value", "override one config key (repeatable), e.g. --set tandem.K=3", NULL, 0, 0, NULL, NULL},
    {"--precision", CLI_ALIAS, "fp32|bf16", "compute precision (run.precision; bf16 needs run.device=cuda)",
     NULL, 0, 0, "--set", "run.precision="},
    {"--allow-change", CLI_LIST, "k1,k2", "resume although these pinned keys changed (recorded)", NULL, 0, 0, NULL, NULL},
    {"--sweep", CLI_LIST, "key=v1,v2,..", "run one point of a study: the points are every combination\n"
                                           "of the swept values, each in STORE/<key=value,...>\n"
                                           "(repeatable; docs/scheduling.md, \"Sweeps\")", NULL, 0, 0, NULL, NULL},
    {"--point", CLI_INT, "I", "the point of the --sweep to run (default: TANDEM_POINT, else\n"
                              "SLURM_ARRAY_TASK_ID, else JOB_COMPLETION_INDEX)", NULL, 0,
     SWEEP_MAX_POINTS - 1, NULL, NULL},
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
    /* a misspelt key would allow nothing, and the resume would refuse the change it meant */
    for (int i = 0; !rc && i < nallow; i++) rc = config_key_known(allow[i], "--allow-change", &e);
    if (cli_given(a, "--quiet")) o.progress = PROGRESS_QUIET;
    if (cli_given(a, "--json")) o.progress = PROGRESS_JSON;
    /* a sweep point: its settings after every --set, its own store under the study's */
    int nsweep = 0;
    char **sweeps = cli_list(a, "--sweep", &nsweep);
    sweep sw;
    memset(&sw, 0, sizeof sw);
    char label[2048], (*point)[512] = NULL, **sets = NULL;
    size_t at = 0;
    if (!rc && nsweep > 0) rc = sweep_parse(&sw, sweeps, nsweep, &e);
    /* every point must load, not only this one: a study with a bad value is said by its
     * first task, before any point computes */
    if (!rc && nsweep > 0) rc = sweep_check_points(&sw, o.config_path, o.sets, o.nsets, &e);
    if (!rc && nsweep > 0) rc = sweep_point_index(&sw, cli_given(a, "--point") ? cli_int(a, "--point", 0) : -1, &at, &e);
    if (!rc && nsweep == 0 && cli_given(a, "--point"))
        rc = err_set(&e, ERR_USAGE, "--point without --sweep: there is no study to pick a point of");
    if (!rc && nsweep > 0) {
        point = calloc((size_t)sw.nkeys, sizeof *point);
        sets = calloc((size_t)(o.nsets + sw.nkeys), sizeof *sets);
        if (!point || !sets) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    }
    if (!rc && nsweep > 0) {
        sweep_point_sets(&sw, at, point, sizeof *point);
        for (int i = 0; i < o.nsets; i++) sets[i] = o.sets[i];
        for (int k = 0; k < sw.nkeys; k++) sets[o.nsets + k] = point[k];
        o.sets = sets;
        o.nsets += sw.nkeys;
        sweep_label(&sw, at, label, sizeof label);
        o.store_suffix = label;
        o.study = &sw;
        o.study_texts = sweeps;
        o.nstudy = nsweep;
        if (o.progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem: sweep point %zu of %zu (0..%zu): %s, in its own store .../%s\n", at,
                    sw.npoints, sw.npoints - 1, label, label);
    }
    if (!rc) {
        o.allow = allow;
        o.nallow = nallow;
        rc = run_main(&o, &e);
    }
    if (rc && rc != 75) fprintf(stderr, "tandem run: %s\n", e.msg);
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(allow);
    free(point);
    free(sets);
    sweep_free(&sw);
    return rc;
}

int cmd_run(int argc, char **argv) { return cli_run(&SPEC, run_run, argc, argv); }
