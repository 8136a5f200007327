/* metrics.c — the per-episode rows of metrics/; see metrics.h. */
#include "ledger/metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ckpt_impl.h"
#include "ledger/codec.h"
#include "ledger/rectab.h"
#include "ledger/keys.h"
#include "util/testhook.h"

/* step_loss: each free step's mixture loss, as many as the row recorded (n_steps) */
static void put_step_loss(codec_writer *w, const void *rec) {
    const rec_metrics *m = rec;
    codec_f64s(w, m->step_loss, (size_t)m->n_steps);
}
static int get_step_loss(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o;
    rec_metrics *m = rec;
    size_t got = 0;
    int rc = codec_get_f64s(r, key, m->step_loss, METRICS_MAX_STEPS, &got);
    if (!rc && got < 1) rc = codec_field_error(r, key, "is empty");
    m->n_steps = rc ? 0 : (int)got;
    return rc;
}

static int finite_nonneg(double v) { return isfinite(v) && v >= 0; }

/* step_first comes with step_loss (rows before per-step losses have neither); what a run
 * measures of time, speed, rates, α and tokens is finite and not negative (a row holding
 * inf had status print "speed inf tokens/s"); losses and the gradient norm may be NaN or
 * inf (a diverged step) */
static int check_metrics(const codec_map_reader *r, void *rec) {
    const rec_metrics *m = rec;
    if (!codec_field(r, "step_loss") != !codec_field(r, "step_first"))
        return codec_field_error(r, codec_field(r, "step_loss") ? "step_first" : "step_loss", "is missing");
    const struct { const char *key; double v; } one[] = {{"tokens_per_s", m->tokens_per_s}, {"episode_s", m->episode_s},
                                                         {"commit_s", m->commit_s}, {"time", m->time},
                                                         {"lr", m->lr}, {"lr_alpha", m->lr_alpha}};
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!finite_nonneg(one[i].v)) return codec_field_error(r, one[i].key, "is not a finite number >= 0");
    for (int d = 0; d < m->M; d++) {
        if (!finite_nonneg(m->alpha[d]) || m->alpha[d] > 1 + 1e-9) return codec_field_error(r, "alpha", "holds a weight outside [0, 1]");
        if (m->has_seen && (!finite_nonneg(m->seen[d]) || !finite_nonneg(m->epochs[d])))
            return codec_field_error(r, "seen", "or epochs holds a value that is not a finite number >= 0");
    }
    return 0;
}

