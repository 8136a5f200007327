/* cmd_metrics.c — `tandem metrics STORE`: what each episode measured (ledger/metrics.h),
 * as it survived every preemption: a table, CSV or JSON lines; an SVG of the free-phase
 * losses; or TensorBoard event files. */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/term.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "ledger/audit.h"
#include "ledger/metrics.h"
#include "report/metrics_log.h"
#include "config/run_config.h"
#include "report/svgplot.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/outfile.h"

static const cli_opt OPTS[] = {
    {"--format", CLI_STR, NULL, "a table (default), CSV or JSON lines (one object per episode)",
     "table|csv|jsonl", 0, 0, NULL, NULL},
    {"--plot", CLI_STR, "FILE.svg", "the free-phase loss per domain over the episodes", NULL, 0, 0,
     NULL, NULL},
    {"--tensorboard", CLI_STR, "DIR", "write every row as TensorBoard scalars into an event file in\n"
                                      "DIR (tensorboard --logdir DIR; wandb sync --sync-tensorboard),\n"
                                      "replacing an earlier export there; refused beside a live log",
     NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {
    "metrics", "STORE", 1, 1, "a STORE is required",
    "What each episode of a run measured, committed with the episode so that no preemption\n"
    "loses or repeats a row: the free-phase loss, the probe's losses of both twins and alpha\n"
    "per domain, the learning rates, the gradient norm, tokens/s, the episode's and the last\n"
    "commit's seconds, and when and where it ran (docs/metrics.md).",
    OPTS, NULL};

static void iso_time(double t, char out[32]) {
    time_t s = (time_t)t;
    struct tm tm;
    if (!isfinite(t) || !gmtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, 32, "-");
}

/* A domain's header: its whole name up to TABLE_NAME_MAX characters; a longer one keeps
 * its start and its end around a '~' (no domain name holds one), so that long names
 * sharing a prefix (or a suffix) stay apart. */
#define TABLE_NAME_MAX 32
static void table_name(const char *name, char out[TABLE_NAME_MAX + 1]) {
    size_t n = strlen(name), head = (TABLE_NAME_MAX - 1) / 2, tail = TABLE_NAME_MAX - 1 - head;
    if (n <= TABLE_NAME_MAX) snprintf(out, TABLE_NAME_MAX + 1, "%s", name);
    else snprintf(out, TABLE_NAME_MAX + 1, "%.*s~%s", (int)head, name, name + n - tail);
}

/* Width of a domain's column in a group whose numbers take `min` characters: its header's,
 * so that every row lines up under it. */
static int column_width(const char *label, int min) {
    int n = (int)strlen(label);
    return n > min ? n : min;
}

static void print_table(const rec_metrics *rows, size_t n, const rec_run *run) {
    int M = run->M, wl[REC_MAX_DOMAINS], wa[REC_MAX_DOMAINS], we[REC_MAX_DOMAINS];
    char lab[REC_MAX_DOMAINS][TABLE_NAME_MAX + 1];
    for (int d = 0; d < M; d++) {
        table_name(run->domains[d], lab[d]);
        wl[d] = column_width(lab[d], 10);
        wa[d] = column_width(lab[d], 8);
        we[d] = column_width(lab[d], 7);
    }
    printf("%7s %7s", "episode", "seq");
    for (int d = 0; d < M; d++) printf(" %*s", wl[d], lab[d]);
    printf(" |");
    for (int d = 0; d < M; d++) printf(" %*s", wa[d], lab[d]);
    printf(" |");
    for (int d = 0; d < M; d++) printf(" %*s", we[d], lab[d]);
    printf(" %10s %9s %10s %8s %8s  %s\n", "lr", "grad", "tok/s", "ep s", "commit s", "time");
    printf("%15s", "");
    for (int d = 0; d < M; d++) printf(" %*s", wl[d], d == 0 ? "loss" : "");
    printf(" |");
    for (int d = 0; d < M; d++) printf(" %*s", wa[d], d == 0 ? "alpha" : "");
    printf(" |");
    for (int d = 0; d < M; d++) printf(" %*s", we[d], d == 0 ? "epochs" : "");
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        const rec_metrics *m = &rows[i];
        char when[32];
        iso_time(m->time, when);
        printf("%7llu %7llu", (unsigned long long)m->t, (unsigned long long)m->seq);
        for (int d = 0; d < M; d++) printf(" %*.5f", wl[d], d < m->M ? m->loss[d] : NAN);
        printf(" |");
        for (int d = 0; d < M; d++) printf(" %*.4f", wa[d], d < m->M ? m->alpha[d] : NAN);
        printf(" |");
        for (int d = 0; d < M; d++)
            if (m->has_seen && d < m->M) printf(" %*.3g", we[d], m->epochs[d]);
            else printf(" %*s", we[d], "-");
        printf(" %10.3g %9.4g %10.0f %8.2f %8.2f  %s ", m->lr, m->grad_norm, m->tokens_per_s,
               m->episode_s, m->commit_s, when);
        term_text(stdout, m->host); /* the store's text: no escapes into the terminal */
        putchar('\n');
    }
}

/* The CSV's columns that are no domain's, in order. */
static const char *const CSV_FIXED[] = {"episode", "seq", "time", "host", "attempt", "lr", "lr_alpha", "grad_norm",
                                        "free_steps", "tokens_per_s", "episode_s", "commit_s", "val_tokens",
                                        "step_first", "step_loss"};
#define CSV_NFIXED ((int)(sizeof CSV_FIXED / sizeof *CSV_FIXED))

/* Whether <metric>_<domain> names two columns alike: domains x and u_x give loss_u_x as
 * loss_u of x and loss of u_x (a CSV reader keeps one of the two); and a domain named
 * tokens gives val_tokens, a column of its own (a review). */
static int columns_collide(const char *const *per, int nper, const rec_run *run) {
    for (int k = 0; k < nper; k++)
        for (int d = 0; d < run->M; d++)
            for (int f = 0; f < CSV_NFIXED; f++) {
                char a[200];
                snprintf(a, sizeof a, "%s_%s", per[k], run->domains[d]);
                if (!strcmp(a, CSV_FIXED[f])) return 1;
            }
    for (int k = 0; k < nper; k++)
        for (int d = 0; d < run->M; d++)
            for (int k2 = 0; k2 < nper; k2++)
                for (int d2 = 0; d2 < run->M; d2++) {
                    if (k == k2 && d == d2) continue;
                    char a[200], b[200];
                    snprintf(a, sizeof a, "%s_%s", per[k], run->domains[d]);
                    snprintf(b, sizeof b, "%s_%s", per[k2], run->domains[d2]);
                    if (!strcmp(a, b)) return 1;
                }
    return 0;
}

static void print_csv(const rec_metrics *rows, size_t n, const rec_run *run) {
    static const char *const per[] = {"loss", "loss_u", "loss_w", "alpha", "seen", "epochs", "val"};
    /* <metric>_<domain>, unless the domains' names make two columns alike: then
     * <metric>:<domain> (no name holds ':'), said on stderr */
    char sep = '_';
    if (columns_collide(per, 7, run)) {
        sep = ':';
        fprintf(stderr, "tandem metrics: the domains' names make <metric>_<domain> name two columns alike "
                "(loss_u_x: loss_u of x, loss of u_x); the columns are <metric>:<domain>\n");
    }
    for (int f = 0; f < 12; f++) printf(f ? ",%s" : "%s", CSV_FIXED[f]); /* the last three after the domains' */
    for (int k = 0; k < 7; k++)
        for (int d = 0; d < run->M; d++) {
            char col[200];
            snprintf(col, sizeof col, "%s%c%s", per[k], sep, run->domains[d]);
            putchar(',');
            csv_field(stdout, col);
        }
    /* the row's other fields, as in JSON lines (a hunt: the CSV had none of them); the
     * free steps' losses in one field, space-separated (their count varies by row) */
    for (int f = 12; f < CSV_NFIXED; f++) printf(",%s", CSV_FIXED[f]);
    putchar('\n');
    for (size_t i = 0; i < n; i++) {
        const rec_metrics *m = &rows[i];
        printf("%llu,%llu,%.3f,", (unsigned long long)m->t, (unsigned long long)m->seq, m->time);
        csv_field(stdout, m->host);
        printf(",%llu,%.17g,%.17g,%.17g,%llu,%.17g,%.17g,%.17g", (unsigned long long)m->attempt,
               m->lr, m->lr_alpha, m->grad_norm, (unsigned long long)m->free_steps,
               m->tokens_per_s, m->episode_s, m->commit_s);
        const double *v[] = {m->loss, m->loss_u, m->loss_w, m->alpha, m->seen, m->epochs, m->val};
        for (int k = 0; k < 7; k++)
            for (int d = 0; d < run->M; d++) {
                if (((k == 1 || k == 2) && !m->has_probe) || ((k == 4 || k == 5) && !m->has_seen) ||
                    (k == 6 && !m->has_val))
                    printf(",");
                else printf(",%.17g", d < m->M ? v[k][d] : NAN);
            }
        if (m->has_val) printf(",%llu", (unsigned long long)m->val_tokens);
        else printf(",");
        if (m->n_steps) printf(",%llu,", (unsigned long long)m->step_first);
        else printf(",,");
        for (int s = 0; s < m->n_steps; s++) printf(s ? " %.17g" : "%.17g", m->step_loss[s]);
        putchar('\n');
    }
}

static void json_domains(const char *key, const double *v, const rec_metrics *m, const rec_run *run) {
    printf(",");
    json_key(stdout, key);
    printf("{");
    for (int d = 0; d < m->M && d < run->M; d++) {
        if (d) printf(",");
        json_key(stdout, run->domains[d]);
        json_num(stdout, v[d]);
    }
    printf("}");
}

static void print_jsonl(const rec_metrics *rows, size_t n, const rec_run *run) {
    for (size_t i = 0; i < n; i++) {
        const rec_metrics *m = &rows[i];
        char when[32];
        iso_time(m->time, when);
        printf("{\"episode\":%llu,\"seq\":%llu,\"time\":", (unsigned long long)m->t,
               (unsigned long long)m->seq);
        json_num(stdout, m->time);
        printf(",\"time_iso\":");
        json_str(stdout, when);
        printf(",\"host\":");
        json_str(stdout, m->host);
        printf(",\"attempt\":%llu", (unsigned long long)m->attempt);
        const char *names[METRICS_SCALARS];
        double values[METRICS_SCALARS];
        metrics_scalars(m, names, values);
        for (int k = 0; k < METRICS_SCALARS; k++) {
            printf(",");
            json_key(stdout, names[k]);
            json_num(stdout, values[k]);
        }
        printf(",\"free_steps\":%llu", (unsigned long long)m->free_steps);
        json_domains("loss", m->loss, m, run);
        if (m->has_probe) {
            json_domains("loss_u", m->loss_u, m, run);
            json_domains("loss_w", m->loss_w, m, run);
        }
        json_domains("alpha", m->alpha, m, run);
        if (m->has_seen) {
            json_domains("seen", m->seen, m, run);
            json_domains("epochs", m->epochs, m, run);
        }
        if (m->n_steps) {
            printf(",\"step_first\":%llu,\"step_loss\":[", (unsigned long long)m->step_first);
            for (int i = 0; i < m->n_steps; i++) {
                if (i) printf(",");
                json_num(stdout, m->step_loss[i]);
            }
            printf("]");
        }
        if (m->has_val) {
            json_domains("val", m->val, m, run);
            printf(",\"val_tokens\":%llu", (unsigned long long)m->val_tokens);
        }
        printf("}\n");
    }
}

static int plot(const char *path, const rec_metrics *rows, size_t n, const rec_run *run,
                const char *url, tdm_err *e) {
    int M = run->M;
    double *x = calloc(n ? n : 1, sizeof *x), *y = calloc((n ? n : 1) * (size_t)(M ? M : 1), sizeof *y);
    svgplot_series *s = calloc((size_t)(M ? M : 1), sizeof *s);
    int rc = 0;
    if (!x || !y || !s) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        x[i] = (double)rows[i].t;
        for (int d = 0; d < M; d++) y[(size_t)d * n + i] = d < rows[i].M ? rows[i].loss[d] : NAN;
    }
    for (int d = 0; !rc && d < M; d++) {
        s[d].name = run->domains[d];
        s[d].y = y + (size_t)d * n;
    }
    char title[700];
    snprintf(title, sizeof title, "Free-phase train loss of %s (%s)", run->run_id, url);
    svgplot p = {.title = title, .xlabel = "episode", .ylabel = "loss (nats/token)", .x = x,
                 .n = n, .series = s, .nseries = M};
    outfile o;
    if (!rc) rc = outfile_open(&o, "--plot", path, e);
    if (!rc) {
        int wrc = svgplot_write(&p, o.f, e);
        if (wrc) err_prefix(e, "--plot %s: ", path);
        rc = outfile_close(&o, wrc, 0, e);
    }
    free(x), free(y), free(s);
    return rc;
}

