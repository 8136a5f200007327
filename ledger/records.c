/* records.c — encoders and strict decoders of the store's records; see records.h. */
#include "ledger/records.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/codec.h"

#define MAX_CHUNK_BYTES ((uint64_t)64 << 20)

static void put_format(codec_writer *w) {
    codec_key(w, "format");
    codec_u64(w, REC_FORMAT);
}

/* Opens the top-level map and checks its version before anything else, so a record
 * from a newer tandem gets "unknown format version" rather than a field error. */
static int open_record(codec_map_reader *r, const codec_parsed *p, const char *what,
                       const char *const *allowed, tdm_err *e) {
    if (p->root->type != MSGPACK_OBJECT_MAP)
        return err_set(e, ERR_STORE, "%s: not a tandem record (expected a map)", what);
    r->map = p->root;
    r->what = what;
    r->e = e;
    const msgpack_object *f = codec_field(r, "format");
    uint64_t v;
    if (!f || codec_obj_u64(f, &v))
        return err_set(e, ERR_STORE, "%s: not a tandem record (no 'format' field)", what);
    if (v != REC_FORMAT)
        return err_set(e, ERR_STORE,
                       "%s: format version %llu is not supported by this tandem (it reads "
                       "version %d); use a newer tandem",
                       what, (unsigned long long)v, REC_FORMAT);
    return codec_open_map(r, p->root, what, allowed, e);
}

static void *finish(codec_writer *w, size_t *n) {
    void *data = codec_writer_take(w, n);
    codec_writer_free(w);
    return data;
}

static int finite_all(const double *v, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* Reads a domain-indexed float array; the first one read fixes *M (when *M == 0). */
static int get_domain_array(const codec_map_reader *r, const char *key, double *out, int *M,
                            int probability) {
    size_t got = 0;
    int rc = codec_get_f64s(r, key, out, REC_MAX_DOMAINS, &got);
    if (rc) return rc;
    if (got < 1) return codec_field_error(r, key, "is empty");
    if (*M == 0) *M = (int)got;
    else if ((int)got != *M) return codec_field_error(r, key, "has a different domain count");
    if (!finite_all(out, (int)got)) return codec_field_error(r, key, "holds NaN or Inf");
    if (probability)
        for (size_t i = 0; i < got; i++)
            if (out[i] < 0 || out[i] > 1) return codec_field_error(r, key, "is not in [0, 1]");
    return 0;
}

/* The tokens seen per domain: a domain-indexed array of finite values ≥ 0. */
static int get_seen(const codec_map_reader *r, double *out, int *M) {
    int rc = get_domain_array(r, "seen", out, M, 0);
    for (int m = 0; !rc && m < *M; m++)
        if (out[m] < 0) rc = codec_field_error(r, "seen", "holds a negative count");
    return rc;
}

/* ------------------------------------------------------------------ HEAD */

void *rec_head_encode(const rec_head *h, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 8);
    put_format(&w);
    codec_key(&w, "seq");
    codec_u64(&w, h->seq);
    codec_key(&w, "state");
    codec_str(&w, h->state);
    codec_key(&w, "sha256");
    codec_bin(&w, h->state_sha.b, SHA256_LEN);
    codec_key(&w, "epoch");
    codec_u64(&w, h->epoch);
    codec_key(&w, "time");
    codec_f64(&w, h->time);
    codec_key(&w, "commits");
    codec_u64(&w, h->commits);
    codec_put_self(&w);
    return finish(&w, n);
}

int rec_head_decode(const void *data, size_t n, const char *what, rec_head *h, tdm_err *e) {
    static const char *const keys[] = {"format", "seq", "state", "sha256", "epoch", "time",
                                       "commits", "self", NULL};
    memset(h, 0, sizeof *h);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) rc = codec_get_u64(&r, "seq", 0, UINT64_MAX, &h->seq);
    if (!rc) rc = codec_get_str(&r, "state", h->state, sizeof h->state);
    if (!rc) rc = codec_get_digest(&r, "sha256", &h->state_sha);
    if (!rc) rc = codec_get_u64(&r, "epoch", 0, UINT64_MAX, &h->epoch);
    if (!rc) rc = codec_get_f64(&r, "time", &h->time);
    if (!rc) rc = codec_get_u64(&r, "commits", 0, UINT64_MAX, &h->commits);
    codec_parsed_free(&p);
    return rc;
}

/* ------------------------------------------------------------------ key/value lists */

