/* cmd_compare.c — `tandem compare CONFIG`: the paper's two-stage protocol in one command.
 *
 *   1. the TANDEM run of CONFIG (data-mixture optimisation) in STORE/dmo, which ends with
 *      α* (the mean α of its last 10 % of episodes, mixture.mp);
 *   2. four final runs of the same model on the same token budget (CONFIG's episodes × E
 *      free steps of train.batch × train.seq tokens), each on a fixed mixture — Uniform in
 *      STORE/uniform, Natural (∝ train tokens) in STORE/natural, α* in STORE/tandem and
 *      UniMax (the strongest simple baseline, steps/mixture.h) in STORE/unimax — all with
 *      one seed of their own (run.seed + 1000 unless --final-seed), so that the DMO and the
 *      final models are seeded independently;
 *   3. each final model's per-domain test loss (runner/evaluate.h) and the table of the
 *      paper: perplexity per domain and Average = exp(mean loss), with the epochs of each
 *      domain every final run trained on, as text or --json;
 *      --svg draws the α trajectories, the per-domain perplexity bars and, with --curves,
 *      the Uniform model's test loss per domain at its kept states (the overfitting
 *      picture of the data-restricted setting).
 *
 * Every run is an ordinary resumable run: a signal ends the command with exit 75 after
 * the running one committed, and the same command resumes (finished runs report at
 * once). */
#include <limits.h>
#include <unistd.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/dataset.h"
#include "ledger/audit.h"
#include "ledger/keys.h"
#include "util/args.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/compare_layout.h"
#include "config/domain_caps.h"
#include "config/config.h"
#include "model/blas_core.h"
#include "runner/evaluate.h"
#include "report/progress.h"
#include "runner/run.h"
#include "report/svgplot.h"
#include "deploy/sweep.h"
#include "storage/store.h"
#include "storage/url.h"
#include "util/json.h"
#include "util/outfile.h"

/* The final runs by point number (cluster jobs run them as array indices: UniMax, the
 * youngest, is last so that the first three kept their numbers) */
enum { RUN_UNIFORM, RUN_NATURAL, RUN_TANDEM, RUN_UNIMAX, NFINAL };
_Static_assert(COMPARE_UNIFORM == 1 + RUN_UNIFORM && COMPARE_NATURAL == 1 + RUN_NATURAL &&
                   COMPARE_TANDEM == 1 + RUN_TANDEM && COMPARE_UNIMAX == 1 + RUN_UNIMAX &&
                   COMPARE_NRUNS == 1 + NFINAL,
               "compare_layout.h's runs: the DMO, then the finals in point order");
#define FINAL_KEY (compare_runs + 1) /* the final runs' names in the store, by point */
static const char *const FINAL_NAME[NFINAL] = {"Uniform", "Natural", "TANDEM", "UniMax"};
/* the order of the columns: the baselines, then TANDEM */
static const int SHOWN[NFINAL] = {RUN_UNIFORM, RUN_NATURAL, RUN_UNIMAX, RUN_TANDEM};
#define CURVE_MAX 12 /* kept states evaluated per final run with --curves */

typedef struct curve_point {
    uint64_t seq;
    double loss[REC_MAX_DOMAINS];
} curve_point;

typedef struct compare_ctx {
    const char *config_path;
    char url[CONFIG_STR_MAX + 16];                /* the compare's store (a prefix) */
    char sub[1 + NFINAL][CONFIG_STR_MAX + 32];    /* dmo, uniform, natural, tandem, unimax */
    char **sets;
    int nsets;
    char *const *allow;
    int nallow;
    int progress;
    uint64_t final_seed;
    config cfg;
    dataset ds;
    int M;
    double mix[NFINAL][REC_MAX_DOMAINS]; /* the mixture each final run trained on */
    double epochs[NFINAL][REC_MAX_DOMAINS]; /* epochs of each domain it saw (NAN: unknown) */
    eval_result ev[NFINAL];
    curve_point curve[NFINAL][CURVE_MAX];
    int ncurve[NFINAL];
    audit_chain chain; /* the DMO's α records */
} compare_ctx;

#define STR_(x) #x
#define STR(x) STR_(x)

static void compare_more_help(FILE *f) { cli_run_exit_codes(f); }

