/* metrics.c — the per-episode rows of metrics/; see metrics.h. */
#include "ledger/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ckpt_impl.h"
#include "ledger/codec.h"
#include "ledger/keys.h"
#include "util/testhook.h"

void *rec_metrics_encode(const rec_metrics *m, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 17 + (m->has_probe ? 2 : 0) + (m->has_seen ? 2 : 0) + (m->has_val ? 2 : 0) +
                      (m->n_steps ? 2 : 0)); /* self included */
    codec_key(&w, "format");
    codec_u64(&w, REC_FORMAT);
    codec_key(&w, "t");
    codec_u64(&w, m->t);
    codec_key(&w, "seq");
    codec_u64(&w, m->seq);
    codec_key(&w, "gen");
    codec_u64(&w, m->gen);
    codec_key(&w, "loss");
    codec_f64s(&w, m->loss, (size_t)m->M);
    if (m->has_probe) {
        codec_key(&w, "loss_u");
        codec_f64s(&w, m->loss_u, (size_t)m->M);
        codec_key(&w, "loss_w");
        codec_f64s(&w, m->loss_w, (size_t)m->M);
    }
    codec_key(&w, "alpha");
    codec_f64s(&w, m->alpha, (size_t)m->M);
    if (m->has_seen) {
        codec_key(&w, "seen");
        codec_f64s(&w, m->seen, (size_t)m->M);
        codec_key(&w, "epochs");
        codec_f64s(&w, m->epochs, (size_t)m->M);
    }
    if (m->n_steps) {
        codec_key(&w, "step_loss");
        codec_f64s(&w, m->step_loss, (size_t)m->n_steps);
        codec_key(&w, "step_first");
        codec_u64(&w, m->step_first);
    }
    if (m->has_val) {
        codec_key(&w, "val");
        codec_f64s(&w, m->val, (size_t)m->M);
        codec_key(&w, "val_tokens");
        codec_u64(&w, m->val_tokens);
    }
    codec_key(&w, "lr");
    codec_f64(&w, m->lr);
    codec_key(&w, "lr_alpha");
    codec_f64(&w, m->lr_alpha);
    codec_key(&w, "grad_norm");
    codec_f64(&w, m->grad_norm);
    codec_key(&w, "free_steps");
    codec_u64(&w, m->free_steps);
    codec_key(&w, "tokens_per_s");
    codec_f64(&w, m->tokens_per_s);
    codec_key(&w, "episode_s");
    codec_f64(&w, m->episode_s);
    codec_key(&w, "commit_s");
    codec_f64(&w, m->commit_s);
    codec_key(&w, "time");
    codec_f64(&w, m->time);
    codec_key(&w, "host");
    codec_str(&w, m->host);
    codec_key(&w, "attempt");
    codec_u64(&w, m->attempt);
    codec_put_self(&w); /* a row damaged anywhere reads as damaged, never as other figures */
    void *data = codec_writer_take(&w, n);
    codec_writer_free(&w);
    return data;
}

/* A per-domain array of exactly M values (M set by the first one read). */
static int get_domains(const codec_map_reader *r, const char *key, double *out, int *M) {
    size_t got = 0;
    int rc = codec_get_f64s(r, key, out, REC_MAX_DOMAINS, &got);
    if (rc) return rc;
    if (got < 1 || (*M && (int)got != *M)) return codec_field_error(r, key, "is not one value per domain");
    *M = (int)got;
    return 0;
}