/* An array of 1..REC_MAX_DOMAINS names of [A-Za-z0-9_.-] (the dataset's rules). */
static int get_names(const codec_map_reader *r, const char *key, char names[][REC_NAME_MAX], int *M) {
    const msgpack_object *o = codec_field(r, key);
    if (!o) return codec_field_error(r, key, "is missing");
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 ||
        o->via.array.size > REC_MAX_DOMAINS || (*M && (int)o->via.array.size != *M))
        return codec_field_error(r, key, "is not one name per domain");
    *M = (int)o->via.array.size;
    for (int m = 0; m < *M; m++) {
        const msgpack_object *s = &o->via.array.ptr[m];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 || s->via.str.size >= REC_NAME_MAX)
            return codec_field_error(r, key, "holds a bad name");
        for (uint32_t i = 0; i < s->via.str.size; i++) {
            char c = s->via.str.ptr[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-'))
                return codec_field_error(r, key, "holds a bad name");
        }
        memcpy(names[m], s->via.str.ptr, s->via.str.size);
        names[m][s->via.str.size] = '\0';
    }
    return 0;
}

static void put_kvs(codec_writer *w, const rec_kv *kv, size_t n) {
    codec_map(w, n);
    for (size_t i = 0; i < n; i++) {
        codec_key(w, kv[i].key);
        codec_str(w, kv[i].value);
    }
}

static void free_kvs(rec_kv *kv, size_t n) {
    if (!kv) return;
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

static char *dup_str(const msgpack_object *o) {
    if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size))
        return NULL;
    char *s = malloc(o->via.str.size + 1);
    if (!s) return NULL;
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

/* A map of string → string, keys strictly increasing (sorted, unique). */
static int get_kvs(const codec_map_reader *r, const char *key, rec_kv **out, size_t *n) {
    *out = NULL;
    *n = 0;
    const msgpack_object *o = codec_field(r, key);
    if (!o) return codec_field_error(r, key, "is missing");
    if (o->type != MSGPACK_OBJECT_MAP) return codec_field_error(r, key, "is not a map");
    size_t m = o->via.map.size;
    rec_kv *kv = calloc(m ? m : 1, sizeof *kv);
    if (!kv) return err_set(r->e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < m; i++) {
        kv[i].key = dup_str(&o->via.map.ptr[i].key);
        kv[i].value = dup_str(&o->via.map.ptr[i].val);
        if (!kv[i].key || !kv[i].value || (i > 0 && strcmp(kv[i - 1].key, kv[i].key) >= 0)) {
            free_kvs(kv, i + 1);
            return codec_field_error(r, key, "is not a sorted map of strings");
        }
    }
    *out = kv;
    *n = m;
    return 0;
}

void rec_config_hash(const rec_kv *kv, size_t n, sha256_digest *out) {
    sha256_ctx *c = sha256_begin();
    for (size_t i = 0; i < n; i++) {
        sha256_update(c, kv[i].key, strlen(kv[i].key));
        sha256_update(c, "=", 1);
        sha256_update(c, kv[i].value, strlen(kv[i].value));
        sha256_update(c, "\n", 1);
    }
    sha256_end(c, out);
}

/* ------------------------------------------------------------------ RUN */

void *rec_run_encode(const rec_run *run, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 6);
    put_format(&w);
    codec_key(&w, "run_id");
    codec_str(&w, run->run_id);
    codec_key(&w, "domains");
    codec_array(&w, (size_t)run->M);
    for (int m = 0; m < run->M; m++) codec_str(&w, run->domains[m]);
    codec_key(&w, "created");
    codec_u64(&w, run->created);
    codec_key(&w, "config");
    put_kvs(&w, run->config, run->nconfig);
    codec_key(&w, "config_sha256");
    codec_bin(&w, run->config_sha.b, SHA256_LEN);
    return finish(&w, n);
}

int rec_run_decode(const void *data, size_t n, const char *what, rec_run *run, tdm_err *e) {
    static const char *const keys[] = {"format", "run_id", "created", "config", "config_sha256",
                                       "domains", NULL};
    memset(run, 0, sizeof *run);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_get_str(&r, "run_id", run->run_id, sizeof run->run_id);
    if (!rc) rc = codec_get_u64(&r, "created", 0, UINT64_MAX, &run->created);
    if (!rc) rc = codec_get_digest(&r, "config_sha256", &run->config_sha);
    if (!rc) rc = get_names(&r, "domains", run->domains, &run->M);
    if (!rc) rc = get_kvs(&r, "config", &run->config, &run->nconfig);
    if (!rc) {
        sha256_digest d;
        rec_config_hash(run->config, run->nconfig, &d);
        if (!sha256_equal(&d, &run->config_sha))
            rc = err_set(e, ERR_STORE, "%s: the config does not match its config_sha256 (altered?)",
                         what);
    }
    codec_parsed_free(&p);
    if (rc) rec_run_free(run);
    return rc;
}

