/* cmd_results.c — `tandem results ROOT`: a sweep's outcome, one row per point.
 *
 *   tandem results ROOT [--split test|val] [--max-tokens N] [--format table|csv|json] [--svg F]
 *
 * For every point of the study recorded at ROOT/SWEEP (deploy/sweep_root.h): its state,
 * and for a finished point the per-domain perplexity of its final state on the split
 * (every window in order, as `tandem eval` measures it), their Average = exp(mean loss) and
 * its α* (a TANDEM run's mixture.mp). Points not finished are listed with their state and
 * no numbers. --svg draws the Average per point, the per-domain perplexities and α* as bar
 * charts. Exit 0 when every point could be read (finished or not); 3 when ROOT is not a
 * sweep's root or its record is damaged.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/term.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "data/dataset.h"
#include "config/run_config.h"
#include "deploy/sweep_root.h"
#include "report/progress.h"
#include "report/svgplot.h"
#include "model/blas_core.h"
#include "runner/evaluate.h"
#include "util/args.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/outfile.h"

static const cli_opt OPTS[] = {
    {"--split", CLI_STR, NULL, "the split to evaluate (default test)", "test|val", 0, 0, NULL, NULL},
    {"--max-tokens", CLI_STR, "N", "at most N target tokens per domain, in whole windows (default all; 500k, 2M)", NULL, 0, 0,
     NULL, NULL},
    {"--format", CLI_STR, NULL, "a table (default), CSV (one row per point and domain) or JSON", "table|csv|json", 0,
     0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "the same as --format json", NULL, 0, 0, NULL, NULL},
    {"--svg", CLI_STR, "FILE", "Average perplexity, per-domain perplexity and alpha* per point as bar charts", NULL,
     0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"results", "ROOT", 1, 1, "a sweep's ROOT is required",
                              "Every point of a sweep (the --store of `tandem run --sweep`): its state and,\n"
                              "once finished, per-domain perplexity on a split, their Average and alpha*.",
                              OPTS, NULL};

/* One point: where it stands and, when finished, what it scores. */
typedef struct point_result {
    sweep_point p;
    int evaluated;
    eval_result ev;
} point_result;

/* Whether every evaluated point has the same domains (then the table has one column per
 * domain); *first gets the index of the first evaluated point (npoints: none). */
static int same_domains(const point_result *r, size_t n, size_t *first) {
    *first = n;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].evaluated) continue;
        if (*first == n) {
            *first = i;
            continue;
        }
        const eval_result *a = &r[*first].ev, *b = &r[i].ev;
        if (a->M != b->M) return 0;
        for (int m = 0; m < a->M; m++)
            if (strcmp(a->names[m], b->names[m])) return 0;
    }
    return 1;
}

/* The α* of point r for domain `name` (NAN when it has none). */
static double alpha_of(const point_result *r, const char *name) {
    for (int m = 0; r->p.have_mixture && m < r->p.mixture.M; m++)
        if (!strcmp(r->p.mixture.names[m], name)) return r->p.mixture.alpha[m];
    return NAN;
}

static void print_table(const char *url, const char *split, const point_result *r, size_t n) {
    size_t first;
    int wide = same_domains(r, n, &first);
    int w = 5; /* the label column: as wide as the longest label */
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(r[i].p.label) > w) w = (int)strlen(r[i].p.label);
    printf("sweep %s: %zu points, %s split (perplexity per domain, Average = exp(mean loss))\n", url, n, split);
    printf("  %5s  %-8s  %-*s", "point", "state", w, "label");
    if (wide && first < n)
        for (int m = 0; m < r[first].ev.M; m++) printf("  %10.10s", r[first].ev.names[m]);
    printf("  %10s  %s\n", "Average", "alpha*");
    for (size_t i = 0; i < n; i++) {
        const point_result *x = &r[i];
        char shown[2048]; /* the label holds a sweep's values (paths too): no escapes */
        term_copy(shown, sizeof shown, x->p.label);
        printf("  %5zu  %-8s  %-*s", i, sweep_point_state_name(x->p.state), w, shown);
        if (!x->evaluated) {
            printf("  %s\n", x->p.state == SWEEP_POINT_DAMAGED ? x->p.why : "");
            continue;
        }
        if (wide)
            for (int m = 0; m < x->ev.M; m++) printf("  %10.3f", exp(x->ev.loss[m]));
        else
            for (int m = 0; m < x->ev.M; m++) printf("  %s %.3f", x->ev.names[m], exp(x->ev.loss[m]));
        printf("  %10.3f ", x->ev.average_ppl);
        for (int m = 0; x->p.have_mixture && m < x->p.mixture.M; m++)
            printf(" %s %.4f", x->p.mixture.names[m], x->p.mixture.alpha[m]);
        if (!x->p.have_mixture) printf(" %s", x->p.fixed ? "(fixed mixture)" : "-");
        printf("\n");
    }
}