static int run_metrics(const cli_args *a) {
    const char *url = a->arg[0], *format = cli_str(a, "--format", "table");
    const char *svg = cli_str(a, "--plot", NULL), *tb = cli_str(a, "--tensorboard", NULL);
    if ((svg || tb) && cli_given(a, "--format")) { /* the files replace the listing: one was ignored */
        fprintf(stderr, "tandem metrics: %s writes %s instead of the listing that --format %s shapes: give "
                "one (run twice for both)\n", svg ? "--plot" : "--tensorboard", svg ? "the chart" : "event files",
                cli_str(a, "--format", ""));
        return ERR_USAGE;
    }
    tdm_err e = {0};
    rec_run run;
    memset(&run, 0, sizeof run);
    rec_metrics *rows = NULL;
    size_t n = 0, skipped = 0;
    /* a URL given for --plot or --tensorboard ("s3://b/tb": written before as the local
     * folder ./s3:/b/tb, with "wrote s3://b/tb/events..." said) is refused first */
    int rc = svg ? outfile_check_local("--plot", svg, &e) : 0;
    if (!rc && tb) rc = outfile_check_local("--tensorboard", tb, &e);
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!rc && !st) rc = e.code;
    if (!rc) rc = run_config_read_run(st, &run, &e);
    if (!rc) rc = ledger_metrics_read(st, &rows, &n, &skipped, &e);
    if (!rc && n == 0)
        fprintf(stderr, "tandem metrics: %s holds no metrics rows (no episode has finished, or the "
                "run was made by a tandem before metrics were kept: tandem alpha shows its history)\n",
                url);
    /* an empty chart or event file would read as a run that learned nothing: none written */
    if (!rc && n == 0 && (svg || tb))
        rc = err_set(&e, ERR_USAGE, "no %s written: there is no row to draw yet", svg ? svg : "event file");
    if (!rc && !svg && !tb) {
        if (!strcmp(format, "csv")) print_csv(rows, n, &run);
        else if (!strcmp(format, "jsonl")) print_jsonl(rows, n, &run);
        else print_table(rows, n, &run);
    }
    if (!rc && svg && !(rc = plot(svg, rows, n, &run, url, &e)))
        fprintf(stderr, "tandem metrics: wrote %s (%zu episodes, %d domains)\n", svg, n, run.M);
    /* a row deleted is said rather than drawn over (a damaged one is said by
     * ledger_metrics_read, once) */
    audit_gap gaps[3];
    size_t ng = 0;
    if (!rc) rc = audit_metrics_gaps(st, gaps, 3, &ng, &e);
    for (size_t i = 0; !rc && i < ng; i++) {
        if (gaps[i].first == gaps[i].last)
            fprintf(stderr, "tandem metrics: warning: episode %llu has no row (metrics/%llu.mp is missing)\n",
                    (unsigned long long)gaps[i].first, (unsigned long long)gaps[i].first);
        else
            fprintf(stderr, "tandem metrics: warning: episodes %llu..%llu have no rows (missing from metrics/)\n",
                    (unsigned long long)gaps[i].first, (unsigned long long)gaps[i].last);
    }
    if (!rc && tb) {
        const char *names[REC_MAX_DOMAINS];
        for (int d = 0; d < run.M; d++) names[d] = run.domains[d];
        /* DIR is one TensorBoard run: beside a live log the history would double it (refused,
         * before anything is written); an earlier export is replaced once this one is in place */
        rc = tfevents_export_check(tb, &e);
        tfevents *w = rc ? NULL : tfevents_open(tb, 1, &e); /* whole or not at all */
        if (!rc && !w) rc = e.code;
        for (size_t i = 0; !rc && i < n; i++) rc = metrics_log_tfevents(w, &rows[i], names, &e);
        char path[4200];
        int crc = tfevents_close_named(w, !rc, path, sizeof path, &e);
        if (!rc) rc = crc;
        int gone = rc ? 0 : tfevents_export_sweep(tb, path);
        if (!rc) fprintf(stderr, "tandem metrics: wrote %s (%zu episodes)%s\n", path, n,
                         gone ? ", replacing the earlier export there" : "");
    }
    free(rows);
    rec_run_free(&run);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem metrics: %s\n", e.msg);
    return rc;
}

int cmd_metrics(int argc, char **argv) { return cli_run(&SPEC, run_metrics, argc, argv); }