void rec_run_free(rec_run *run) {
    free_kvs(run->config, run->nconfig);
    run->config = NULL;
    run->nconfig = 0;
}

/* ------------------------------------------------------------------ config changes */

void *rec_change_encode(const rec_change *c, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 6);
    put_format(&w);
    codec_key(&w, "seq");
    codec_u64(&w, c->seq);
    codec_key(&w, "created");
    codec_u64(&w, c->created);
    codec_key(&w, "old");
    put_kvs(&w, c->old_values, c->n);
    codec_key(&w, "new");
    put_kvs(&w, c->new_values, c->n);
    codec_put_self(&w);
    return finish(&w, n);
}

int rec_change_decode(const void *data, size_t n, const char *what, rec_change *c, tdm_err *e) {
    static const char *const keys[] = {"format", "seq", "created", "old", "new", "self", NULL};
    memset(c, 0, sizeof *c);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    size_t n_old = 0, n_new = 0;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) rc = codec_get_u64(&r, "seq", 0, UINT64_MAX, &c->seq);
    if (!rc) rc = codec_get_u64(&r, "created", 0, UINT64_MAX, &c->created);
    if (!rc) rc = get_kvs(&r, "old", &c->old_values, &n_old);
    if (!rc) rc = get_kvs(&r, "new", &c->new_values, &n_new);
    c->n = n_old;
    if (!rc && n_old != n_new) rc = codec_field_error(&r, "new", "does not match 'old'");
    for (size_t i = 0; !rc && i < n_old; i++)
        if (strcmp(c->old_values[i].key, c->new_values[i].key) != 0)
            rc = codec_field_error(&r, "new", "does not name the same keys as 'old'");
    codec_parsed_free(&p);
    if (rc) {
        free_kvs(c->old_values, n_old);
        free_kvs(c->new_values, n_new);
        memset(c, 0, sizeof *c);
    }
    return rc;
}

void rec_change_free(rec_change *c) {
    free_kvs(c->old_values, c->n);
    free_kvs(c->new_values, c->n);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ α records */

/* The hashed part: every field but the meta map. */
static void put_alpha_body(codec_writer *w, const rec_alpha *a, size_t extra) {
    codec_map(w, 10 + (a->has_gen ? 1 : 0) + (a->has_seen ? 1 : 0) + extra);
    put_format(w);
    codec_key(w, "t");
    codec_u64(w, a->t);
    codec_key(w, "alpha");
    codec_f64s(w, a->alpha, (size_t)a->M);
    codec_key(w, "alpha_next");
    codec_f64s(w, a->alpha_next, (size_t)a->M);
    codec_key(w, "loss_u");
    codec_f64s(w, a->loss_u, (size_t)a->M);
    codec_key(w, "loss_w");
    codec_f64s(w, a->loss_w, (size_t)a->M);
    codec_key(w, "lr_alpha");
    codec_f64(w, a->lr_alpha);
    codec_key(w, "gamma");
    codec_f64(w, a->gamma);
    codec_key(w, "seq");
    codec_u64(w, a->seq);
    codec_key(w, "prev");
    codec_bin(w, a->prev.b, SHA256_LEN);
    if (a->has_gen) {
        codec_key(w, "gen");
        codec_u64(w, a->gen);
    }
    if (a->has_seen) {
        codec_key(w, "seen");
        codec_f64s(w, a->seen, (size_t)a->M);
    }
}

void rec_alpha_hash(const rec_alpha *a, sha256_digest *out) {
    codec_writer w;
    codec_writer_init(&w);
    put_alpha_body(&w, a, 0);
    sha256(w.buf.data, w.buf.size, out);
    codec_writer_free(&w);
}

void *rec_alpha_encode(const rec_alpha *a, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    put_alpha_body(&w, a, a->has_gen ? 2 : 1);
    codec_key(&w, "meta");
    codec_map(&w, 3);
    codec_key(&w, "time");
    codec_f64(&w, a->time);
    codec_key(&w, "host");
    codec_str(&w, a->host);
    codec_key(&w, "attempt");
    codec_u64(&w, a->attempt);
    if (a->has_gen) codec_put_self(&w);
    return finish(&w, n);
}

int rec_alpha_decode(const void *data, size_t n, const char *what, rec_alpha *a, tdm_err *e) {
    static const char *const keys[] = {"format", "t", "alpha", "alpha_next", "loss_u",
                                       "loss_w", "lr_alpha", "gamma", "seq", "prev", "meta",
                                       "gen", "self", "seen", NULL};
    static const char *const meta_keys[] = {"time", "host", "attempt", NULL};
    memset(a, 0, sizeof *a);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r, m;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) {
        a->has_gen = codec_field(&r, "gen") != NULL;
        if (a->has_gen != has_self)
            rc = codec_field_error(&r, "gen", "and 'self' must both be present or both absent");
        if (!rc && a->has_gen) rc = codec_get_u64(&r, "gen", 0, UINT32_MAX, &a->gen);
    }
    if (!rc) rc = codec_get_u64(&r, "t", 0, UINT32_MAX, &a->t);
    if (!rc) rc = get_domain_array(&r, "alpha", a->alpha, &a->M, 1);
    if (!rc) rc = get_domain_array(&r, "alpha_next", a->alpha_next, &a->M, 1);
    if (!rc) rc = get_domain_array(&r, "loss_u", a->loss_u, &a->M, 0);
    if (!rc) rc = get_domain_array(&r, "loss_w", a->loss_w, &a->M, 0);
    if (!rc && (a->has_seen = codec_field(&r, "seen") != NULL))
        rc = get_seen(&r, a->seen, &a->M);
    if (!rc) rc = codec_get_f64(&r, "lr_alpha", &a->lr_alpha);
    if (!rc) rc = codec_get_f64(&r, "gamma", &a->gamma);
    if (!rc && (!isfinite(a->lr_alpha) || !isfinite(a->gamma)))
        rc = codec_field_error(&r, "lr_alpha", "or gamma is not finite");
    if (!rc) rc = codec_get_u64(&r, "seq", 0, UINT64_MAX, &a->seq);
    if (!rc) rc = codec_get_digest(&r, "prev", &a->prev);
    if (!rc) {
        const msgpack_object *meta = codec_field(&r, "meta");
        char mwhat[300];
        snprintf(mwhat, sizeof mwhat, "%s (meta)", what);
        if (!meta) rc = codec_field_error(&r, "meta", "is missing");
        else rc = codec_open_map(&m, meta, mwhat, meta_keys, e);
        if (!rc) rc = codec_get_f64(&m, "time", &a->time);
        if (!rc) rc = codec_get_str(&m, "host", a->host, sizeof a->host);
        if (!rc) rc = codec_get_u64(&m, "attempt", 0, UINT64_MAX, &a->attempt);
    }
    codec_parsed_free(&p);
    return rc;
}