/* CSV: one row per point and domain, plus a row "Average" per evaluated point; points
 * without numbers get one row with empty fields. */
static void print_csv(const point_result *r, size_t n) {
    printf("point,label,state,domain,alpha,loss,ppl,tokens\n");
    for (size_t i = 0; i < n; i++) {
        const point_result *x = &r[i];
        if (!x->evaluated) {
            printf("%zu,", i);
            csv_field(stdout, x->p.label);
            printf(",%s,,,,,\n", sweep_point_state_name(x->p.state));
            continue;
        }
        for (int m = 0; m <= x->ev.M; m++) {
            int avg = m == x->ev.M;
            double a = avg ? NAN : alpha_of(x, x->ev.names[m]);
            double loss = avg ? x->ev.mean_loss : x->ev.loss[m];
            printf("%zu,", i);
            csv_field(stdout, x->p.label);
            printf(",%s,", sweep_point_state_name(x->p.state));
            csv_field(stdout, avg ? "Average" : x->ev.names[m]);
            if (isnan(a)) printf(",");
            else printf(",%.17g", a);
            printf(",%.17g,%.17g,", loss, exp(loss));
            if (!avg) printf("%llu", (unsigned long long)x->ev.tokens[m]);
            printf("\n");
        }
    }
}

static void print_json(FILE *j, const char *url, const char *split, const point_result *r, size_t n) {
    fprintf(j, ",\"root\":");
    json_str(j, url);
    fprintf(j, ",\"split\":");
    json_str(j, split);
    fprintf(j, ",\"points\":[");
    for (size_t i = 0; i < n; i++) {
        const point_result *x = &r[i];
        fprintf(j, "%s{\"index\":%zu,\"label\":", i ? "," : "", i);
        json_str(j, x->p.label);
        fprintf(j, ",\"store\":");
        json_str(j, x->p.url);
        fprintf(j, ",\"state\":");
        json_str(j, sweep_point_state_name(x->p.state));
        fprintf(j, ",\"problem\":");
        json_str(j, x->p.state == SWEEP_POINT_DAMAGED ? x->p.why : NULL);
        if (x->evaluated) {
            fprintf(j, ",\"seq\":%llu,\"domains\":{", (unsigned long long)x->ev.seq);
            for (int m = 0; m < x->ev.M; m++) {
                if (m) fputc(',', j);
                json_key(j, x->ev.names[m]);
                fprintf(j, "{\"loss\":");
                json_num(j, x->ev.loss[m]);
                fprintf(j, ",\"ppl\":");
                json_num(j, exp(x->ev.loss[m]));
                fprintf(j, ",\"tokens\":%llu,\"alpha\":", (unsigned long long)x->ev.tokens[m]);
                json_num(j, alpha_of(x, x->ev.names[m]));
                fputc('}', j);
            }
            fprintf(j, "},\"average_ppl\":");
            json_num(j, x->ev.average_ppl);
            fprintf(j, ",\"mean_loss\":");
            json_num(j, x->ev.mean_loss);
        } else {
            fprintf(j, ",\"seq\":null,\"domains\":null,\"average_ppl\":null,\"mean_loss\":null");
        }
        fputc('}', j);
    }
    fputc(']', j);
}

/* --svg: the Average per point; the per-domain perplexities; α* (when any point has
 * one), as bar charts over the points' labels. Points without numbers have no bars. */
