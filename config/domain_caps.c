/* domain_caps.c — parsing data.max_epochs; see domain_caps.h. */
#include "config/domain_caps.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/args.h"

#define ITEM_MAX 160

/* Splits item "NAME=EPOCHS" (no commas) into name and value; 0 when well-formed. */
static int split_item(const char *item, size_t len, char *name, size_t cap, double *epochs) {
    const char *eq = memchr(item, '=', len);
    if (!eq || eq == item || (size_t)(eq - item) >= cap || len - (size_t)(eq - item) - 1 >= 64) return -1;
    memcpy(name, item, (size_t)(eq - item));
    name[eq - item] = '\0';
    char num[64];
    size_t nl = len - (size_t)(eq - item) - 1;
    memcpy(num, eq + 1, nl);
    num[nl] = '\0';
    if (args_parse_double(num, epochs) || !isfinite(*epochs) || !(*epochs > 0)) return -1;
    return 0;
}

/* Calls fn for every item of s; stops at the first non-zero return. */
static int each_item(const char *s, int (*fn)(const char *name, double epochs, void *arg), void *arg,
                     int *bad) {
    *bad = 0;
    for (const char *p = s; *p;) {
        /* ';' separates items as ',' does: a --sweep splits its values at commas, so one
         * point's caps on several domains are written a=1;b=2 there (a --sweep of
         * "a=1,b=2" made two points, a hunt of odd configs) */
        const char *end = strpbrk(p, ",;");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[ITEM_MAX];
        double epochs;
        if (split_item(p, len, name, sizeof name, &epochs)) {
            *bad = 1;
            return -1;
        }
        int rc = fn ? fn(name, epochs, arg) : 0;
        if (rc) return rc;
        if (!end) break;
        p = end + 1;
        if (!*p) { /* a trailing comma */
            *bad = 1;
            return -1;
        }
    }
    return 0;
}

bool domain_caps_check(const char *s, char *why, size_t n) {
    int bad;
    each_item(s, NULL, NULL, &bad);
    if (bad)
        snprintf(why, n, "expected a list NAME=EPOCHS,... (a domain of the dataset or *, and a "
                         "number of epochs above 0), or \"\" for none");
    return !bad;
}

typedef struct resolve_ctx {
    const dataset *ds;
    double *cap;
    int named[64 + 1]; /* per domain; [M] = "*" */
    double star;
    tdm_err *e;
} resolve_ctx;

static int resolve_one(const char *name, double epochs, void *arg) {
    resolve_ctx *x = arg;
    int M = dataset_n_domains(x->ds);
    int m = strcmp(name, "*") ? dataset_find_domain(x->ds, name) : M;
    if (m < 0) {
        char list[512] = "";
        for (int j = 0; j < M; j++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", dataset_domain_name(x->ds, j));
        }
        return err_set(x->e, ERR_USAGE,
                       "data.max_epochs names the domain '%s', which %s does not have (its domains: "
                       "%s; * caps every domain not named)",
                       name, x->ds->path, list);
    }
    if (x->named[m])
        return err_set(x->e, ERR_USAGE, "data.max_epochs names '%s' twice", m == M ? "*" : name);
    x->named[m] = 1;
    if (m == M) x->star = epochs;
    else x->cap[m] = epochs;
    return 0;
}

int domain_caps_resolve(const char *s, const dataset *ds, double *cap, tdm_err *e) {
    int M = dataset_n_domains(ds);
    if (M > 64) return err_set(e, ERR_USAGE, "data.max_epochs: at most 64 domains");
    resolve_ctx x = {.ds = ds, .cap = cap, .star = INFINITY, .e = e};
    memset(x.named, 0, sizeof x.named);
    for (int m = 0; m < M; m++) cap[m] = INFINITY;
    int bad, rc = each_item(s, resolve_one, &x, &bad);
    if (bad)
        return err_set(e, ERR_USAGE,
                       "data.max_epochs: expected a list NAME=EPOCHS,... (a domain or *, and a "
                       "number above 0)");
    if (rc) return rc;
    int any = 0;
    for (int m = 0; m < M; m++) {
        if (!x.named[m]) cap[m] = x.star;
        any |= isfinite(cap[m]);
    }
    return any;
}

int domain_caps_fit(const char *s, const dataset *ds, const double *epochs, double rows, int seq, int whole,
                    const char *what, double *room_out, tdm_err *e) {
    double room = 0, room_rows = 0, budget = rows * seq;
    for (int m = 0; m < dataset_n_domains(ds); m++) {
        double cap = isfinite(epochs[m]) ? epochs[m] * (double)dataset_tokens(ds, m, SPLIT_TRAIN) : INFINITY;
        room += cap;
        room_rows += floor(cap / seq);
    }
    if (room_out) *room_out = room;
    if (room < budget) {
        /* short by a rounding error (0.0192 x 20000 = 383.99999999999994): "768 ... but the
         * run trains on 768" contradicted itself (a hunt of odd configs); the digits that
         * differ, and by how much */
        char a[40], b[40];
        snprintf(a, sizeof a, "%.4g", room);
        snprintf(b, sizeof b, "%.4g", budget);
        int close = !strcmp(a, b);
        if (close) snprintf(a, sizeof a, "%.17g", room), snprintf(b, sizeof b, "%.17g", budget);
        return err_set(e, ERR_USAGE, "data.max_epochs = %s: the caps let u see %s tokens in all, but the run "
                       "trains on %s (%s)%s: raise the caps, cap fewer domains, or lower run.episodes",
                       s, a, b, what, close ? ", short only by the rounding of the epochs given (a hair more will do)" : "");
    }
    if (whole && room_rows < rows)
        return err_set(e, ERR_USAGE, "data.max_epochs = %s: the caps hold %.0f whole sequences of train.seq = %d "
                       "tokens (%.4g tokens; a sequence is drawn whole from one domain under sample mixing), but "
                       "the run trains on %.0f (%s): raise the caps, cap fewer domains, or lower run.episodes",
                       s, room_rows, seq, room_rows * seq, rows, what);
    return 0;
}
