/* cmd_alpha.c — `tandem alpha STORE`: the α trajectory of a run, audited.
 *
 *   tandem alpha STORE                      a table: episode, domain, α_t, α_{t+1}, ℓ_u, ℓ_w, Δ,
 *                                           and the tokens and epochs of the domain u had
 *                                           trained on when α_{t+1} was chosen
 *   tandem alpha STORE --format csv|json    the same as CSV or JSON
 *   tandem alpha STORE --verify             checks the hash chain and that every episode from
 *                                           0 to the last is there; exit 3 naming the first
 *                                           missing or altered record; with --json the
 *                                           verdict as one object (docs/json.md)
 *   tandem alpha STORE --plot FILE.svg      α_m(t) per domain, to open in a browser
 *
 * Δ = ℓ_w − ℓ_u: negative where the reference twin's extra validation data helped the
 * domain more, which is where α grows. */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "ledger/audit.h"
#include "ledger/status.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "report/svgplot.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/outfile.h"
#include "util/term.h"
#include "util/testhook.h"

static const cli_opt OPTS[] = {
    {"--format", CLI_STR, NULL, "the listing as a table (default), CSV or JSON", "table|csv|json", 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "the same as --format json", NULL, 0, 0, NULL, NULL},
    {"--verify", CLI_SWITCH, NULL, "check the hash chain and that no episode is missing (exit 3\n"
                                   "naming the first missing or altered record)", NULL, 0, 0, NULL, NULL},
    {"--plot", CLI_STR, "FILE.svg", "alpha_m(t) per domain as an SVG chart", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"alpha", "STORE", 1, 1, "a STORE is required",
                              "The alpha trajectory of a run, audited: per episode and domain alpha_t,\n"
                              "alpha_t+1, the twins' losses and their difference.", OPTS, NULL};

/* The epochs a record's seen[m] tokens are: 0 < tokens[m] (the run's dataset could be
 * read), else NAN. */
static double epochs_of(const rec_alpha *a, int m, const double *tokens) {
    return a->has_seen && tokens[m] > 0 ? a->seen[m] / tokens[m] : NAN;
}

/* The train tokens per domain of the run's pinned dataset (data.dataset), by domain name;
 * 0 where it cannot be read (moved, another machine): the epochs are then left out. */
static void train_tokens(const rec_run *run, double *tokens) {
    for (int m = 0; m < REC_MAX_DOMAINS; m++) tokens[m] = 0;
    const char *path = NULL;
    for (size_t i = 0; i < run->nconfig; i++)
        if (!strcmp(run->config[i].key, "data.dataset")) path = run->config[i].value;
    dataset ds;
    tdm_err e;
    if (!path || dataset_load(&ds, path, &e)) return;
    for (int m = 0; m < run->M; m++) {
        int d = dataset_find_domain(&ds, run->domains[m]);
        if (d >= 0) tokens[m] = (double)dataset_tokens(&ds, d, SPLIT_TRAIN);
    }
    dataset_free(&ds);
}

/* An episode whose probe ran no twins (the hold pinned α: steps.h, step_pinned) records
 * loss_u = loss_w = 0; its losses are shown as absent, not as zeros. */
static int no_probe(const rec_alpha *a) {
    for (int m = 0; m < a->M; m++)
        if (a->loss_u[m] != 0 || a->loss_w[m] != 0) return 0;
    return 1;
}

static void print_table(const audit_chain *c, const rec_run *run, const double *tokens) {
    printf("%7s  %-16s %10s %10s %10s %10s %10s %12s %8s\n", "episode", "domain", "alpha",
           "alpha_next", "loss_u", "loss_w", "delta", "seen", "epochs");
    for (size_t t = 0; t < c->n; t++) {
        const rec_alpha *a = &c->rec[t];
        for (int m = 0; m < a->M; m++) {
            printf("%7zu  %-16s %10.6f %10.6f", t, m < run->M ? run->domains[m] : "?", a->alpha[m],
                   a->alpha_next[m]);
            if (no_probe(a)) printf(" %10s %10s %10s", "-", "-", "-");
            else printf(" %10.5f %10.5f %+10.5f", a->loss_u[m], a->loss_w[m], a->loss_w[m] - a->loss_u[m]);
            if (a->has_seen) printf(" %12.0f", a->seen[m]);
            else printf(" %12s", "-");
            double ep = epochs_of(a, m, tokens);
            if (!isnan(ep)) printf(" %8.3f\n", ep);
            else printf(" %8s\n", "-");
        }
    }
}

static void print_csv(const audit_chain *c, const rec_run *run, const double *tokens) {
    printf("episode,domain,alpha,alpha_next,loss_u,loss_w,delta,seen,epochs\n");
    for (size_t t = 0; t < c->n; t++) {
        const rec_alpha *a = &c->rec[t];
        for (int m = 0; m < a->M; m++) {
            printf("%zu,", t);
            csv_field(stdout, m < run->M ? run->domains[m] : "?");
            printf(",%.17g,%.17g", a->alpha[m], a->alpha_next[m]);
            if (no_probe(a)) printf(",,,");
            else printf(",%.17g,%.17g,%.17g", a->loss_u[m], a->loss_w[m], a->loss_w[m] - a->loss_u[m]);
            double ep = epochs_of(a, m, tokens);
            if (a->has_seen) printf(",%.17g", a->seen[m]);
            else printf(",");
            if (!isnan(ep)) printf(",%.17g\n", ep);
            else printf(",\n");
        }
    }
}

static void json_map(const char *key, const double *v, int M, const rec_run *run) {
    printf(",");
    json_key(stdout, key);
    printf("{");
    for (int m = 0; m < M; m++) {
        if (m) printf(",");
        json_key(stdout, m < run->M ? run->domains[m] : "?");
        json_num(stdout, v[m]);
    }
    printf("}");
}

/* Every string through util/json (domain names and host names are the user's: a quote or
 * a control character in one must not break the document); non-finite numbers as null. */
static void print_json(const audit_chain *c, const rec_run *run, const double *tokens) {
    printf("[");
    for (size_t t = 0; t < c->n; t++) {
        const rec_alpha *a = &c->rec[t];
        char hex[65];
        sha256_hex(&c->hash[t], hex);
        printf("%s{\"episode\":%zu,\"seq\":%llu,\"lr_alpha\":", t ? "," : "", t,
               (unsigned long long)a->seq);
        json_num(stdout, a->lr_alpha);
        printf(",\"gamma\":");
        json_num(stdout, a->gamma);
        printf(",\"hash\":\"%s\"", hex);
        json_map("alpha", a->alpha, a->M, run);
        json_map("alpha_next", a->alpha_next, a->M, run);
        /* the CSV's columns, field for field (a hunt: the JSON had no delta, and left out a
         * whole episode's epochs where the CSV left out one domain's): a value the CSV
         * leaves empty is null here, a column it leaves empty on every row is no member */
        if (!no_probe(a)) {
            double delta[REC_MAX_DOMAINS];
            for (int m = 0; m < a->M; m++) delta[m] = a->loss_w[m] - a->loss_u[m];
            json_map("loss_u", a->loss_u, a->M, run);
            json_map("loss_w", a->loss_w, a->M, run);
            json_map("delta", delta, a->M, run);
        }
        if (a->has_seen) {
            double ep[REC_MAX_DOMAINS];
            for (int m = 0; m < a->M; m++) ep[m] = epochs_of(a, m, tokens);
            json_map("seen", a->seen, a->M, run);
            json_map("epochs", ep, a->M, run);
        }
        printf(",\"time\":");
        json_num(stdout, a->time);
        printf(",\"host\":");
        json_str(stdout, a->host);
        printf(",\"attempt\":%llu}", (unsigned long long)a->attempt);
    }
    printf("]\n"); /* one line, as every JSON document (docs/json.md) */
}

/* α_m(t) for t = 0..n: the start of each episode and, last, the α after the final one. */
static int plot(const char *path, const audit_chain *c, const rec_run *run, const char *url,
                tdm_err *e) {
    size_t n = c->n ? c->n + 1 : 0;
    int M = c->n ? c->rec[0].M : run->M;
    double *x = calloc(n ? n : 1, sizeof *x), *y = calloc((n ? n : 1) * (size_t)(M ? M : 1), sizeof *y);
    svgplot_series *s = calloc((size_t)(M ? M : 1), sizeof *s);
    if (!x || !y || !s) {
        free(x), free(y), free(s);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    for (size_t t = 0; t < n; t++) {
        x[t] = (double)t;
        for (int m = 0; m < M; m++)
            y[(size_t)m * n + t] = t < c->n ? c->rec[t].alpha[m] : c->rec[t - 1].alpha_next[m];
    }
    for (int m = 0; m < M; m++) {
        s[m].name = m < run->M ? run->domains[m] : "?";
        s[m].y = y + (size_t)m * n;
    }
    char title[700];
    snprintf(title, sizeof title, "Domain weights of %s (%s)", run->run_id, url);
    svgplot p = {.title = title, .xlabel = "episode", .ylabel = "α (domain weight)", .x = x,
                 .n = n, .series = s, .nseries = M, .ymin = 0, .ymax = 0};
    outfile o;
    int rc = outfile_open(&o, "--plot", path, e);
    if (!rc) {
        int wrc = svgplot_write(&p, o.f, e);
        if (wrc) err_prefix(e, "--plot %s: ", path);
        rc = outfile_close(&o, wrc, 0, e);
    }
    free(x), free(y), free(s);
    return rc;
}

static int run_alpha(const cli_args *a) {
    const char *url = a->arg[0], *format = cli_json(a) ? "json" : cli_str(a, "--format", "table");
    const char *plot_path = cli_str(a, "--plot", NULL);
    if (cli_given(a, "--json") && cli_given(a, "--format") && strcmp(cli_str(a, "--format", ""), "json")) {
        /* as results says it: the usage line, and --json's error object (docs/json.md) */
        tdm_err ue;
        err_set(&ue, ERR_USAGE, "--json and --format %s disagree: give one", cli_str(a, "--format", ""));
        fprintf(stderr, "tandem alpha: %s\n", ue.msg);
        cli_usage(a->spec, stderr);
        json_document(stdout, ERR_USAGE, ue.msg, NULL);
        return ERR_USAGE;
    }
    if (plot_path && cli_given(a, "--format")) { /* the chart replaces the listing: one was ignored */
        fprintf(stderr, "tandem alpha: --plot writes the chart instead of the listing that --format %s "
                "shapes: give one (run twice for both)\n", cli_str(a, "--format", ""));
        return ERR_USAGE;
    }
    int verify = cli_given(a, "--verify"), rc = 0;
    /* --verify prints a verdict, not the listing: as text, or as JSON (docs/json.md); a
     * CSV of it there is none */
    if (verify && !strcmp(format, "csv")) {
        fprintf(stderr, "tandem alpha: --verify prints a verdict, not the listing that --format csv "
                "shapes: give --verify alone (text) or with --json\n");
        return ERR_USAGE;
    }
    tdm_err e = {0};
    /* an s3:// --plot is refused before any reading (outfile_open would, after it) */
    if (plot_path) rc = outfile_check_local("--plot", plot_path, &e);
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    if (!rc && !st) rc = e.code;
    if (!rc) rc = run_config_read_run(st, &run, &e);
    /* --verify: HEAD (and the state it names) before the chain — a live run's commit
     * between the two made a newer state vouch for records the chain read before it had
     * not seen ("counts 198 alpha records but the store holds 194" on a healthy store) */
    rec_head h;
    rec_state s;
    int have = 0;
    tdm_err he = {0};
    int hrc = !rc && verify ? audit_head(st, &h, &s, &have, &he) : 0; /* said after the chain's own faults */
    testhook_stop_at("audit"); /* frozen here by the tests: HEAD read, the chain not yet */
    if (!rc) rc = audit_chain_read(st, &c, &e);
    /* records of another number of domains than RUN's: a listing would mislabel them */
    int foreign = !rc && c.n && run.M > 0 && c.rec[0].M != run.M;
    if (!rc) audit_chain_domains(&c, run.M);
    if (foreign && !verify) rc = err_set(&e, ERR_STORE, "%s: %s", url, c.problem);
    if (!rc && verify) {
        if (!c.ok) {
            if (c.bad == 0) rc = err_set(&e, ERR_STORE, "%s: %s; no record of the chain holds", url, c.problem);
            else rc = err_set(&e, ERR_STORE, "%s: %s; the chain is intact for episodes 0..%zu", url, c.problem,
                              c.bad - 1);
        } else {
            /* the newest state must agree with the chain it claims */
            if (hrc) {
                rc = hrc;
                e = he;
            } else if (have && s.alpha_records > 0) {
                if (s.alpha_records > c.n)
                    rc = err_set(&e, ERR_STORE, "%s: %s counts %llu alpha records but the store holds %zu",
                                 url, h.state, (unsigned long long)s.alpha_records, c.n);
                else if (!sha256_equal(&s.alpha_head, &c.hash[s.alpha_records - 1]))
                    rc = err_set(&e, ERR_STORE,
                                 "%s: alpha/%llu.mp was altered: its hash is not the one %s records",
                                 url, (unsigned long long)s.alpha_records - 1, h.state);
            }
            if (!rc) {
                char hex[65] = "-";
                if (c.n) sha256_hex(&c.hash[c.n - 1], hex);
                if (!strcmp(format, "json")) {
                    printf("{\"store\":");
                    json_str(stdout, url);
                    printf(",\"verified\":true,\"alpha_records\":%zu,\"last_episode\":", c.n);
                    if (c.n) printf("%zu,\"alpha_head_sha256\":\"%s\"}\n", c.n - 1, hex);
                    else printf("null,\"alpha_head_sha256\":null}\n");
                } else {
                    printf("alpha chain verified: %zu records (episodes 0..%zu), head %s\n", c.n,
                           c.n ? c.n - 1 : 0, hex);
                }
            }
        }
    } else if (!rc && !plot_path) {
        double tokens[REC_MAX_DOMAINS];
        train_tokens(&run, tokens);
        if (!strcmp(format, "csv")) print_csv(&c, &run, tokens);
        else if (!strcmp(format, "json")) print_json(&c, &run, tokens);
        else print_table(&c, &run, tokens);
        if (!c.ok) fprintf(stderr, "tandem alpha: warning: %s (listing stops there)\n", c.problem);
    }
    /* a chain with no record to draw reads as a run that never moved: none written */
    if (!rc && plot_path && c.n == 0)
        rc = c.ok ? err_set(&e, ERR_USAGE, "no %s written: there is no α record to draw", plot_path)
                  : err_set(&e, ERR_STORE, "no %s written: there is no α record to draw (%s)", plot_path, c.problem);
    if (!rc && plot_path) {
        rc = plot(plot_path, &c, &run, url, &e);
        if (!rc) fprintf(stderr, "tandem alpha: wrote %s (%zu episodes, %d domains)\n", plot_path, c.n, run.M);
        /* as the listing says it: the chart ends where the chain breaks */
        if (!rc && !c.ok) fprintf(stderr, "tandem alpha: warning: %s (the chart stops there)\n", c.problem);
    }
    /* a run that diverged (diverged.mp): its records end before it, said on stderr (the
     * listing on stdout stays as it is) */
    ledger_divergence dv;
    tdm_err de;
    if (!rc && ledger_divergence_read(st, &dv, &de) == 0 && dv.state == LEDGER_DIVERGED_YES) {
        fprintf(stderr, "tandem alpha: note: %s diverged at episode %llu (%s step, run position %llu; exit 5): ",
                url, (unsigned long long)dv.d.episode, dv.d.step, (unsigned long long)dv.d.seq);
        term_text(stderr, dv.d.message);
        fprintf(stderr, "\n");
    }
    audit_chain_free(&c);
    if (have) rec_state_free(&s);
    rec_run_free(&run);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem alpha: %s\n", e.msg);
    if (rc && !strcmp(format, "json")) json_document(stdout, rc, e.msg, NULL); /* docs/json.md */
    return rc;
}

int cmd_alpha(int argc, char **argv) { return cli_run(&SPEC, run_alpha, argc, argv); }