int rec_metrics_decode(const void *data, size_t n, const char *what, rec_metrics *m, tdm_err *e) {
    static const char *const keys[] = {"format", "t", "seq", "gen", "loss", "loss_u", "loss_w",
                                       "alpha", "lr", "lr_alpha", "grad_norm", "free_steps",
                                       "tokens_per_s", "episode_s", "commit_s", "time", "host",
                                       "attempt", "self", "seen", "epochs", "val", "val_tokens",
                                       "step_loss", "step_first", NULL};
    memset(m, 0, sizeof *m);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    uint64_t format = 0;
    int has_self = 0; /* rows of tandem before 2026-11-27 have none */
    rc = codec_open_map(&r, p.root, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) rc = codec_get_u64(&r, "format", REC_FORMAT, REC_FORMAT, &format);
    if (!rc) rc = codec_get_u64(&r, "t", 0, UINT32_MAX, &m->t);
    if (!rc) rc = codec_get_u64(&r, "seq", 0, UINT64_MAX, &m->seq);
    if (!rc) rc = codec_get_u64(&r, "gen", 0, UINT64_MAX, &m->gen);
    if (!rc) rc = get_domains(&r, "loss", m->loss, &m->M);
    m->has_probe = !rc && codec_field(&r, "loss_u") != NULL;
    if (!rc && m->has_probe) rc = get_domains(&r, "loss_u", m->loss_u, &m->M);
    if (!rc && m->has_probe) rc = get_domains(&r, "loss_w", m->loss_w, &m->M);
    if (!rc) rc = get_domains(&r, "alpha", m->alpha, &m->M);
    m->has_seen = !rc && codec_field(&r, "seen") != NULL;
    if (!rc && m->has_seen) rc = get_domains(&r, "seen", m->seen, &m->M);
    if (!rc && m->has_seen) rc = get_domains(&r, "epochs", m->epochs, &m->M);
    if (!rc && codec_field(&r, "step_loss")) {
        size_t got = 0;
        rc = codec_get_f64s(&r, "step_loss", m->step_loss, METRICS_MAX_STEPS, &got);
        if (!rc && got < 1) rc = codec_field_error(&r, "step_loss", "is empty");
        if (!rc) rc = codec_get_u64(&r, "step_first", 1, UINT64_MAX, &m->step_first);
        m->n_steps = rc ? 0 : (int)got;
    }
    m->has_val = !rc && codec_field(&r, "val") != NULL;
    if (!rc && m->has_val) rc = get_domains(&r, "val", m->val, &m->M);
    if (!rc && m->has_val) rc = codec_get_u64(&r, "val_tokens", 1, UINT64_MAX, &m->val_tokens);
    if (!rc) rc = codec_get_f64(&r, "lr", &m->lr);
    if (!rc) rc = codec_get_f64(&r, "lr_alpha", &m->lr_alpha);
    if (!rc) rc = codec_get_f64(&r, "grad_norm", &m->grad_norm);
    if (!rc) rc = codec_get_u64(&r, "free_steps", 0, UINT32_MAX, &m->free_steps);
    if (!rc) rc = codec_get_f64(&r, "tokens_per_s", &m->tokens_per_s);
    if (!rc) rc = codec_get_f64(&r, "episode_s", &m->episode_s);
    if (!rc) rc = codec_get_f64(&r, "commit_s", &m->commit_s);
    if (!rc) rc = codec_get_f64(&r, "time", &m->time);
    if (!rc) rc = codec_get_str(&r, "host", m->host, sizeof m->host);
    if (!rc) rc = codec_get_u64(&r, "attempt", 0, UINT64_MAX, &m->attempt);
    codec_parsed_free(&p);
    return rc;
}

int ckpt_metrics_record(ckpt *c, rec_metrics *m, int *fresh, tdm_err *e) {
    int wrote = 0;
    m->gen = c->gen;
    size_t n;
    void *data = rec_metrics_encode(m, &n);
    char key[64];
    ledger_metrics_key(key, sizeof key, m->t);
    testhook_kill_at("metrics");
    int rc = ckpt_check_lease(c, e); /* a fenced-out writer writes nothing more */
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
        rc = wrote ? store_put(c->st, key, data, n, STORE_OVERWRITE, e) : 0;
        if (bad && !rc)
            fprintf(stderr, "tandem: %s/%s could not be read (%s); written again\n", store_url(c->st),
                    key, de.msg);
    }
    free(old);
    free(data);
    if (fresh) *fresh = !rc && wrote;
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
    if (!out) rc = err_set(e, ERR_INTERNAL, "out of memory for %zu metrics rows", l.n);
    for (size_t i = 0; !rc && i < l.n; i++) {
        uint64_t t;
        if (ledger_key_index(l.keys[i], LEDGER_METRICS, &t)) continue; /* not a row */
        void *data = NULL;
        size_t dn = 0;
        tdm_err de;
        int got = store_get(st, l.keys[i], &data, &dn, NULL, &de);
        if (got == STORE_NOT_FOUND) continue; /* gone since the listing */
        if (got) {
            rc = got;
            *e = de;
        } else if (rec_metrics_decode(data, dn, l.keys[i], &out[*n], &de) ||
                   (out[*n].t != t && err_set(&de, ERR_STORE, "its episode (%llu) is not the one its "
                                              "name says", (unsigned long long)out[*n].t))) {
            fprintf(stderr, "tandem: %s/%s skipped: %s\n", store_url(st), l.keys[i], de.msg);
            ++*skipped;
        } else {
            ++*n;
        }
        free(data);
    }
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
