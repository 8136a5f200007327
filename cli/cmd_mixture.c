/* cmd_mixture.c — `tandem mixture STORE [--last-fraction 0.1] [--out FILE]`: the final
 * mixture α* — the mean of α over the last fraction of the episodes, as the paper reports
 * it — as a YAML file that a fixed-mixture training config takes (data.mixture_file). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ledger/audit.h"
#include "runner/args.h"
#include "cli/cmds.h"
#include "runner/pin.h"

int cmd_mixture(int argc, char **argv) {
    const char *url = NULL, *out = NULL;
    double frac = 0.1;
    int rc = 0;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        if (!it.flag[0]) {
            rc = args_positional(&it, &url, "STORE", &e);
        } else if (!strcmp(it.flag, "--help")) {
            printf("usage: tandem mixture STORE [--last-fraction F] [--out FILE]\n"
                   "The mean alpha over the last F (default 0.1) of the episodes, as YAML.\n");
            return 0;
        } else if (!strcmp(it.flag, "--last-fraction")) {
            rc = args_double(&it, 1e-9, 1, &frac, &e);
        } else if (!strcmp(it.flag, "--out")) {
            rc = args_value(&it, &out, &e);
        } else {
            rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag);
        }
    }
    if (!rc && !url) rc = err_set(&e, ERR_USAGE, "a STORE is required");
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!rc && !st) rc = e.code;
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
