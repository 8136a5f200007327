/* mixfile.c — mixture files; see mixfile.h. */
#include "runner/mixfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner/args.h"
#include "util/ydoc.h"

int mixture_file_read(const char *path, const dataset *ds, double *alpha, tdm_err *e) {
    ydoc_node *root = ydoc_parse_file(path, e);
    if (!root) return e ? e->code : ERR_USAGE;
    int rc = 0, M = dataset_n_domains(ds);
    const ydoc_node *mix = ydoc_get(root, "mixture");
    if (root->kind != YDOC_MAP || root->n != 1 || !mix || mix->kind != YDOC_MAP)
        rc = err_set(e, ERR_USAGE, "%s: expected one map 'mixture:' of domain: weight (as `tandem "
                     "mixture` writes)", path);
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
    if (!rc && fabs(sum - 1) > 1e-6)
        rc = err_set(e, ERR_USAGE, "%s: the weights sum to %.9g, not 1", path, sum);
    for (int m = 0; !rc && m < M; m++) alpha[m] /= sum;
    ydoc_free(root);
    return rc;
}