/* ------------------------------------------------------------------ lease */

void *rec_lease_encode(const rec_lease *l, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 7);
    put_format(&w);
    codec_key(&w, "epoch");
    codec_u64(&w, l->epoch);
    codec_key(&w, "host");
    codec_str(&w, l->host);
    codec_key(&w, "pid");
    codec_u64(&w, l->pid);
    codec_key(&w, "attempt");
    codec_u64(&w, l->attempt);
    codec_key(&w, "time");
    codec_f64(&w, l->time);
    codec_key(&w, "released");
    codec_bool(&w, l->released);
    return finish(&w, n);
}

int rec_lease_decode(const void *data, size_t n, const char *what, rec_lease *l, tdm_err *e) {
    static const char *const keys[] = {"format", "epoch", "host", "pid", "attempt", "time",
                                       "released", NULL};
    memset(l, 0, sizeof *l);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_get_u64(&r, "epoch", 0, UINT64_MAX, &l->epoch);
    if (!rc) rc = codec_get_str(&r, "host", l->host, sizeof l->host);
    if (!rc) rc = codec_get_u64(&r, "pid", 0, UINT64_MAX, &l->pid);
    if (!rc) rc = codec_get_u64(&r, "attempt", 0, UINT64_MAX, &l->attempt);
    if (!rc) rc = codec_get_f64(&r, "time", &l->time);
    if (!rc) rc = codec_get_bool(&r, "released", &l->released);
    codec_parsed_free(&p);
    return rc;
}

/* ------------------------------------------------------------------ mixture */

void *rec_mixture_encode(const rec_mixture *x, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 6);
    put_format(&w);
    codec_key(&w, "names");
    codec_array(&w, (size_t)x->M);
    for (int m = 0; m < x->M; m++) codec_str(&w, x->names[m]);
    codec_key(&w, "alpha");
    codec_f64s(&w, x->alpha, (size_t)x->M);
    codec_key(&w, "first");
    codec_u64(&w, x->first);
    codec_key(&w, "last");
    codec_u64(&w, x->last);
    codec_put_self(&w); /* read by other runs (training.mixture): damage must not pass as α* */
    return finish(&w, n);
}

int rec_mixture_decode(const void *data, size_t n, const char *what, rec_mixture *x, tdm_err *e) {
    static const char *const keys[] = {"format", "names", "alpha", "first", "last", "self", NULL};
    memset(x, 0, sizeof *x);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    int has_self = 0; /* mixture.mp of tandem before 2026-11-27 has none */
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) rc = get_domain_array(&r, "alpha", x->alpha, &x->M, 1);
    if (!rc) rc = get_names(&r, "names", x->names, &x->M);
    if (!rc) rc = codec_get_u64(&r, "first", 0, UINT32_MAX, &x->first);
    if (!rc) rc = codec_get_u64(&r, "last", x->first, UINT32_MAX, &x->last);
    codec_parsed_free(&p);
    return rc;
}

