/* cmd_mixture.c — `tandem mixture STORE [--last-fraction 0.1] [--out FILE]`: the final
 * mixture α* — the mean of α over the last fraction of the episodes, as the paper reports
 * it — as a YAML file that a fixed-mixture training config takes (data.mixture_file). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ledger/audit.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "runner/pin.h"

static const cli_opt OPTS[] = {
    {"--last-fraction", CLI_NUM, "F", "average over the last F of the episodes, 0 < F <= 1 (default 0.1)", NULL,
     1e-9, 1, NULL, NULL},
    {"--out", CLI_STR, "FILE", "write FILE instead of standard output", NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"mixture", "STORE", 1, 1, "a STORE is required",
                              "The mean alpha over the last F (default 0.1) of the episodes, as YAML (a config's\n"
                              "data.mixture_file).",
                              OPTS, NULL};

static int run_mixture(const cli_args *a) {
    const char *url = a->arg[0], *out = cli_str(a, "--out", NULL);
    double frac = cli_num(a, "--last-fraction", 0.1);
    int rc = 0;
    tdm_err e = {0};
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!st) rc = e.code;
    rec_run run;
    memset(&run, 0, sizeof run);
    audit_chain c;
    memset(&c, 0, sizeof c);
    if (!rc) rc = pin_read_run(st, &run, &e);
    if (!rc) rc = audit_chain_read(st, &c, &e);
    if (!rc && !c.ok)
        rc = err_set(&e, ERR_STORE, "%s: %s (run tandem alpha %s --verify)", url, c.problem, url);
    if (!rc && c.n == 0) rc = err_set(&e, ERR_USAGE, "%s has no alpha records yet", url);
    if (!rc) {
        rec_mixture x;
        audit_mixture(&c, frac, &x);
        FILE *f = out ? fopen(out, "w") : stdout;
        if (!f) rc = err_set(&e, ERR_USAGE, "cannot write %s", out);
        if (!rc) {
            fprintf(f, "# mixture of run %s in %s: mean alpha after episodes %llu..%llu of %zu\n",
                    run.run_id, url, (unsigned long long)x.first, (unsigned long long)x.last, c.n);
            fprintf(f, "mixture:\n");
            for (int m = 0; m < x.M; m++)
                fprintf(f, "  %s: %.17g\n", m < run.M ? run.domains[m] : "?", x.alpha[m]);
            if (out && fclose(f)) rc = err_set(&e, ERR_USAGE, "cannot write %s", out);
        }
    }
    audit_chain_free(&c);
    rec_run_free(&run);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem mixture: %s\n", e.msg);
    return rc;
}

int cmd_mixture(int argc, char **argv) { return cli_run(&SPEC, run_mixture, argc, argv); }