#define M_OPT(f, type, lo, hi, has) \
    {#f, type, offsetof(rec_metrics, f), 0, lo, hi, RT_OPT | RT_LOOSE, offsetof(rec_metrics, has), NULL, NULL, NULL}
#define M_U64(f, lo, hi) {#f, RT_U64, offsetof(rec_metrics, f), 0, lo, hi, 0, 0, NULL, NULL, NULL}
#define M_F64(f) {#f, RT_F64, offsetof(rec_metrics, f), 0, 0, 0, 0, 0, NULL, NULL, NULL}
#define M_DOM(f) {#f, RT_DOMAINS, offsetof(rec_metrics, f), 0, 0, 0, RT_LOOSE, 0, NULL, NULL, NULL}
/* Sealed: a row damaged anywhere reads as damaged, never as other figures (rows of tandem
 * before 2026-11-27 have no seal). Per-domain values may be NaN (a diverged step). */
static const rt_field METRICS_FIELDS[] = {
    M_U64(t, 0, UINT32_MAX),
    M_U64(seq, 0, UINT64_MAX),
    M_U64(gen, 0, UINT64_MAX),
    M_DOM(loss),
    M_OPT(loss_u, RT_DOMAINS, 0, 0, has_probe),
    M_OPT(loss_w, RT_DOMAINS, 0, 0, has_probe),
    M_DOM(alpha),
    M_OPT(seen, RT_DOMAINS, 0, 0, has_seen),
    M_OPT(epochs, RT_DOMAINS, 0, 0, has_seen),
    {"step_loss", RT_CUSTOM, 0, 0, 0, 0, RT_OPT, offsetof(rec_metrics, n_steps), NULL, put_step_loss, get_step_loss},
    M_OPT(step_first, RT_U64, 1, UINT64_MAX, n_steps),
    M_OPT(val, RT_DOMAINS, 0, 0, has_val),
    M_OPT(val_tokens, RT_U64, 1, UINT64_MAX, has_val),
    M_F64(lr),
    M_F64(lr_alpha),
    M_F64(grad_norm),
    M_U64(free_steps, 0, UINT32_MAX),
    M_F64(tokens_per_s),
    M_F64(episode_s),
    M_F64(commit_s),
    M_F64(time),
    {"host", RT_STR, offsetof(rec_metrics, host), sizeof(((rec_metrics *)0)->host), 0, 0, 0, 0, NULL, NULL, NULL},
    M_U64(attempt, 0, UINT64_MAX),
};
static const rt_table METRICS = {"metrics/<t>.mp", sizeof(rec_metrics), METRICS_FIELDS,
                                 (int)(sizeof METRICS_FIELDS / sizeof *METRICS_FIELDS), offsetof(rec_metrics, M),
                                 RT_SEAL_ALWAYS, 0, NULL, check_metrics, NULL, 0, 0, 0};

void *rec_metrics_encode(const rec_metrics *m, size_t *n) { return rt_encode(&METRICS, m, n); }

int rec_metrics_decode(const void *data, size_t n, const char *what, rec_metrics *m, tdm_err *e) {
    return rt_decode(&METRICS, data, n, what, m, e);
}

int ckpt_metrics_record(ckpt *c, rec_metrics *m, int *fresh, tdm_err *e) {
    int wrote = 0, replaced = 0;
    m->gen = c->gens.n;
    size_t n;
    void *data = rec_metrics_encode(m, &n);
    char key[64];
    ledger_metrics_key(key, sizeof key, m->t);
    testhook_kill_at("metrics");
    int rc = ckpt_outlast_late_delete_record(c, key, e); /* before the lease check: the wait may be long */
    if (!rc) rc = ckpt_check_lease(c, e); /* a fenced-out writer writes nothing more */
    void *old = NULL;
    size_t on = 0;
    if (!rc) rc = ckpt_put_once(c, key, data, n, &old, &on, NULL, e);
    wrote = rc == 0;
    if (rc == STORE_EXISTS) {
        /* a replay of this episode: the first row stands, unless it is of an older config
         * generation (another trajectory) or cannot be read */
        rec_metrics prev;
        tdm_err de;
        int bad = rec_metrics_decode(old, on, key, &prev, &de) != 0;
        wrote = bad || prev.gen < m->gen;
        replaced = !bad && prev.gen < m->gen;
        rc = wrote ? store_put(c->st, key, data, n, STORE_OVERWRITE, e) : 0;
        if (bad && !rc)
            fprintf(stderr, "tandem: %s/%s could not be read (%s); written again\n", store_url(c->st),
                    key, de.msg);
    }
    free(old);
    free(data);
    if (fresh) *fresh = !rc && wrote ? 1 + replaced : 0;
    return rc;
}

static int by_episode(const void *a, const void *b) {
    const rec_metrics *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

int ledger_metrics_read(store *st, rec_metrics **rows, size_t *n, size_t *skipped, tdm_err *e) {
    *rows = NULL;
    *n = *skipped = 0;
    store_list l;
    int rc = store_list_prefix(st, LEDGER_METRICS, &l, e);
    if (rc) return rc;
    rec_metrics *out = calloc(l.n ? l.n : 1, sizeof *out);
    /* the rows, ROWS_WINDOW at a time side by side (store_get_many: one round trip per
     * row, one after another, on an object store), judged in the listing's order */
    enum { ROWS_WINDOW = 64 };
    store_got *got = calloc(ROWS_WINDOW, sizeof *got);
    uint64_t ts[ROWS_WINDOW];
    if (!out || !got) rc = err_set(e, ERR_INTERNAL, "out of memory for %zu metrics rows", l.n);
    for (size_t i = 0; !rc && i < l.n;) {
        size_t have = 0;
        for (; i < l.n && have < ROWS_WINDOW; i++)
            if (ledger_key_index(l.keys[i], LEDGER_METRICS, &ts[have]) == 0) /* else not a row */
                got[have++].key = l.keys[i];
        store_get_many(st, got, have);
        for (size_t k = 0; k < have; k++) {
            store_got *g = &got[k];
            tdm_err de;
            if (rc || g->rc == STORE_NOT_FOUND) { /* gone since the listing */
            } else if (g->rc) {
                rc = g->rc;
                *e = g->err;
            } else if (rec_metrics_decode(g->data, g->n, g->key, &out[*n], &de) ||
                       (out[*n].t != ts[k] && err_set(&de, ERR_STORE, "its episode (%llu) is not the one its "
                                                      "name says", (unsigned long long)out[*n].t))) {
                fprintf(stderr, "tandem: %s/%s skipped: %s\n", store_url(st), g->key, de.msg);
                ++*skipped;
            } else {
                ++*n;
            }
            free(g->data);
            g->data = NULL;
        }
    }
    free(got);
    store_list_free(&l);
    if (rc) {
        free(out);
        *n = 0;
        return rc;
    }
    qsort(out, *n, sizeof *out, by_episode);
    *rows = out;
    return 0;
}