int rec_mixture_same(const void *stored, size_t n, const rec_mixture *want) {
    rec_mixture got;
    tdm_err e;
    if (rec_mixture_decode(stored, n, "mixture.mp", &got, &e) || got.M != want->M || got.first != want->first ||
        got.last != want->last)
        return 0;
    for (int m = 0; m < got.M; m++)
        if (strcmp(got.names[m], want->names[m]) || memcmp(&got.alpha[m], &want->alpha[m], sizeof got.alpha[m]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ SWEEP */

void *rec_sweep_encode(const rec_sweep *w, size_t *n) {
    codec_writer cw;
    codec_writer_init(&cw);
    codec_map(&cw, 4);
    put_format(&cw);
    codec_key(&cw, "sweep");
    codec_array(&cw, (size_t)w->n);
    for (int k = 0; k < w->n; k++) codec_str(&cw, w->text[k]);
    codec_key(&cw, "points");
    codec_u64(&cw, w->points);
    codec_put_self(&cw);
    return finish(&cw, n);
}

int rec_sweep_decode(const void *data, size_t n, const char *what, rec_sweep *w, tdm_err *e) {
    static const char *const keys[] = {"format", "sweep", "points", "self", NULL};
    memset(w, 0, sizeof *w);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc && !has_self) rc = codec_field_error(&r, "self", "is missing");
    const msgpack_object *o = rc ? NULL : codec_field(&r, "sweep");
    if (!rc && (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 ||
                o->via.array.size > REC_SWEEP_MAX_KEYS))
        rc = codec_field_error(&r, "sweep", "is not a list of 1 to 8 key=values texts");
    for (uint32_t k = 0; !rc && k < o->via.array.size; k++) {
        const msgpack_object *t = &o->via.array.ptr[k];
        if (t->type != MSGPACK_OBJECT_STR || t->via.str.size == 0 || t->via.str.size >= REC_SWEEP_TEXT_MAX ||
            memchr(t->via.str.ptr, '\0', t->via.str.size))
            rc = codec_field_error(&r, "sweep", "holds a bad text");
        else {
            memcpy(w->text[k], t->via.str.ptr, t->via.str.size);
            w->text[k][t->via.str.size] = '\0';
            w->n = (int)k + 1;
        }
    }
    if (!rc) rc = codec_get_u64(&r, "points", 1, 10000, &w->points);
    codec_parsed_free(&p);
    return rc;
}

/* ------------------------------------------------------------------ model.mp */

void *rec_model_encode(const rec_model *m, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 5);
    put_format(&w);
    codec_key(&w, "init");
    codec_str(&w, m->init);
    codec_key(&w, "config_sha256");
    codec_bin(&w, m->config_sha.b, SHA256_LEN);
    codec_key(&w, "weights_sha256");
    codec_bin(&w, m->weights_sha.b, SHA256_LEN);
    codec_put_self(&w);
    return finish(&w, n);
}

int rec_model_decode(const void *data, size_t n, const char *what, rec_model *m, tdm_err *e) {
    static const char *const keys[] = {"format", "init", "config_sha256", "weights_sha256", "self", NULL};
    memset(m, 0, sizeof *m);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc && !has_self) rc = codec_field_error(&r, "self", "is missing");
    if (!rc) rc = codec_get_str(&r, "init", m->init, sizeof m->init);
    if (!rc) rc = codec_get_digest(&r, "config_sha256", &m->config_sha);
    if (!rc) rc = codec_get_digest(&r, "weights_sha256", &m->weights_sha);
    codec_parsed_free(&p);
    return rc;
}

/* ------------------------------------------------------------------ state manifests */

static const char *const STEP_NAMES[] = {"probe", "alpha", "free", "done", NULL};

