/* mixfile.c — mixture files; see mixfile.h. */
#include "runner/mixfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "config/run_config.h"
#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "util/args.h"
#include "storage/store.h"
#include "util/ydoc.h"

/* how far from 1 the weights of a mixture file may sum (rounding only) */
#define MIXFILE_SUM_TOL 1e-6

/* mixture.mp must be α* of the run's own α chain as it stood when the run finished
 * (records 0..x->last: a finished run extended since has more), as the run wrote it: one
 * edited with its digest recomputed (names permuted, weights moved) would train the final
 * run on other weights than the run learned. ERR_STORE naming what disagrees. */
static int matches_chain(store *st, const char *url, const rec_mixture *x, tdm_err *e) {
    rec_run run;
    audit_chain c;
    memset(&c, 0, sizeof c);
    int rc = run_config_read_run(st, &run, e);
    if (rc && e) err_prefix(e, "data.mixture_file = %s: ", url);
    if (rc) return rc;
    rc = audit_chain_read(st, &c, e);
    if (!rc) audit_chain_domains(&c, run.M);
    if (!rc && (!c.ok || x->last >= c.n))
        rc = err_set(e, ERR_STORE, "data.mixture_file = %s: the run's alpha chain %s: its mixture.mp cannot be "
                     "checked against it; tandem verify %s says more", url,
                     !c.ok ? c.problem : "holds fewer records than mixture.mp averaged", url);
    void *md = NULL;
    size_t mn = 0;
    if (!rc) rc = store_get(st, LEDGER_MIXTURE, &md, &mn, NULL, e);
    if (!rc) {
        rec_mixture want;
        size_t n = c.n;
        c.n = (size_t)x->last + 1; /* the chain when the run finished */
        audit_mixture(&c, 0.1, &want);
        c.n = n;
        for (int m = 0; m < want.M; m++) snprintf(want.names[m], REC_DOMAIN_MAX, "%s", run.domains[m]);
        if (!rec_mixture_same(md, mn, &want))
            rc = err_set(e, ERR_STORE, "data.mixture_file = %s: its mixture.mp does not hold the alpha* of the run's "
                         "alpha chain (damaged or edited): a rerun of that run (tandem run, same config and "
                         "store) writes it again", url);
    }
    free(md);
    audit_chain_free(&c);
    rec_run_free(&run);
    return rc;
}

/* α* from the mixture.mp of the finished TANDEM run in store `url`, by domain name. */
static int store_mixture_read(const char *url, const dataset *ds, double *alpha, tdm_err *e) {
    store *st = store_open_existing(url, STORE_OPEN_READ_ONLY, e);
    if (!st) /* a config error: the key names a store that is not there (or unreadable) */
        return e ? err_prefix(e, "data.mixture_file = %s: ", url) : ERR_USAGE;
    rec_mixture x;
    int rc = ledger_read(st, REC_KIND_MIXTURE, LEDGER_MIXTURE, NULL, &x, e);
    if (rc && rc != STORE_NOT_FOUND && e) /* that store's mixture.mp, not the run's own store's */
        err_prefix(e, "data.mixture_file = %s: ", url);
    if (rc == STORE_NOT_FOUND) /* after the prefix: this message has its own (it was said twice) */
        rc = err_set(e, ERR_USAGE, "data.mixture_file = %s: that store holds no finished TANDEM run "
                     "(no mixture.mp): run it to the end first (tandem run, or tandem compare)",
                     url);
    if (rc == STORE_CORRUPT) rc = ERR_STORE; /* e names mixture.mp and what is wrong */
    if (!rc) rc = matches_chain(st, url, &x, e);
    store_close(st);
    int M = dataset_n_domains(ds);
    if (!rc && x.M != M)
        rc = err_set(e, ERR_USAGE, "%s/mixture.mp has %d domains but %s has %d", url, x.M, ds->path, M);
    double sum = 0;
    for (int j = 0; !rc && j < x.M; j++) {
        int m = dataset_find_domain(ds, x.names[j]);
        if (m < 0)
            rc = err_set(e, ERR_USAGE, "%s/mixture.mp: domain '%s' is not in %s", url, x.names[j],
                         ds->path);
        else if (!isfinite(x.alpha[j]) || x.alpha[j] < 0)
            rc = err_set(e, ERR_USAGE, "%s/mixture.mp: the weight of '%s' is not a number >= 0",
                         url, x.names[j]);
        else
            alpha[m] = x.alpha[j], sum += x.alpha[j];
    }
    if (!rc && fabs(sum - 1) > MIXFILE_SUM_TOL)
        rc = err_set(e, ERR_USAGE, "%s/mixture.mp: the weights sum to %.9g, not 1 (within %g)", url, sum,
                     MIXFILE_SUM_TOL);
    for (int m = 0; !rc && m < M; m++) alpha[m] /= sum;
    return rc;
}