static int write_svg(const char *path, const char *url, const char *split, const point_result *r, size_t n,
                     tdm_err *e) {
    size_t first;
    int wide = same_domains(r, n, &first);
    int M = first < n ? r[first].ev.M : 0;
    if (!wide) M = 0; /* domains differ between points: the Average alone */
    const char **labels = calloc(n ? n : 1, sizeof *labels);
    double *avg = calloc(n ? n : 1, sizeof *avg);
    double *ppl = calloc((size_t)(M ? M : 1) * (n ? n : 1), sizeof *ppl);
    double *alpha = calloc((size_t)(M ? M : 1) * (n ? n : 1), sizeof *alpha);
    if (!labels || !avg || !ppl || !alpha) {
        free(labels), free(avg), free(ppl), free(alpha);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    int any_alpha = 0;
    svgplot_series avg_s = {.name = "Average", .y = avg}, dom[REC_MAX_DOMAINS], al[REC_MAX_DOMAINS];
    for (size_t i = 0; i < n; i++) {
        labels[i] = r[i].p.label;
        avg[i] = r[i].evaluated ? r[i].ev.average_ppl : NAN;
        for (int m = 0; m < M; m++) {
            ppl[(size_t)m * n + i] = r[i].evaluated ? exp(r[i].ev.loss[m]) : NAN;
            alpha[(size_t)m * n + i] = r[i].evaluated ? alpha_of(&r[i], r[first].ev.names[m]) : NAN;
            any_alpha |= !isnan(alpha[(size_t)m * n + i]);
        }
    }
    for (int m = 0; m < M; m++) {
        dom[m] = (svgplot_series){.name = r[first].ev.names[m], .y = ppl + (size_t)m * n};
        al[m] = (svgplot_series){.name = r[first].ev.names[m], .y = alpha + (size_t)m * n};
    }
    char t1[512], t2[512], t3[512];
    snprintf(t1, sizeof t1, "Average %s perplexity per point (%s)", split, url);
    snprintf(t2, sizeof t2, "%s perplexity per domain", split);
    snprintf(t3, sizeof t3, "alpha* per domain (TANDEM points)");
    svgplot p[3] = {
        {.title = t1, .ylabel = "perplexity", .n = n, .series = &avg_s, .nseries = 1, .categories = labels,
         .empty_text = "no points"},
        {.title = t2, .ylabel = "perplexity", .n = n, .series = dom, .nseries = M, .categories = labels,
         .empty_text = "no points"},
        {.title = t3, .ylabel = "alpha*", .n = n, .series = al, .nseries = M, .categories = labels, .ymin = 0,
         .ymax = 1, .empty_text = "no points"},
    };
    int panels = M == 0 ? 1 : any_alpha ? 3 : 2;
    size_t len = 0;
    char *doc = svgplot_render_stack(p, panels, t1, &len, e);
    int rc = doc ? 0 : e->code;
    outfile o;
    if (!rc) rc = outfile_open(&o, "--svg", path, e);
    if (!rc)
        rc = outfile_close(&o, fwrite(doc, 1, len, o.f) == len ? 0 : err_sys(e, ERR_USAGE, errno, "--svg %s: cannot write it", path),
                           0, e);
    free(doc);
    free(labels), free(avg), free(ppl), free(alpha);
    return rc;
}

static int run_results(const cli_args *a) {
    const char *url = a->arg[0], *split_name = cli_str(a, "--split", "test");
    const char *format = cli_json(a) ? "json" : cli_str(a, "--format", "table");
    const char *svg = cli_str(a, "--svg", NULL);
    int json = !strcmp(format, "json");
    tdm_err e = {0};
    int rc = 0;
    uint64_t max_tokens = UINT64_MAX;
    const char *mt = cli_str(a, "--max-tokens", NULL);
    if (cli_given(a, "--json") && cli_given(a, "--format") && strcmp(cli_str(a, "--format", ""), "json"))
        rc = err_set(&e, ERR_USAGE, "--json and --format %s disagree: give one", cli_str(a, "--format", ""));
    if (!rc && mt && (args_parse_count(mt, &max_tokens) || max_tokens == 0))
        rc = err_set(&e, ERR_USAGE, "--max-tokens %s: give the most target tokens per domain (a whole number "
                     "above 0 with an optional k, M, G (or Ki, Mi, Gi) and below 2^64), or leave it out for all", mt);
    int split = -1;
    for (int s = 0; s < SPLIT_COUNT; s++)
        if (!strcmp(split_name, dataset_split_name(s))) split = s;
    if (!rc && split < 0) rc = err_set(&e, ERR_USAGE, "--split %s: use test or val", split_name);
    if (rc) {
        fprintf(stderr, "tandem results: %s\n", e.msg);
        cli_usage(a->spec, stderr);
        if (json) json_document(stdout, rc, e.msg, NULL);
        return rc;
    }
    store *root = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    sweep sw;
    memset(&sw, 0, sizeof sw);
    if (!root) rc = e.code;
    if (!rc) {
        rc = sweep_root_read(root, &sw, NULL, &e);
        char runs[200];
        if (rc == STORE_NOT_FOUND && run_config_compare_runs(root, runs, sizeof runs) > 0)
            rc = err_set(&e, ERR_STORE, "%s is the store of a tandem compare (its runs: %s), not a sweep's "
                         "root: its table comes from `tandem compare CONFIG --store %s` (finished runs "
                         "report at once), one run's test loss from `tandem eval %s/tandem` (or /uniform, ...)",
                         url, runs, url, url);
        else if (rc == STORE_NOT_FOUND)
            rc = err_set(&e, ERR_STORE, "%s is not a sweep's root (no SWEEP record; `tandem run --sweep ... "
                         "--store %s` writes it when a point starts): for one run use tandem eval", url, url);
        else if (rc == STORE_CORRUPT) rc = e.code = ERR_STORE; /* e names the record and what is wrong */
    }
    point_result *r = rc ? NULL : calloc(sw.npoints, sizeof *r);
    if (!rc && !r) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < sw.npoints; i++) {
        rc = sweep_point_read(url, &sw, i, &r[i].p, &e);
        if (rc || r[i].p.state != SWEEP_POINT_FINISHED) continue;
        progress_tty("tandem results: evaluating point %zu of %zu (%s)", i + 1, sw.npoints, r[i].p.label);
        store *st = store_open_existing(r[i].p.url, STORE_OPEN_READ_ONLY, &e);
        if (!st) rc = e.code;
        if (!rc) rc = eval_store(st, split, max_tokens, NULL, BLAS_PIN_NOTE, &r[i].ev, &e);
        if (st) store_close(st);
        if (rc) err_prefix(&e, "point %zu (%s): ", i, r[i].p.label);
        r[i].evaluated = !rc;
    }
    progress_tty_end();
    if (!rc && svg) rc = write_svg(svg, url, split_name, r, sw.npoints, &e);
    /* a damaged point: every row is still shown, and the exit says a point is damaged (3,
     * as for one run's damaged store) */
    size_t damaged = 0;
    for (size_t i = 0; !rc && i < sw.npoints; i++) damaged += r[i].p.state == SWEEP_POINT_DAMAGED;
    tdm_err de = {0};
    int drc = damaged ? err_set(&de, ERR_STORE, "%zu of %zu points damaged (their rows say why); `tandem status "
                                "%s/<label>` says more of each", damaged, sw.npoints, url) : 0;
    if (!rc) {
        if (json) {
            char *body = NULL;
            size_t len = 0;
            FILE *j = open_memstream(&body, &len);
            if (!j) rc = err_set(&e, ERR_INTERNAL, "out of memory");
            else {
                print_json(j, url, split_name, r, sw.npoints);
                fclose(j);
                json_document(stdout, drc, de.msg, body);
            }
            free(body);
        } else if (!strcmp(format, "csv")) {
            print_csv(r, sw.npoints);
        } else {
            print_table(url, split_name, r, sw.npoints);
        }
    }
    if (rc) fprintf(stderr, "tandem results: %s\n", e.msg);
    if (rc && json) json_document(stdout, rc, e.msg, NULL);
    if (!rc && drc) {
        fprintf(stderr, "tandem results: %s\n", de.msg);
        rc = drc;
    }
    free(r);
    sweep_free(&sw);
    if (root) store_close(root);
    return rc;
}

int cmd_results(int argc, char **argv) { return cli_run(&SPEC, run_results, argc, argv); }