static const cli_opt OPTS[] = {
    {"--store", CLI_STR, "URL", "where the five runs live (default: the config's store, else\n"
                                "runs/<config name>-compare)", NULL, 0, 0, NULL, NULL},
    {"--set", CLI_LIST, "key=value", "override a config key of every run (repeatable)", NULL, 0, 0, NULL, NULL},
    /* a uint64_t, which a CLI_INT row (a long) cannot hold: checked in run_compare */
    {"--final-seed", CLI_STR, "N", "run.seed of the final runs (default: the config's + 1000)", NULL, 0, 0, NULL,
     NULL},
    {"--allow-change", CLI_LIST, "k1,k2", "passed to every run (see tandem run --help)", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "the result as one JSON object on stdout", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {"--svg", CLI_STR, "FILE", "alpha trajectories and per-domain perplexity bars as SVG", NULL, 0, 0, NULL, NULL},
    {"--curves", CLI_SWITCH, NULL, "also evaluate up to " STR(CURVE_MAX) " kept states of each final run (test\n"
                                   "loss over training; the SVG gets the Uniform run's panel)", NULL, 0, 0, NULL, NULL},
    {"--quiet", CLI_SWITCH, NULL, "no progress output", NULL, 0, 0, NULL, NULL},
    {"--only", CLI_STR, "dmo|final", "run one part and stop, for cluster jobs (tandem manifest\n"
                                        "--compare): dmo = the TANDEM run; final = the final run of\n"
                                        "point --point (0 Uniform, 1 Natural, 2 TANDEM, 3 UniMax; else from\n"
                                        "TANDEM_POINT, SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX)",
     "dmo|final", 0, 0, NULL, NULL},
    {"--point", CLI_INT, "I", "with --only final: which final run (0..3)", NULL, 0, NFINAL - 1, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {
    "compare", "CONFIG", 1, 1, "a CONFIG file is required (see tandem compare --help)",
    "The paper's protocol in one command: the TANDEM run of CONFIG, then four final\n"
    "runs of the same model on the same token budget with fixed mixtures (Uniform,\n"
    "Natural, TANDEM's alpha* and UniMax: no domain past data.unimax_epochs epochs),\n"
    "each evaluated per domain on the test split, with the epochs each saw of each domain.\n"
    "Each run lives in the store (STORE/dmo, STORE/uniform, STORE/natural, STORE/tandem,\n"
    "STORE/unimax) and resumes like tandem run: after exit 75 run the same command again.",
    OPTS, compare_more_help};

/* url + "/" + name, for file paths, file:// and s3:// alike. */
static void join_url(const char *url, const char *name, char *out, size_t cap) {
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') n--;
    snprintf(out, cap, "%.*s/%s", (int)n, url, name);
}

/* The store of the comparison: --store, else the config's `store`, else
 * runs/<config name>-compare. */
static void compare_url(const char *config_path, const char *store_opt, const config *c,
                        char *out, size_t cap) {
    if (store_opt) {
        snprintf(out, cap, "%s", store_opt);
        return;
    }
    if (c->store[0]) {
        snprintf(out, cap, "%s", c->store);
        return;
    }
    const char *base = strrchr(config_path, '/');
    base = base ? base + 1 : config_path;
    const char *dot = strrchr(base, '.');
    int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    snprintf(out, cap, "file://./runs/%.*s-compare", len, base);
}

/* One run of the protocol through run_main, with `extra` --set values after the user's. */
static int run_one(compare_ctx *x, const char *store_url, const char *const *extra, int nextra,
                   tdm_err *e) {
    char **sets = calloc((size_t)(x->nsets + nextra) + 1, sizeof *sets);
    if (!sets) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int i = 0; i < x->nsets; i++) sets[i] = x->sets[i];
    for (int i = 0; i < nextra; i++) sets[x->nsets + i] = (char *)extra[i];
    run_opts o = {.config_path = x->config_path, .sets = sets, .nsets = x->nsets + nextra,
                  .store_url = store_url, .allow = x->allow, .nallow = x->nallow,
                  .progress = x->progress, .no_summary = 1};
    int rc = run_main(&o, e);
    free(sets);
    /* a final run made with another seed: the comparison was begun with --final-seed (or
     * another run.seed), which must be given again — "give another store" misled */
    if (rc == ERR_USAGE && store_url != x->sub[0] && strstr(e->msg, "a run cannot change its seed")) {
        char was[sizeof e->msg];
        snprintf(was, sizeof was, "%s", e->msg);
        char *cut = strstr(was, "; a run cannot change its seed");
        if (cut) *cut = '\0';
        err_set(e, ERR_USAGE, "%s: this comparison's final runs were made with that seed: give --final-seed with it "
                "again (and the DMO's run.seed as before)", was);
    }
    return rc;
}

/* One progress line, "tandem compare: " and the rest; nothing with --quiet. */
__attribute__((format(printf, 2, 3))) static void say(const compare_ctx *x, const char *fmt, ...) {
    if (x->progress == PROGRESS_QUIET) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tandem compare: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static double compare_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Each run's end in the log, as its start (docs/dmo.md: a log without a terminal shows
 * each run's start and end, not every episode). */
static void say_done(const compare_ctx *x, const char *part, const char *store, double t0) {
    say(x, "%s finished in %s (%.0f s)", part, store, compare_now() - t0);
}

/* "data.mixture_file=<the DMO's store>" into buf (CONFIG_STR_MAX + 64 bytes): a local
 * store's path made absolute, so that the final runs' pinned config names it from any
 * directory (a relative one pinned as typed: the finished comparison could not report from
 * elsewhere, exit 2). A path that would not fit a config value is a usage error, not a
 * silently shortened path. */
static int dmo_mixture_set(const compare_ctx *x, char *buf, size_t cap, tdm_err *e) {
    /* every spelling of one store pins one value: a file store as its bare absolute path
     * (file:///x/dmo, the Slurm job's spelling, and /x/dmo were two configs: the report
     * from the same --store refused, exit 2), an S3 store as the backends read it */
    const char *dmo = x->sub[0];
    store_url_parts su;
    tdm_err pe;
    if (store_url_parse(dmo, &su, &pe) == 0) dmo = su.canon;
    char cwd[PATH_MAX];
    int n;
    if (strstr(dmo, "://") || dmo[0] == '/' || !getcwd(cwd, sizeof cwd)) {
        n = snprintf(buf, cap, "data.mixture_file=%s", dmo);
    } else {
        while (dmo[0] == '.' && dmo[1] == '/') dmo += 2;
        n = snprintf(buf, cap, "data.mixture_file=%s/%s", cwd, dmo);
    }
    if (n < 0 || (size_t)n >= cap || (size_t)n - strlen("data.mixture_file=") >= CONFIG_STR_MAX)
        return err_set(e, ERR_USAGE, "the DMO run's store path %s is too long once made absolute "
                       "(at most %d bytes): run tandem compare from a folder nearer it",
                       x->sub[0], CONFIG_STR_MAX - 1);
    return 0;
}

/* Runs (or resumes, or finds finished) the DMO and the four final runs in order. */
static int run_all(compare_ctx *x, tdm_err *e) {
    char seed[64], mixfile[CONFIG_STR_MAX + 64];
    int rc = dmo_mixture_set(x, mixfile, sizeof mixfile, e); /* before the DMO's hours */
    if (rc) return rc;
    say(x, "1/5: the TANDEM run (data-mixture optimisation) in %s", x->sub[0]);
    const char *dmo[] = {"run.mode=tandem"};
    double t0 = compare_now();
    rc = run_one(x, x->sub[0], dmo, 1, e);
    if (rc) return rc;
    say_done(x, "1/5", x->sub[0], t0);
    snprintf(seed, sizeof seed, "run.seed=%llu", (unsigned long long)x->final_seed);
    for (int f = 0; f < NFINAL && !rc; f++) {
        if (run_signal_pending()) return RUN_EXIT_REQUEUE;
        char step[64];
        snprintf(step, sizeof step, "%d/%d: the final run on the %s mixture", f + 2, NFINAL + 1,
                 FINAL_NAME[f]);
        say(x, "%s in %s", step, x->sub[1 + f]);
        char mixture[64];
        snprintf(mixture, sizeof mixture, "data.mixture=%s", f == RUN_TANDEM ? "file" : FINAL_KEY[f]);
        const char *extra[] = {"run.mode=fixed", seed, mixture, mixfile};
        t0 = compare_now();
        rc = run_one(x, x->sub[1 + f], extra, f == RUN_TANDEM ? 4 : 3, e);
        char part[16];
        snprintf(part, sizeof part, "%d/%d", f + 2, NFINAL + 1);
        if (!rc) say_done(x, part, x->sub[1 + f], t0);
    }
    return rc;
}

/* --only: the DMO alone, or final run `point` alone (for the TANDEM mixture the DMO must
 * have finished: its α* is that run's mixture), then stop without evaluating; a later
 * `tandem compare` finds the runs finished and reports. */
static int run_only(compare_ctx *x, const char *only, long point, tdm_err *e) {
    if (!strcmp(only, "dmo")) {
        say(x, "the TANDEM run (data-mixture optimisation) in %s", x->sub[0]);
        const char *dmo[] = {"run.mode=tandem"};
        int rc = run_one(x, x->sub[0], dmo, 1, e);
        if (!rc) say(x, "the DMO run is finished in %s; the final runs next (tandem manifest ... --compare "
                        "finals, or tandem compare)", x->sub[0]);
        return rc;
    }
    sweep sw = {.npoints = NFINAL};
    size_t f;
    int rc = sweep_point_index(&sw, point, &f, e);
    if (rc) return rc;
    if (f == RUN_TANDEM) { /* α* must exist: the DMO run has finished */
        store *st = store_open_existing(x->sub[0], STORE_OPEN_READ_ONLY, e);
        void *data = NULL;
        size_t n = 0;
        char why[sizeof e->msg];
        rc = st ? store_get(st, LEDGER_MIXTURE, &data, &n, NULL, e) : ERR_STORE;
        snprintf(why, sizeof why, "%s", !st ? "no run there yet" : rc == STORE_NOT_FOUND ? "no mixture.mp yet" : e->msg);
        free(data);
        if (st) store_close(st);
        if (rc)
            return err_set(e, ERR_USAGE, "the final run on the TANDEM mixture needs the DMO run's alpha*, "
                           "and %s has none (%s): run `tandem compare CONFIG --only dmo` (or its job) to "
                           "the end first", x->sub[0], why);
    }
    char seed[64], mixfile[CONFIG_STR_MAX + 64], mixture[64];
    snprintf(seed, sizeof seed, "run.seed=%llu", (unsigned long long)x->final_seed);
    if ((rc = dmo_mixture_set(x, mixfile, sizeof mixfile, e))) return rc;
    snprintf(mixture, sizeof mixture, "data.mixture=%s", f == RUN_TANDEM ? "file" : FINAL_KEY[f]);
    say(x, "the final run on the %s mixture in %s", FINAL_NAME[f], x->sub[1 + f]);
    const char *extra[] = {"run.mode=fixed", seed, mixture, mixfile};
    return run_one(x, x->sub[1 + f], extra, f == RUN_TANDEM ? 4 : 3, e);
}

/* The mixtures the final runs trained on and the epochs of each domain they saw, from
 * each run's final state (what it did, caps and all), and the DMO's α chain. */
static int read_mixtures(compare_ctx *x, tdm_err *e) {
    int rc = 0;
    for (int f = 0; f < NFINAL && !rc; f++) {
        store *st = store_open_existing(x->sub[1 + f], STORE_OPEN_READ_ONLY, e);
        if (!st) return e->code;
        rec_head h;
        rec_state s;
        int have = 0;
        rc = audit_head(st, &h, &s, &have, e);
        if (!rc && !have) rc = err_set(e, ERR_STORE, "%s has no state after its run", x->sub[1 + f]);
        for (int m = 0; !rc && m < x->M; m++) {
            double tokens = (double)dataset_tokens(&x->ds, m, SPLIT_TRAIN);
            x->mix[f][m] = s.alpha[m];
            x->epochs[f][m] = s.has_seen && tokens > 0 ? s.seen[m] / tokens : NAN;
        }
        if (have) rec_state_free(&s);
        store_close(st);
    }
    store *st = rc ? NULL : store_open_existing(x->sub[0], STORE_OPEN_READ_ONLY, e);
    if (!rc && !st) return e->code;
    if (!rc) rc = audit_chain_read(st, &x->chain, e);
    if (!rc && !x->chain.ok)
        rc = err_set(e, ERR_STORE, "%s: %s (tandem alpha %s --verify)", x->sub[0], x->chain.problem,
                     x->sub[0]);
    if (st) store_close(st);
    return rc;
}

/* Up to CURVE_MAX kept states of a final run, evenly spread, the last always included. */
static int eval_curve(compare_ctx *x, int f, store *st, tdm_err *e) {
    uint64_t *seqs = NULL;
    size_t n = 0;
    int rc = audit_state_seqs(st, &seqs, &n, e);
    x->ncurve[f] = 0;
    size_t pick = n < CURVE_MAX ? n : CURVE_MAX;
    for (size_t k = 0; !rc && k < pick; k++) {
        if (run_signal_pending()) {
            rc = RUN_EXIT_REQUEUE;
            break;
        }
        /* k-th of `pick` points over the n states: ends included */
        size_t i = pick == 1 ? n - 1 : (size_t)((double)k * (double)(n - 1) / (double)(pick - 1) + 0.5);
        eval_result r;
        rc = eval_store(st, SPLIT_TEST, UINT64_MAX, &seqs[i], BLAS_PIN_NOTE, &r, e);
        if (rc) break;
        curve_point *p = &x->curve[f][x->ncurve[f]++];
        p->seq = r.seq;
        memcpy(p->loss, r.loss, sizeof p->loss);
    }
    free(seqs);
    return rc;
}

static int evaluate_all(compare_ctx *x, int curves, tdm_err *e) {
    int rc = 0;
    for (int f = 0; f < NFINAL && !rc; f++) {
        if (run_signal_pending()) return RUN_EXIT_REQUEUE;
        if (x->progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem compare: evaluating the %s model on the test split%s\n",
                    FINAL_NAME[f], curves ? " (and its kept states)" : "");
        store *st = store_open_existing(x->sub[1 + f], STORE_OPEN_READ_ONLY, e);
        if (!st) return e->code;
        rc = eval_store(st, SPLIT_TEST, UINT64_MAX, NULL, BLAS_PIN_NOTE, &x->ev[f], e);
        if (!rc && curves) rc = eval_curve(x, f, st, e);
        store_close(st);
    }
    return rc;
}

static double pct(double a, double b) { return 100.0 * (a / b - 1.0); }

/* The domains whose test loss in final run f's curve rose from its minimum to the end,
 * as "name (min at state S -> final)" into out; their count. */
static int overfit_domains(const compare_ctx *x, int f, char *out, size_t cap) {
    out[0] = '\0';
    int count = 0, n = x->ncurve[f];
    if (n < 3) return 0;
    size_t used = 0;
    for (int m = 0; m < x->M; m++) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (x->curve[f][i].loss[m] < x->curve[f][best].loss[m]) best = i;
        if (best == n - 1) continue;
        int w = snprintf(out + used, used < cap ? cap - used : 0, "%s%s (%.4f at state %llu, %.4f at the end)",
                         count ? ", " : "", x->ev[f].names[m], x->curve[f][best].loss[m],
                         (unsigned long long)x->curve[f][best].seq, x->curve[f][n - 1].loss[m]);
        if (w > 0) used += (size_t)w;
        if (used >= cap) used = cap - 1;
        count++;
    }
    return count;
}

static void print_text(const compare_ctx *x, FILE *o) {
    fprintf(o, "\nfinal models on the same budget (%d episodes x E = %d free steps of %d x %d "
               "tokens, seed %llu); test perplexity per domain:\n",
            x->cfg.run.episodes, x->cfg.tandem.E, x->cfg.train.batch, x->cfg.train.seq,
            (unsigned long long)x->final_seed);
    fprintf(o, "  %-14s %8s %8s %8s |", "domain", "natural", "unimax", "alpha*");
    for (int i = 0; i < NFINAL; i++) fprintf(o, " %10s", FINAL_NAME[SHOWN[i]]);
    fputc('\n', o);
    for (int m = 0; m < x->M; m++) {
        fprintf(o, "  %-14s %8.4f %8.4f %8.4f |", x->ev[0].names[m], x->mix[RUN_NATURAL][m],
                x->mix[RUN_UNIMAX][m], x->mix[RUN_TANDEM][m]);
        for (int i = 0; i < NFINAL; i++) fprintf(o, " %10.3f", exp(x->ev[SHOWN[i]].loss[m]));
        fputc('\n', o);
    }
    fprintf(o, "  %-14s %8s %8s %8s |", "Average", "", "", "");
    for (int i = 0; i < NFINAL; i++) fprintf(o, " %10.3f", x->ev[SHOWN[i]].average_ppl);
    fputc('\n', o);
    /* repetition made visible: how often each final run saw each domain's train tokens */
    fprintf(o, "epochs of each domain's train tokens in each final run:\n");
    fprintf(o, "  %-14s %8s %8s %8s |", "domain", "", "", "");
    for (int i = 0; i < NFINAL; i++) fprintf(o, " %10s", FINAL_NAME[SHOWN[i]]);
    fputc('\n', o);
    for (int m = 0; m < x->M; m++) {
        fprintf(o, "  %-14s %8s %8s %8s |", x->ev[0].names[m], "", "", "");
        for (int i = 0; i < NFINAL; i++) fprintf(o, " %10.2f", x->epochs[SHOWN[i]][m]);
        fputc('\n', o);
    }
    double vu = pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_UNIFORM].average_ppl);
    double vn = pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_NATURAL].average_ppl);
    double vx = pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_UNIMAX].average_ppl);
    fprintf(o, "TANDEM's Average vs Uniform: %+.2f %%, vs Natural: %+.2f %%, vs UniMax: %+.2f %% "
               "(negative: TANDEM better)\n", vu, vn, vx);
    for (int i = 0; i < NFINAL; i++) {
        int f = SHOWN[i];
        char over[1024];
        if (x->ncurve[f] >= 3 && overfit_domains(x, f, over, sizeof over))
            fprintf(o, "%s: test loss rose before the end on %s\n", FINAL_NAME[f], over);
        else if (x->ncurve[f] >= 3)
            fprintf(o, "%s: no domain's test loss rose before the end (%d kept states)\n",
                    FINAL_NAME[f], x->ncurve[f]);
    }
}