void *rec_state_encode(const rec_state *s, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    codec_map(&w, 15 + (s->have_losses ? 2 : 0) + (s->has_gen ? 2 : 0) + (s->has_episode ? 5 : 0) +
                      (s->has_seen ? 1 : 0));
    put_format(&w);
    codec_key(&w, "seq");
    codec_u64(&w, s->seq);
    codec_key(&w, "episode");
    codec_u64(&w, s->episode);
    codec_key(&w, "step");
    codec_str(&w, s->step);
    codec_key(&w, "index");
    codec_u64(&w, s->index);
    codec_key(&w, "free_steps");
    codec_u64(&w, s->free_steps);
    codec_key(&w, "seed");
    codec_u64(&w, s->seed);
    codec_key(&w, "alpha");
    codec_f64s(&w, s->alpha, (size_t)s->M);
    if (s->have_losses) {
        codec_key(&w, "loss_u");
        codec_f64s(&w, s->loss_u, (size_t)s->M);
        codec_key(&w, "loss_w");
        codec_f64s(&w, s->loss_w, (size_t)s->M);
    }
    codec_key(&w, "cursors");
    codec_array(&w, (size_t)s->M);
    for (int m = 0; m < s->M; m++) codec_u64s(&w, s->cursors[m], 4);
    codec_key(&w, "alpha_records");
    codec_u64(&w, s->alpha_records);
    codec_key(&w, "alpha_head");
    codec_bin(&w, s->alpha_head.b, SHA256_LEN);
    codec_key(&w, "views");
    codec_array(&w, s->nviews);
    for (size_t i = 0; i < s->nviews; i++) {
        const rec_view *v = &s->views[i];
        codec_map(&w, 4);
        codec_key(&w, "name");
        codec_str(&w, v->name);
        codec_key(&w, "rows");
        codec_u64(&w, v->rows);
        codec_key(&w, "cols");
        codec_u64(&w, v->cols);
        codec_key(&w, "offset");
        codec_u64(&w, v->offset);
    }
    codec_key(&w, "tensors");
    codec_array(&w, s->ntensors);
    for (size_t i = 0; i < s->ntensors; i++) {
        const rec_tensor *t = &s->tensors[i];
        codec_map(&w, 5);
        codec_key(&w, "name");
        codec_str(&w, t->name);
        codec_key(&w, "dtype");
        codec_str(&w, t->dtype);
        codec_key(&w, "shape");
        codec_u64s(&w, t->shape, (size_t)t->ndim);
        codec_key(&w, "chunk_bytes");
        codec_u64(&w, t->chunk_bytes);
        codec_key(&w, "chunks");
        codec_array(&w, t->nchunks);
        for (size_t c = 0; c < t->nchunks; c++) codec_bin(&w, t->chunks[c].b, SHA256_LEN);
    }
    codec_key(&w, "have_losses");
    codec_bool(&w, s->have_losses);
    codec_key(&w, "M");
    codec_u64(&w, (uint64_t)s->M);
    if (s->has_episode) {
        codec_key(&w, "ep_loss_u");
        codec_f64s(&w, s->ep_loss_u, (size_t)s->M);
        codec_key(&w, "ep_loss_w");
        codec_f64s(&w, s->ep_loss_w, (size_t)s->M);
        codec_key(&w, "ep_free_loss");
        codec_f64s(&w, s->ep_free_loss, (size_t)s->M);
        codec_key(&w, "ep_grad");
        codec_f64(&w, s->ep_grad);
        codec_key(&w, "ep_free_n");
        codec_u64(&w, s->ep_free_n);
    }
    if (s->has_seen) {
        codec_key(&w, "seen");
        codec_f64s(&w, s->seen, (size_t)s->M);
    }
    if (s->has_gen) {
        codec_key(&w, "gen");
        codec_u64(&w, s->gen);
        codec_put_self(&w);
    }
    return finish(&w, n);
}

static int name_ok(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int decode_views(const codec_map_reader *r, rec_state *s) {
    const msgpack_object *o = codec_field(r, "views");
    if (!o) return codec_field_error(r, "views", "is missing");
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > REC_MAX_TENSORS)
        return codec_field_error(r, "views", "is not an array of at most 4096 views");
    s->nviews = o->via.array.size;
    s->views = calloc(s->nviews ? s->nviews : 1, sizeof *s->views);
    if (!s->views) return err_set(r->e, ERR_INTERNAL, "out of memory");
    static const char *const keys[] = {"name", "rows", "cols", "offset", NULL};
    for (size_t i = 0; i < s->nviews; i++) {
        codec_map_reader v;
        char what[300];
        snprintf(what, sizeof what, "%s (view %zu)", r->what, i);
        rec_view *out = &s->views[i];
        int rc = codec_open_map(&v, &o->via.array.ptr[i], what, keys, r->e);
        if (!rc) rc = codec_get_str(&v, "name", out->name, sizeof out->name);
        if (!rc && !name_ok(out->name)) rc = codec_field_error(&v, "name", "has bad characters");
        if (!rc) rc = codec_get_u64(&v, "rows", 1, UINT32_MAX, &out->rows);
        if (!rc) rc = codec_get_u64(&v, "cols", 1, UINT32_MAX, &out->cols);
        if (!rc) rc = codec_get_u64(&v, "offset", 0, UINT64_MAX / 2, &out->offset);
        if (rc) return rc;
    }
    return 0;
}