int mixture_file_read(const char *path, const dataset *ds, double *alpha, tdm_err *e) {
    struct stat sb;
    if (strstr(path, "://") || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return store_mixture_read(path, ds, alpha, e);
    ydoc_node *root = ydoc_parse_file(path, e);
    if (!root) return e ? e->code : ERR_USAGE;
    int rc = 0, M = dataset_n_domains(ds);
    const ydoc_node *mix = ydoc_get(root, "mixture");
    /* beside it, what `tandem mixture --format json` writes about the mixture (that
     * document was refused, "as tandem mixture writes"); any other key is a mistake */
    static const char *const about[] = {"run_id", "store", "last_fraction", "first_episode", "last_episode",
                                        "episodes", "out", "diverged"};
    const char *stray = NULL;
    for (size_t i = 0; root->kind == YDOC_MAP && i < root->n && !stray; i++) {
        int known = !strcmp(root->keys[i], "mixture");
        for (size_t k = 0; k < sizeof about / sizeof *about && !known; k++) known = !strcmp(root->keys[i], about[k]);
        if (!known) stray = root->keys[i];
    }
    if (root->kind != YDOC_MAP || !mix || mix->kind != YDOC_MAP)
        rc = err_set(e, ERR_USAGE, "%s: expected one map 'mixture:' of domain: weight (as `tandem "
                     "mixture` writes, as YAML or --format json)", path);
    else if (stray)
        rc = err_set(e, ERR_USAGE, "%s: unexpected key '%.60s' beside 'mixture:' (a mixture file holds the map "
                     "'mixture:' of domain: weight, and what `tandem mixture --format json` writes with it)",
                     path, stray);
    /* what `tandem mixture --format json` writes of a run that diverged: the mean of its α
     * records before it, not its α* (taken silently as a final mixture, while that run's
     * store itself was refused: hunt) */
    const ydoc_node *dv = rc ? NULL : ydoc_get(root, "diverged");
    if (dv && !(dv->kind == YDOC_SCALAR && !dv->quoted && !strcmp(dv->value, "null")))
        rc = err_set(e, ERR_USAGE, "%s:%d: 'diverged' is set: these are the mean weights of a run before it diverged, "
                     "not its alpha*; resume that run with the key its message names lowered and write its mixture "
                     "again (or remove 'diverged' to use these weights anyway)", path, dv->line);
    int seen[64] = {0};
    double sum = 0;
    for (size_t i = 0; !rc && i < mix->n; i++) {
        int m = dataset_find_domain(ds, mix->keys[i]);
        const ydoc_node *v = mix->items[i];
        double x;
        if (m < 0)
            rc = err_set(e, ERR_USAGE, "%s:%d: domain '%s' is not in %s", path, v->line, mix->keys[i],
                         ds->path);
        else if (v->kind != YDOC_SCALAR || v->quoted || args_parse_double(v->value, &x) || x < 0)
            rc = err_set(e, ERR_USAGE, "%s:%d: weight of '%s' must be a number >= 0", path, v->line,
                         mix->keys[i]);
        else {
            alpha[m] = x;
            seen[m] = 1;
            sum += x;
        }
    }
    for (int m = 0; !rc && m < M; m++)
        if (!seen[m])
            rc = err_set(e, ERR_USAGE, "%s: no weight for domain '%s' of %s", path,
                         dataset_domain_name(ds, m), ds->path);
    if (!rc && fabs(sum - 1) > MIXFILE_SUM_TOL)
        rc = err_set(e, ERR_USAGE, "%s: the weights sum to %.9g, not 1 (they must, within %g: write them with "
                     "more digits, as `tandem mixture` does)", path, sum, MIXFILE_SUM_TOL);
    for (int m = 0; !rc && m < M; m++) alpha[m] /= sum;
    ydoc_free(root);
    return rc;
}