static void json_losses(FILE *o, const compare_ctx *x, const double *loss) {
    fputc('{', o);
    for (int m = 0; m < x->M; m++) {
        if (m) fputc(',', o);
        json_key(o, x->ev[0].names[m]);
        json_num(o, loss[m]);
    }
    fputc('}', o);
}

static void print_json(const compare_ctx *x, FILE *o) {
    fputc('{', o);
    json_key(o, "store");
    json_str(o, x->url);
    fputs(",", o);
    json_key(o, "budget");
    fprintf(o, "{\"episodes\":%d,\"free_steps\":%ld,\"tokens\":%ld}", x->cfg.run.episodes,
            (long)x->cfg.run.episodes * x->cfg.tandem.E,
            (long)x->cfg.run.episodes * x->cfg.tandem.E * x->cfg.train.batch * x->cfg.train.seq);
    fprintf(o, ",\"dmo_seed\":%llu,\"final_seed\":%llu,", (unsigned long long)x->cfg.run.seed,
            (unsigned long long)x->final_seed);
    json_key(o, "runs");
    fputc('{', o);
    for (int f = 0; f < NFINAL; f++) {
        if (f) fputc(',', o);
        json_key(o, FINAL_KEY[f]);
        fputc('{', o);
        json_key(o, "store");
        json_str(o, x->sub[1 + f]);
        fputc(',', o);
        json_key(o, "mixture");
        json_losses(o, x, x->mix[f]);
        fputc(',', o);
        json_key(o, "epochs");
        json_losses(o, x, x->epochs[f]);
        fputc(',', o);
        json_key(o, "test_loss");
        json_losses(o, x, x->ev[f].loss);
        fputc(',', o);
        json_key(o, "average_ppl");
        json_num(o, x->ev[f].average_ppl);
        fputc(',', o);
        json_key(o, "mean_loss");
        json_num(o, x->ev[f].mean_loss);
        fputc(',', o);
        json_key(o, "curve");
        fputc('[', o);
        for (int i = 0; i < x->ncurve[f]; i++) {
            fprintf(o, "%s{\"seq\":%llu,\"test_loss\":", i ? "," : "",
                    (unsigned long long)x->curve[f][i].seq);
            json_losses(o, x, x->curve[f][i].loss);
            fputc('}', o);
        }
        fputs("]}", o);
    }
    fputs("},", o);
    json_key(o, "tandem_vs_uniform");
    json_num(o, x->ev[RUN_TANDEM].average_ppl / x->ev[RUN_UNIFORM].average_ppl);
    fputc(',', o);
    json_key(o, "tandem_vs_natural");
    json_num(o, x->ev[RUN_TANDEM].average_ppl / x->ev[RUN_NATURAL].average_ppl);
    fputc(',', o);
    json_key(o, "tandem_vs_unimax");
    json_num(o, x->ev[RUN_TANDEM].average_ppl / x->ev[RUN_UNIMAX].average_ppl);
    fputc(',', o);
    json_key(o, "alpha");
    fputc('[', o);
    for (size_t t = 0; t < x->chain.n; t++) {
        if (t) fputc(',', o);
        json_losses(o, x, x->chain.rec[t].alpha_next);
    }
    fputs("]}\n", o);
}

