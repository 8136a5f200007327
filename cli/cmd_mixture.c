/* cmd_mixture.c — `tandem mixture STORE [--last-fraction 0.1] [--out FILE]`: the final
 * mixture α* — the mean of α over the last fraction of the episodes, as the paper reports
 * it — as a YAML file that a fixed-mixture training config takes (data.mixture_file).
 * `--json`: the mixture as one JSON object on stdout (docs/json.md); with --out the YAML
 * still goes to FILE. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ledger/audit.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "config/run_config.h"
#include "util/json.h"

static const cli_opt OPTS[] = {
    {"--last-fraction", CLI_NUM, "F", "average over the last F of the episodes, 0 < F <= 1 (default 0.1)", NULL,
     1e-9, 1, NULL, NULL},
    {"--out", CLI_STR, "FILE", "write FILE instead of standard output", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "one JSON object on stdout (docs/json.md)", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"mixture", "STORE", 1, 1, "a STORE is required",
                              "The mean alpha over the last F (default 0.1) of the episodes, as YAML (a config's\n"
                              "data.mixture_file).",
                              OPTS, NULL};

/* The mixture as one JSON object on stdout (every name through util/json: a domain's name
 * and the store URL are the user's). */
static void print_json(const rec_mixture *x, const rec_run *run, const char *url, const audit_chain *c,
                       double frac, const char *out) {
    printf("{\"run_id\":");
    json_str(stdout, run->run_id);
    printf(",\"store\":");
    json_str(stdout, url);
    printf(",\"last_fraction\":");
    json_num(stdout, frac);
    printf(",\"first_episode\":%llu,\"last_episode\":%llu,\"episodes\":%zu,\"mixture\":{",
           (unsigned long long)x->first, (unsigned long long)x->last, c->n);
    for (int m = 0; m < x->M; m++) {
        if (m) printf(",");
        json_key(stdout, m < run->M ? run->domains[m] : "?");
        json_num(stdout, x->alpha[m]);
    }
    printf("},\"out\":");
    json_str(stdout, out);
    printf("}\n");
}

static int run_mixture(const cli_args *a) {
    const char *url = a->arg[0], *out = cli_str(a, "--out", NULL);
    double frac = cli_num(a, "--last-fraction", 0.1);
    int json = cli_given(a, "--json") > 0;
    int rc = 0;
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) rc = e.code;
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    if (!rc) rc = run_config_read_run(st, &run, &e);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    if (!rc && !c.ok)
        rc = err_set(&e, ERR_STORE, "%s: %s (run tandem alpha %s --verify)", url, c.problem, url);
    if (!rc && c.n == 0) rc = err_set(&e, ERR_USAGE, "%s has no alpha records yet", url);
    if (!rc) {
        rec_mixture x;
        audit_mixture(&c, frac, &x);
        FILE *f = out ? fopen(out, "w") : json ? NULL : stdout;
        if (out && !f) rc = err_set(&e, ERR_USAGE, "cannot write %s", out);
        if (!rc && f) {
            fprintf(f, "# mixture of run %s in %s: mean alpha after episodes %llu..%llu of %zu\n",
                    run.run_id, url, (unsigned long long)x.first, (unsigned long long)x.last, c.n);
            fprintf(f, "mixture:\n");
            for (int m = 0; m < x.M; m++)
                fprintf(f, "  %s: %.17g\n", m < run.M ? run.domains[m] : "?", x.alpha[m]);
            if (out && fclose(f)) rc = err_set(&e, ERR_USAGE, "cannot write %s", out);
        }
        if (!rc && json) print_json(&x, &run, url, &c, frac, out);
    }
    audit_chain_free(&c);
    rec_run_free(&run);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem mixture: %s\n", e.msg);
    if (rc && json) json_document(stdout, rc, e.msg, NULL);
    return rc;
}

int cmd_mixture(int argc, char **argv) { return cli_run(&SPEC, run_mixture, argc, argv); }