static int decode_tensors(const codec_map_reader *r, rec_state *s) {
    const msgpack_object *o = codec_field(r, "tensors");
    if (!o) return codec_field_error(r, "tensors", "is missing");
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > REC_MAX_TENSORS)
        return codec_field_error(r, "tensors", "is not an array of at most 4096 tensors");
    s->ntensors = o->via.array.size;
    s->tensors = calloc(s->ntensors ? s->ntensors : 1, sizeof *s->tensors);
    if (!s->tensors) return err_set(r->e, ERR_INTERNAL, "out of memory");
    static const char *const keys[] = {"name", "dtype", "shape", "chunk_bytes", "chunks", NULL};
    for (size_t i = 0; i < s->ntensors; i++) {
        codec_map_reader t;
        char what[300];
        snprintf(what, sizeof what, "%s (tensor %zu)", r->what, i);
        rec_tensor *out = &s->tensors[i];
        size_t ndim = 0;
        int rc = codec_open_map(&t, &o->via.array.ptr[i], what, keys, r->e);
        if (!rc) rc = codec_get_str(&t, "name", out->name, sizeof out->name);
        if (!rc && !name_ok(out->name)) rc = codec_field_error(&t, "name", "has bad characters");
        if (!rc) rc = codec_get_str(&t, "dtype", out->dtype, sizeof out->dtype);
        if (!rc && strcmp(out->dtype, "f32") != 0)
            rc = codec_field_error(&t, "dtype", "is not \"f32\"");
        if (!rc) rc = codec_get_u64s(&t, "shape", out->shape, REC_MAX_DIMS, &ndim);
        if (!rc) rc = codec_get_u64(&t, "chunk_bytes", 4, MAX_CHUNK_BYTES, &out->chunk_bytes);
        if (rc) return rc;
        out->ndim = (int)ndim;
        if (ndim < 1) return codec_field_error(&t, "shape", "is empty");
        uint64_t elems = 1;
        for (size_t d = 0; d < ndim; d++) {
            if (out->shape[d] == 0 || elems > (UINT64_MAX / 8) / out->shape[d])
                return codec_field_error(&t, "shape", "is zero or too large");
            elems *= out->shape[d];
        }
        uint64_t bytes = elems * 4;
        uint64_t want = (bytes + out->chunk_bytes - 1) / out->chunk_bytes;
        const msgpack_object *ch = codec_field(&t, "chunks");
        if (!ch) return codec_field_error(&t, "chunks", "is missing");
        if (ch->type != MSGPACK_OBJECT_ARRAY || ch->via.array.size != want)
            return codec_field_error(&t, "chunks", "does not match shape and chunk_bytes");
        out->nchunks = (size_t)want;
        out->chunks = calloc(out->nchunks, sizeof *out->chunks);
        if (!out->chunks) return err_set(r->e, ERR_INTERNAL, "out of memory");
        for (size_t c = 0; c < out->nchunks; c++) {
            const msgpack_object *b = &ch->via.array.ptr[c];
            if (b->type != MSGPACK_OBJECT_BIN || b->via.bin.size != SHA256_LEN)
                return codec_field_error(&t, "chunks", "holds a value that is not a SHA-256");
            memcpy(out->chunks[c].b, b->via.bin.ptr, SHA256_LEN);
        }
    }
    return 0;
}