/* α trajectories, perplexity bars and (with curves) the Uniform run's test losses. */
static int write_svg(const compare_ctx *x, const char *path, tdm_err *e) {
    int M = x->M, rc = 0;
    size_t n = x->chain.n + 1; /* α_0 and every α_{t+1} */
    double *ay = calloc(n * (size_t)M, sizeof *ay);
    double bars[NFINAL][REC_MAX_DOMAINS + 1];
    double cy[REC_MAX_DOMAINS][CURVE_MAX], cx[CURVE_MAX];
    svgplot_series as[REC_MAX_DOMAINS], bs[NFINAL], cs[REC_MAX_DOMAINS];
    const char *cats[REC_MAX_DOMAINS + 1];
    if (!ay) return err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t t = 0; t < n; t++)
        for (int m = 0; m < M; m++)
            ay[(size_t)m * n + t] = t == 0 ? (x->chain.n ? x->chain.rec[0].alpha[m] : 0)
                                           : x->chain.rec[t - 1].alpha_next[m];
    for (int m = 0; m < M; m++) {
        as[m] = (svgplot_series){.name = x->ev[0].names[m], .y = ay + (size_t)m * n};
        cats[m] = x->ev[0].names[m];
    }
    cats[M] = "Average";
    for (int i = 0; i < NFINAL; i++) {
        int f = SHOWN[i];
        for (int m = 0; m < M; m++) bars[i][m] = exp(x->ev[f].loss[m]);
        bars[i][M] = x->ev[f].average_ppl;
        bs[i] = (svgplot_series){.name = FINAL_NAME[f], .y = bars[i]};
    }
    char t1[sizeof x->sub[0] + 64], t2[256], t3[128];
    snprintf(t1, sizeof t1, "TANDEM: domain weights α over the episodes (%s)", x->sub[0]);
    snprintf(t2, sizeof t2, "Test perplexity (TANDEM's Average %+.2f %% vs Uniform, %+.2f %% vs "
             "Natural, %+.2f %% vs UniMax)",
             pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_UNIFORM].average_ppl),
             pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_NATURAL].average_ppl),
             pct(x->ev[RUN_TANDEM].average_ppl, x->ev[RUN_UNIMAX].average_ppl));
    snprintf(t3, sizeof t3, "Uniform model: test loss per domain over training");
    svgplot p[3] = {
        {.title = t1, .xlabel = "episode", .ylabel = "α", .n = n, .series = as, .nseries = M},
        {.title = t2, .ylabel = "perplexity", .n = (size_t)M + 1, .series = bs, .nseries = NFINAL,
         .categories = cats},
    };
    int panels = 2;
    int nc = x->ncurve[RUN_UNIFORM];
    if (nc > 0) {
        for (int i = 0; i < nc; i++) {
            cx[i] = (double)x->curve[RUN_UNIFORM][i].seq;
            for (int m = 0; m < M; m++) cy[m][i] = x->curve[RUN_UNIFORM][i].loss[m];
        }
        for (int m = 0; m < M; m++) cs[m] = (svgplot_series){.name = x->ev[0].names[m], .y = cy[m]};
        p[2] = (svgplot){.title = t3, .xlabel = "run position (steps)", .ylabel = "test loss (nats)",
                         .x = cx, .n = (size_t)nc, .series = cs, .nseries = M};
        panels = 3;
    }
    size_t len = 0;
    char *doc = svgplot_render_stack(p, panels, "tandem compare", &len, e);
    if (!doc) rc = e->code;
    outfile o;
    if (!rc) rc = outfile_open(&o, "--svg", path, e);
    if (!rc)
        rc = outfile_close(&o, fwrite(doc, 1, len, o.f) == len ? 0 : err_sys(e, ERR_USAGE, errno, "--svg %s: cannot write it", path),
                           0, e);
    free(doc);
    free(ay);
    return rc;
}

