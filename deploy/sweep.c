/* sweep.c — settings studies as job arrays; see sweep.h. */
#include "deploy/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "util/args.h"

void sweep_free(sweep *s) {
    for (int k = 0; k < s->nkeys; k++) {
        free(s->key[k]); /* the values point into the same allocation */
        free(s->val[k]);
    }
    memset(s, 0, sizeof *s);
}

/* Whether two values read the same in a label (sweep_label's mapping). */
static int same_label(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a == '/' || *a == ' ' ? '_' : *a, y = *b == '/' || *b == ' ' ? '_' : *b;
        if (x != y) return 0;
    }
    return *a == *b;
}

int sweep_parse(sweep *s, char *const *texts, int n, tdm_err *e) {
    memset(s, 0, sizeof *s);
    s->npoints = n > 0 ? 1 : 0;
    if (n > SWEEP_MAX_KEYS)
        return err_set(e, ERR_USAGE, "--sweep: at most %d keys (%d given)", SWEEP_MAX_KEYS, n);
    for (int k = 0; k < n; k++) {
        const char *eq = strchr(texts[k], '=');
        if (!eq || eq == texts[k] || !eq[1])
            return err_set(e, ERR_USAGE, "--sweep %.*s: expected key=value1,value2,...",
                           eq ? (int)(eq - texts[k]) : 64, texts[k]);
        char *copy = strdup(texts[k]);
        if (!copy) return err_set(e, ERR_INTERNAL, "out of memory");
        copy[eq - texts[k]] = '\0';
        s->key[s->nkeys++] = copy;
        /* what errors show of the --sweep: the whole text, or for a key whose value may
         * hold a pasted secret (store, cluster.env, data.mixture_file) "key=..." */
        char shown[640];
        if (config_key_noecho(copy)) snprintf(shown, sizeof shown, "%.200s=...", copy);
        else snprintf(shown, sizeof shown, "%s", texts[k]);
        const char *t = shown;
        if (!strncmp(copy, "cluster.", 8) || !strcmp(copy, "store"))
            return err_set(e, ERR_USAGE, "--sweep %s: %s says where a run lives or executes, the "
                           "same for every point; render one job per value instead", t, copy);
        for (int j = 0; j < k; j++)
            if (!strcmp(s->key[j], copy))
                return err_set(e, ERR_USAGE, "--sweep: %s is swept twice; give its values in one "
                               "--sweep %s=a,b,...", copy, copy);
        int cnt = 1;
        for (const char *p = eq + 1; *p; p++) cnt += *p == ',';
        if (!(s->val[k] = calloc((size_t)cnt, sizeof *s->val[k])))
            return err_set(e, ERR_INTERNAL, "out of memory");
        char *v = copy + (eq - texts[k]) + 1;
        for (int i = 0; i < cnt; i++) {
            char *comma = strchr(v, ',');
            if (comma) *comma = '\0';
            if (!*v) return err_set(e, ERR_USAGE, "--sweep %s: an empty value", t);
            const char *vs = config_key_noecho(copy) ? "..." : v;
            for (int j = 0; j < i; j++) {
                if (!strcmp(s->val[k][j], v))
                    return err_set(e, ERR_USAGE, "--sweep %s: the value %s twice", t, vs);
                /* a point's store is named by its label, where '/' and ' ' become '_': two
                 * values that read the same there would share one store (and the advice to
                 * --allow-change the second would rewrite the first's run) */
                if (same_label(s->val[k][j], v))
                    return err_set(e, ERR_USAGE, "--sweep %s: the values %s and %s would name the same point "
                                   "store ('/' and ' ' read as '_' there): sweep values that differ otherwise",
                                   t, config_key_noecho(copy) ? "..." : s->val[k][j], vs);
            }
            s->val[k][i] = v;
            v = comma ? comma + 1 : v + strlen(v);
        }
        s->nvals[k] = cnt;
        if (s->npoints * (size_t)cnt > SWEEP_MAX_POINTS)
            return err_set(e, ERR_USAGE, "--sweep: more than %d points; split the study",
                           SWEEP_MAX_POINTS);
        s->npoints *= (size_t)cnt;
    }
    /* a point's label is a file name (its store, under the root): the longest must fit,
     * with room for the root's own prefixes, and each value in the 512-byte --set it
     * becomes */
    size_t longest = 0;
    for (int k = 0; k < s->nkeys; k++) {
        size_t v = 0;
        for (int i = 0; i < s->nvals[k]; i++)
            if (strlen(s->val[k][i]) > v) v = strlen(s->val[k][i]);
        longest += (k ? 1 : 0) + strlen(s->key[k]) + 1 + v;
    }
    if (longest > SWEEP_LABEL_MAX)
        return err_set(e, ERR_USAGE, "--sweep: a point's label (its store's name: key=value,...) would be %zu "
                       "bytes, more than %d: shorten the values (a file of values can be named instead, "
                       "e.g. a mixture file)", longest, SWEEP_LABEL_MAX);
    return 0;
}