int rec_state_decode(const void *data, size_t n, const char *what, rec_state *s, tdm_err *e) {
    static const char *const keys[] = {"format", "seq", "episode", "step", "index",
                                       "free_steps", "seed", "alpha", "loss_u", "loss_w",
                                       "cursors", "alpha_records", "alpha_head", "views",
                                       "tensors", "have_losses", "M", "gen", "self", "ep_loss_u",
                                       "ep_loss_w", "ep_free_loss", "ep_grad", "ep_free_n", "seen",
                                       NULL};
    memset(s, 0, sizeof *s);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r;
    uint64_t M = 0;
    int has_self = 0;
    rc = open_record(&r, &p, what, keys, e);
    if (!rc) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc) {
        s->has_gen = codec_field(&r, "gen") != NULL;
        if (s->has_gen != has_self)
            rc = codec_field_error(&r, "gen", "and 'self' must both be present or both absent");
        if (!rc && s->has_gen) rc = codec_get_u64(&r, "gen", 0, UINT32_MAX, &s->gen);
    }
    if (!rc) rc = codec_get_u64(&r, "seq", 0, UINT64_MAX / 2, &s->seq);
    if (!rc) rc = codec_get_u64(&r, "episode", 0, UINT32_MAX, &s->episode);
    if (!rc) rc = codec_get_str(&r, "step", s->step, sizeof s->step);
    if (!rc) {
        int known = 0;
        for (const char *const *k = STEP_NAMES; *k; k++) known |= strcmp(*k, s->step) == 0;
        if (!known) rc = codec_field_error(&r, "step", "is not probe, alpha, free or done");
    }
    if (!rc) rc = codec_get_u64(&r, "index", 0, UINT32_MAX, &s->index);
    if (!rc) rc = codec_get_u64(&r, "free_steps", 0, UINT64_MAX / 2, &s->free_steps);
    if (!rc) rc = codec_get_u64(&r, "seed", 0, UINT64_MAX, &s->seed);
    if (!rc) rc = codec_get_u64(&r, "M", 1, REC_MAX_DOMAINS, &M);
    if (!rc) rc = codec_get_bool(&r, "have_losses", &s->have_losses);
    s->M = (int)M;
    if (!rc) rc = get_domain_array(&r, "alpha", s->alpha, &s->M, 1);
    if (!rc && s->have_losses) {
        rc = get_domain_array(&r, "loss_u", s->loss_u, &s->M, 0);
        if (!rc) rc = get_domain_array(&r, "loss_w", s->loss_w, &s->M, 0);
    } else if (!rc && (codec_field(&r, "loss_u") || codec_field(&r, "loss_w"))) {
        rc = codec_field_error(&r, "loss_u", "is present although have_losses is false");
    }
    if (!rc) {
        const msgpack_object *c = codec_field(&r, "cursors");
        if (!c) rc = codec_field_error(&r, "cursors", "is missing");
        else if (c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size != M)
            rc = codec_field_error(&r, "cursors", "is not an array of M cursors");
        for (uint64_t m = 0; !rc && m < M; m++) {
            const msgpack_object *row = &c->via.array.ptr[m];
            if (row->type != MSGPACK_OBJECT_ARRAY || row->via.array.size != 4) {
                rc = codec_field_error(&r, "cursors", "holds a cursor that is not 4 integers");
                break;
            }
            for (int k = 0; k < 4 && !rc; k++)
                if (codec_obj_u64(&row->via.array.ptr[k], &s->cursors[m][k]))
                    rc = codec_field_error(&r, "cursors", "holds a non-integer");
        }
    }
    if (!rc) {
        static const char *const ep[] = {"ep_loss_u", "ep_loss_w", "ep_free_loss", "ep_grad", "ep_free_n"};
        int present = 0;
        for (int k = 0; k < 5; k++) present += codec_field(&r, ep[k]) != NULL;
        s->has_episode = present == 5;
        if (present && present != 5)
            rc = codec_field_error(&r, "ep_loss_u", "and the other ep_* fields must all be present or all absent");
        else if (present && strcmp(s->step, "free"))
            rc = codec_field_error(&r, "ep_loss_u", "is present outside the free phase");
        if (!rc && s->has_episode) rc = get_domain_array(&r, "ep_loss_u", s->ep_loss_u, &s->M, 0);
        if (!rc && s->has_episode) rc = get_domain_array(&r, "ep_loss_w", s->ep_loss_w, &s->M, 0);
        if (!rc && s->has_episode) rc = get_domain_array(&r, "ep_free_loss", s->ep_free_loss, &s->M, 0);
        if (!rc && s->has_episode) rc = codec_get_f64(&r, "ep_grad", &s->ep_grad);
        if (!rc && s->has_episode) rc = codec_get_u64(&r, "ep_free_n", 0, UINT32_MAX, &s->ep_free_n);
        if (!rc && s->has_episode && s->ep_free_n != s->index)
            rc = codec_field_error(&r, "ep_free_n", "is not the number of free steps the episode has done (index)");
        if (!rc && s->has_episode && !isfinite(s->ep_grad))
            rc = codec_field_error(&r, "ep_grad", "is NaN or Inf");
    }
    if (!rc && (s->has_seen = codec_field(&r, "seen") != NULL)) rc = get_seen(&r, s->seen, &s->M);
    if (!rc) rc = codec_get_u64(&r, "alpha_records", 0, UINT32_MAX, &s->alpha_records);
    if (!rc) rc = codec_get_digest(&r, "alpha_head", &s->alpha_head);
    if (!rc) rc = decode_views(&r, s);
    if (!rc) rc = decode_tensors(&r, s);
    codec_parsed_free(&p);
    if (rc) rec_state_free(s);
    return rc;
}

void rec_state_free(rec_state *s) {
    if (s->tensors)
        for (size_t i = 0; i < s->ntensors; i++) free(s->tensors[i].chunks);
    free(s->tensors);
    free(s->views);
    s->tensors = NULL;
    s->views = NULL;
    s->ntensors = s->nviews = 0;
}