static int run_compare(const cli_args *a) {
    compare_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        fprintf(stderr, "tandem compare: out of memory\n");
        return ERR_INTERNAL;
    }
    x->config_path = a->arg[0];
    x->sets = cli_list(a, "--set", &x->nsets);
    /* the runs' episode lines only as a status line on a terminal; logs get the stages */
    x->progress = cli_given(a, "--quiet") ? PROGRESS_QUIET : PROGRESS_BRIEF;
    const char *store_opt = cli_str(a, "--store", NULL), *svg = cli_str(a, "--svg", NULL);
    const char *seed_opt = cli_str(a, "--final-seed", NULL);
    char **allow = NULL, **allow_copy = NULL;
    int json = cli_json(a), curves = cli_given(a, "--curves"), have_seed = seed_opt != NULL;
    int rc = 0, nallow = 0, ncopy = 0;
    tdm_err e = {0};
    eval_set_stop_check(run_signal_pending); /* a stop ends an evaluation between batches */
    if (seed_opt && args_parse_u64(seed_opt, &x->final_seed)) {
        fprintf(stderr, "tandem compare: --final-seed: '%s' is not a non-negative integer\n", seed_opt);
        cli_usage(a->spec, stderr);
        free(x);
        return ERR_USAGE;
    }
    /* each --allow-change value is "k1,k2,...": the keys of all of them */
    char **lists = cli_list(a, "--allow-change", &ncopy);
    if (ncopy && !(allow_copy = calloc((size_t)ncopy, sizeof *allow_copy)))
        rc = err_set(&e, ERR_INTERNAL, "out of memory");
    for (int i = 0; !rc && i < ncopy; i++) {
        if (!(allow_copy[i] = strdup(lists[i]))) rc = err_set(&e, ERR_INTERNAL, "out of memory");
        char *save = NULL;
        for (char *tok = rc ? NULL : strtok_r(allow_copy[i], ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            char **l = realloc(allow, (size_t)(nallow + 1) * sizeof *l);
            if (!l) {
                rc = err_set(&e, ERR_INTERNAL, "out of memory");
                break;
            }
            (allow = l)[nallow++] = tok;
        }
    }
    x->allow = allow;
    x->nallow = nallow;
    if (!rc) rc = config_load(&x->cfg, x->config_path, x->sets, x->nsets, &e);
    if (!rc) rc = dataset_load(&x->ds, x->cfg.data.dataset, &e);
    if (!rc) {
        x->M = dataset_n_domains(&x->ds);
        if (!have_seed && x->cfg.run.seed > UINT64_MAX - 1000) /* + 1000 would wrap to a small seed */
            rc = err_set(&e, ERR_USAGE, "run.seed = %llu: the final runs' seed (run.seed + 1000) would wrap; give "
                         "--final-seed N", (unsigned long long)x->cfg.run.seed);
        if (!have_seed) x->final_seed = x->cfg.run.seed + 1000;
        /* every final run is scored on the test split: a domain without one window of it
         * would fail the comparison after all five runs had trained */
        for (int m = 0; !rc && m < x->M; m++) {
            const dataset_split *ts = &x->ds.domains[m].split[SPLIT_TEST];
            int window = 0; /* a window lies inside one shard (runner/evaluate.c) */
            for (size_t i = 0; i < ts->n_shards; i++) window |= ts->shards[i].n >= (size_t)x->cfg.train.seq + 1;
            if (!window)
                rc = err_set(&e, ERR_USAGE, "%s: domain %s has %llu test tokens and no window of %d "
                             "(train.seq + 1): tandem compare scores every run on the test split; give it test "
                             "text (tandem prep --split T,V,E) before the runs start",
                             x->ds.path, dataset_domain_name(&x->ds, m),
                             (unsigned long long)ts->tokens, x->cfg.train.seq + 1);
        }
        /* the final runs (fixed: sample mixing, whole sequences, unless data.mixing says
         * weight) must fit the caps too: said before the DMO's hours, not after them */
        double epochs[64];
        int capped = rc ? 0 : domain_caps_resolve(x->cfg.data.max_epochs, &x->ds, epochs, &e);
        if (capped < 0 || capped > 1) rc = capped;
        else if (capped)
            rc = domain_caps_fit(x->cfg.data.max_epochs, &x->ds, epochs,
                                 (double)x->cfg.run.episodes * x->cfg.tandem.E * x->cfg.train.batch, x->cfg.train.seq,
                                 x->cfg.data.mixing != CONFIG_MIXING_WEIGHT,
                                 "each final run: run.episodes x tandem.E x train.batch x train.seq", NULL, &e);
        if (!rc && x->final_seed == x->cfg.run.seed)
            rc = err_set(&e, ERR_USAGE, "--final-seed %llu equals run.seed: the final runs must be "
                         "seeded independently of the DMO", (unsigned long long)x->final_seed);
        compare_url(x->config_path, store_opt, &x->cfg, x->url, sizeof x->url);
        for (int i = 0; i < COMPARE_NRUNS; i++) join_url(x->url, compare_runs[i], x->sub[i], sizeof x->sub[i]);
    }
    /* its five runs live in folders of the root: not inside a run's store or a sweep's root */
    if (!rc) {
        tdm_err oe;
        store *root = store_open_existing(x->url, STORE_OPEN_READ_ONLY, &oe);
        int has_run = 0, has_sweep = 0;
        if (root && !(rc = store_exists(root, LEDGER_RUN, &has_run, &e)) && !(rc = store_exists(root, LEDGER_SWEEP, &has_sweep, &e)) &&
            (has_run || has_sweep))
            rc = err_set(&e, ERR_USAGE, "%s holds %s: a comparison keeps its five runs in folders of a root of its own; "
                         "give it another --store", x->url, has_run ? "a run (RUN)" : "a sweep (SWEEP)");
        if (root) store_close(root);
    }
    const char *only = cli_str(a, "--only", NULL);
    long point = cli_given(a, "--point") ? cli_int(a, "--point", -1) : -1;
    if (!rc && point >= 0 && !(only && !strcmp(only, "final")))
        rc = err_set(&e, ERR_USAGE, "--point is for --only final");
    if (!rc && only) {
        rc = run_only(x, only, point, &e);
        if (!rc && (json || svg)) fprintf(stderr, "tandem compare: --only: no result to report yet\n");
        goto done;
    }
    if (!rc) rc = run_all(x, &e);
    if (!rc) rc = read_mixtures(x, &e);
    if (!rc) rc = evaluate_all(x, curves, &e);
    if (!rc && svg) rc = write_svg(x, svg, &e);
    if (!rc) {
        if (json) print_json(x, stdout);
        else print_text(x, stdout);
        if (svg && x->progress != PROGRESS_QUIET) fprintf(stderr, "tandem compare: wrote %s\n", svg);
    }
done:
    /* a stop is said (not with --quiet), an error always (with --quiet a stop printed an
     * empty one); --json says either on stdout too, as every command's document does */
    if (rc == RUN_EXIT_REQUEUE) {
        snprintf(e.msg, sizeof e.msg, "stopped by a signal; run the same command again to resume");
        if (x->progress != PROGRESS_QUIET) fprintf(stderr, "tandem compare: %s\n", e.msg);
    } else if (rc) {
        fprintf(stderr, "tandem compare: %s\n", e.msg);
    }
    if (rc && json) json_document(stdout, rc, e.msg, NULL);
    audit_chain_free(&x->chain);
    dataset_free(&x->ds);
    free(allow);
    for (int i = 0; allow_copy && i < ncopy; i++) free(allow_copy[i]);
    free(allow_copy);
    free(x);
    return rc;
}

int cmd_compare(int argc, char **argv) { return cli_run(&SPEC, run_compare, argc, argv); }