int sweep_value_at(const sweep *s, size_t i, int k) {
    size_t stride = 1;
    for (int j = s->nkeys - 1; j > k; j--) stride *= (size_t)s->nvals[j];
    return (int)((i / stride) % (size_t)s->nvals[k]);
}

void sweep_point_sets(const sweep *s, size_t i, char (*sets)[512], size_t cap) {
    for (int k = 0; k < s->nkeys; k++) snprintf(sets[k], cap, "%s=%s", s->key[k], s->val[k][sweep_value_at(s, i, k)]);
}

void sweep_label(const sweep *s, size_t i, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < s->nkeys && n < cap; k++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", k ? "," : "", s->key[k],
                              s->val[k][sweep_value_at(s, i, k)]);
    for (char *p = out; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
}

int sweep_point_index(const sweep *s, long given, size_t *out, tdm_err *e) {
    const char *from = "--point", *env = NULL;
    long v = given;
    if (v < 0) {
        const char *names[] = {"TANDEM_POINT", "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"};
        for (int i = 0; i < 3 && !env; i++)
            if (getenv(names[i]) && *getenv(names[i])) env = getenv(names[i]), from = names[i];
        if (!env)
            return err_set(e, ERR_USAGE, "no --point, and none of TANDEM_POINT, "
                           "SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX is set: which of the %zu "
                           "points? (--point 0..%zu)",
                           s->npoints, s->npoints - 1);
        if (args_parse_long(env, &v)) v = -1;
    }
    if (v < 0 || (size_t)v >= s->npoints) {
        if (env) return err_set(e, ERR_USAGE, "%s = %s: the points are 0..%zu", from, env, s->npoints - 1);
        return err_set(e, ERR_USAGE, "--point %ld: the points are 0..%zu", v, s->npoints - 1);
    }
    *out = (size_t)v;
    return 0;
}

/* Two values of key k that the config reads as one (1e-3 and 0.001, +1 and 1): their
 * points would run the same, each in its own store. canon[i]: value i's canonical text. */
static int sweep_same_values(const sweep *s, int k, char **canon, tdm_err *e) {
    for (int i = 0; i < s->nvals[k]; i++)
        for (int j = 0; j < i; j++)
            if (canon[i] && canon[j] && !strcmp(canon[i], canon[j])) {
                int quiet = config_key_noecho(s->key[k]);
                return err_set(e, ERR_USAGE, "--sweep %s: the values %s and %s are the same value (%s): their "
                               "points would run the same; give each value once", s->key[k],
                               quiet ? "..." : s->val[k][j], quiet ? "..." : s->val[k][i], quiet ? "..." : canon[i]);
            }
    return 0;
}

int sweep_check_points(const sweep *s, const char *path, char *const *sets, int nsets, tdm_err *e) {
    int rc = 0;
    char (*point)[512] = calloc((size_t)s->nkeys, sizeof *point);
    char **all = calloc((size_t)(nsets + s->nkeys), sizeof *all);
    config *c = malloc(sizeof *c);
    /* each key's values as the config reads them (filled from the points that hold them) */
    char **canon[SWEEP_MAX_KEYS] = {0}, text[CONFIG_STR_MAX];
    for (int k = 0; !rc && k < s->nkeys; k++)
        if (!(canon[k] = calloc((size_t)s->nvals[k], sizeof *canon[k]))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc && (!point || !all || !c)) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < s->npoints; i++) {
        sweep_point_sets(s, i, point, sizeof *point);
        for (int j = 0; j < nsets; j++) all[j] = sets[j];
        for (int k = 0; k < s->nkeys; k++) all[nsets + k] = point[k];
        if ((rc = config_load_sweep(c, path, all, nsets + s->nkeys, s->nkeys, e))) {
            char label[2048], why[sizeof e->msg];
            sweep_label(s, i, label, sizeof label);
            for (int k = 0; k < s->nkeys; k++) /* a secret-bearing value is not repeated */
                if (config_key_noecho(s->key[k])) snprintf(label, sizeof label, "see --point %zu", i);
            snprintf(why, sizeof why, "%s", e->msg);
            err_set(e, rc, "--sweep point %zu (%s): %s", i, label, why);
            break;
        }
        for (int k = 0; k < s->nkeys; k++) {
            int v = sweep_value_at(s, i, k);
            if (!canon[k][v] && !config_value_text(c, s->key[k], text, sizeof text)) canon[k][v] = strdup(text);
        }
    }
    for (int k = 0; !rc && k < s->nkeys; k++) rc = sweep_same_values(s, k, canon[k], e);
    for (int k = 0; k < s->nkeys; k++) {
        for (int v = 0; canon[k] && v < s->nvals[k]; v++) free(canon[k][v]);
        free(canon[k]);
    }
    free(point);
    free(all);
    free(c);
    return rc;
}
