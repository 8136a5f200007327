/* records.c — the store's records, each kind a table of its fields (ledger/rectab.h: one
 * encoder, one strict decoder); see records.h. The bytes of every kind are pinned by
 * tests/records/golden/. */
#include "ledger/records.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/codec.h"
#include "ledger/keys.h"
#include "ledger/rectab.h"

#define MAX_CHUNK_BYTES ((uint64_t)64 << 20)

/* Field rows: F(struct, field, "name", type, flags), with the range or size after. */
#define U64(T, f, lo, hi) {#f, RT_U64, offsetof(T, f), 0, lo, hi, 0, 0, NULL, NULL, NULL}
#define U64N(T, f, name, lo, hi) {name, RT_U64, offsetof(T, f), 0, lo, hi, 0, 0, NULL, NULL, NULL}
#define F64(T, f, fl) {#f, RT_F64, offsetof(T, f), 0, 0, 0, fl, 0, NULL, NULL, NULL}
#define STR(T, f) {#f, RT_STR, offsetof(T, f), sizeof(((T *)0)->f), 0, 0, 0, 0, NULL, NULL, NULL}
#define DIGEST(T, f, name) {name, RT_DIGEST, offsetof(T, f), 0, 0, 0, 0, 0, NULL, NULL, NULL}
#define DOMAINS(T, f, fl) {#f, RT_DOMAINS, offsetof(T, f), 0, 0, 0, fl, 0, NULL, NULL, NULL}
#define CUSTOM(T, name, fl, put, get) {name, RT_CUSTOM, 0, 0, 0, 0, fl, 0, NULL, put, get}

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

/* ------------------------------------------------------------------ HEAD */

static const rt_field HEAD_FIELDS[] = {
    U64(rec_head, seq, 0, UINT64_MAX),
    STR(rec_head, state),
    DIGEST(rec_head, state_sha, "sha256"),
    U64(rec_head, epoch, 0, UINT64_MAX),
    F64(rec_head, time, 0),
    U64(rec_head, commits, 0, UINT64_MAX),
};
/* HEAD names states/<seq>.mp of its own seq, as every writer writes it: another name (a
 * path out of the store, "states/../RUN", a state of another seq) is damage, said as a
 * field of the record — a reader took it for a key and stopped with an internal error */
static int check_head(const codec_map_reader *r, void *rec) {
    const rec_head *h = rec;
    uint64_t n;
    if (ledger_key_index(h->state, LEDGER_STATES, &n) != 0 || n != h->seq)
        return codec_field_error(r, "state", "is not states/<seq>.mp of the record's seq");
    return 0;
}
static const rt_table HEAD = {"HEAD", sizeof(rec_head), HEAD_FIELDS, 6, RT_NO_M, RT_SEAL_ALWAYS, 0, NULL, check_head, NULL, 0, 0, 0};

void *rec_head_encode(const rec_head *h, size_t *n) { return rt_encode(&HEAD, h, n); }
int rec_head_decode(const void *data, size_t n, const char *what, rec_head *h, tdm_err *e) {
    return rt_decode(&HEAD, data, n, what, h, e);
}

/* ------------------------------------------------------------------ key/value lists */

static void put_run_config(codec_writer *w, const void *rec) {
    const rec_run *r = rec;
    put_kvs(w, r->config, r->nconfig);
}
static int get_run_config(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o;
    rec_run *run = rec;
    return get_kvs(r, key, &run->config, &run->nconfig);
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

/* RUN's config must hash to its config_sha256 (RUN carries no self-digest: this is its). */
static int check_run(const codec_map_reader *r, void *rec) {
    const rec_run *run = rec;
    sha256_digest d;
    rec_config_hash(run->config, run->nconfig, &d);
    if (!sha256_equal(&d, &run->config_sha))
        return err_set(r->e, ERR_STORE, "%s: the config does not match its config_sha256 (altered?)", r->what);
    return 0;
}
static void release_run(void *rec) { rec_run_free(rec); }

static const rt_field RUN_FIELDS[] = {
    STR(rec_run, run_id),
    {"domains", RT_NAMES, offsetof(rec_run, domains), 0, 0, 0, 0, 0, NULL, NULL, NULL},
    U64(rec_run, created, 0, UINT64_MAX),
    CUSTOM(rec_run, "config", 0, put_run_config, get_run_config),
    DIGEST(rec_run, config_sha, "config_sha256"),
};
static const rt_table RUN = {"RUN", sizeof(rec_run), RUN_FIELDS, 5, offsetof(rec_run, M), RT_SEAL_NONE, 0, NULL,
                             check_run, release_run, 0, 0, 0};

void *rec_run_encode(const rec_run *run, size_t *n) { return rt_encode(&RUN, run, n); }
int rec_run_decode(const void *data, size_t n, const char *what, rec_run *run, tdm_err *e) {
    return rt_decode(&RUN, data, n, what, run, e);
}

void rec_run_free(rec_run *run) {
    free_kvs(run->config, run->nconfig);
    run->config = NULL;
    run->nconfig = 0;
}

/* ------------------------------------------------------------------ config changes */

static void put_change_old(codec_writer *w, const void *rec) {
    const rec_change *c = rec;
    put_kvs(w, c->old_values, c->n);
}
static void put_change_new(codec_writer *w, const void *rec) {
    const rec_change *c = rec;
    put_kvs(w, c->new_values, c->n);
}
static int get_change_old(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o;
    rec_change *c = rec;
    return get_kvs(r, key, &c->old_values, &c->n);
}
/* 'new' names the same keys as 'old', in the same order */
static int get_change_new(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o;
    rec_change *c = rec;
    size_t n = 0;
    int rc = get_kvs(r, key, &c->new_values, &n);
    if (!rc && n != c->n) rc = codec_field_error(r, key, "does not match 'old'");
    for (size_t i = 0; !rc && i < n; i++)
        if (strcmp(c->old_values[i].key, c->new_values[i].key) != 0)
            rc = codec_field_error(r, key, "does not name the same keys as 'old'");
    if (rc) {
        free_kvs(c->new_values, n);
        c->new_values = NULL;
    }
    return rc;
}
static void release_change(void *rec) { rec_change_free(rec); }

static const rt_field CHANGE_FIELDS[] = {
    U64(rec_change, seq, 0, UINT64_MAX),
    U64(rec_change, created, 0, UINT64_MAX),
    CUSTOM(rec_change, "old", 0, put_change_old, get_change_old),
    CUSTOM(rec_change, "new", 0, put_change_new, get_change_new),
};
static const rt_table CHANGE = {"configs/<n>.mp", sizeof(rec_change), CHANGE_FIELDS, 4, RT_NO_M, RT_SEAL_ALWAYS, 0,
                                NULL, NULL, release_change, 0, 0, 0};

void *rec_change_encode(const rec_change *c, size_t *n) { return rt_encode(&CHANGE, c, n); }
int rec_change_decode(const void *data, size_t n, const char *what, rec_change *c, tdm_err *e) {
    return rt_decode(&CHANGE, data, n, what, c, e);
}

void rec_change_free(rec_change *c) {
    free_kvs(c->old_values, c->n);
    free_kvs(c->new_values, c->n);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ α records */

/* meta: when and where the record was written, outside its hash */
static void put_alpha_meta(codec_writer *w, const void *rec) {
    const rec_alpha *a = rec;
    codec_map(w, 3);
    codec_key(w, "time");
    codec_f64(w, a->time);
    codec_key(w, "host");
    codec_str(w, a->host);
    codec_key(w, "attempt");
    codec_u64(w, a->attempt);
}
static int get_alpha_meta(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)key;
    static const char *const meta_keys[] = {"time", "host", "attempt", NULL};
    rec_alpha *a = rec;
    codec_map_reader m;
    char mwhat[300];
    snprintf(mwhat, sizeof mwhat, "%s (meta)", r->what);
    int rc = codec_open_map(&m, o, mwhat, meta_keys, r->e);
    if (!rc) rc = codec_get_f64(&m, "time", &a->time);
    if (!rc) rc = codec_get_str(&m, "host", a->host, sizeof a->host);
    if (!rc) rc = codec_get_u64(&m, "attempt", 0, UINT64_MAX, &a->attempt);
    return rc;
}

static const rt_field ALPHA_FIELDS[] = {
    U64(rec_alpha, t, 0, UINT32_MAX),
    DOMAINS(rec_alpha, alpha, RT_PROB),
    DOMAINS(rec_alpha, alpha_next, RT_PROB),
    DOMAINS(rec_alpha, loss_u, 0),
    DOMAINS(rec_alpha, loss_w, 0),
    F64(rec_alpha, lr_alpha, RT_FINITE),
    F64(rec_alpha, gamma, RT_FINITE),
    U64(rec_alpha, seq, 0, UINT64_MAX),
    DIGEST(rec_alpha, prev, "prev"),
    {"gen", RT_U64, offsetof(rec_alpha, gen), 0, 0, UINT32_MAX, RT_OPT, offsetof(rec_alpha, has_gen), NULL, NULL, NULL},
    {"seen", RT_DOMAINS, offsetof(rec_alpha, seen), 0, 0, 0, RT_OPT | RT_NONNEG, offsetof(rec_alpha, has_seen), NULL,
     NULL, NULL},
    CUSTOM(rec_alpha, "meta", RT_META, put_alpha_meta, get_alpha_meta),
};
static const rt_table ALPHA = {"alpha/<t>.mp", sizeof(rec_alpha), ALPHA_FIELDS, 12, offsetof(rec_alpha, M),
                               RT_SEAL_IF, offsetof(rec_alpha, has_gen), "gen", NULL, NULL, 0, 0, 0};

void rec_alpha_hash(const rec_alpha *a, sha256_digest *out) {
    codec_writer w;
    codec_writer_init(&w);
    rt_put_body(&w, &ALPHA, a);
    sha256(w.buf.data, w.buf.size, out);
    codec_writer_free(&w);
}

void *rec_alpha_encode(const rec_alpha *a, size_t *n) { return rt_encode(&ALPHA, a, n); }
int rec_alpha_decode(const void *data, size_t n, const char *what, rec_alpha *a, tdm_err *e) {
    return rt_decode(&ALPHA, data, n, what, a, e);
}

/* ------------------------------------------------------------------ lease */

static const rt_field LEASE_FIELDS[] = {
    U64(rec_lease, epoch, 0, UINT64_MAX),
    STR(rec_lease, host),
    U64(rec_lease, pid, 0, UINT64_MAX),
    U64(rec_lease, attempt, 0, UINT64_MAX),
    F64(rec_lease, time, 0),
    {"released", RT_BOOL, offsetof(rec_lease, released), 0, 0, 0, 0, 0, NULL, NULL, NULL},
    {"settle_until", RT_F64, offsetof(rec_lease, settle_until), 0, 0, 0, RT_OPT | RT_FINITE,
     offsetof(rec_lease, has_settle), NULL, NULL, NULL},
    {"settle_window", RT_F64, offsetof(rec_lease, settle_window), 0, 0, 0, RT_OPT | RT_FINITE,
     offsetof(rec_lease, has_window), NULL, NULL, NULL},
    {"pid_ns", RT_U64, offsetof(rec_lease, pid_ns), 0, 0, UINT64_MAX, RT_OPT, offsetof(rec_lease, has_pid_ns),
     NULL, NULL, NULL},
    {"boot_id", RT_STR, offsetof(rec_lease, boot_id), sizeof(((rec_lease *)0)->boot_id), 0, 0, RT_OPT,
     offsetof(rec_lease, has_boot_id), NULL, NULL, NULL},
    {"late_deletes", RT_STR, offsetof(rec_lease, late_deletes), REC_LATE_DELETES_MAX, 0, 0, RT_OPT,
     offsetof(rec_lease, has_late_deletes), NULL, NULL, NULL},
    {"start_ticks", RT_U64, offsetof(rec_lease, start_ticks), 0, 0, UINT64_MAX, RT_OPT, offsetof(rec_lease, has_start),
     NULL, NULL, NULL},
};
/* open: pid_ns and boot_id were added after the lease's first form (an older tandem
 * refused them as unknown, took the lease for damage and replaced it, a live writer's); a
 * field added after these is skipped by this tandem (late_deletes, 2026-12-07, by the
 * tandem of 2026-12-06 on) */
static const rt_table LEASE = {"lease", sizeof(rec_lease), LEASE_FIELDS, 12, RT_NO_M, RT_SEAL_NONE, 0, NULL, NULL, NULL, 1, 0, 0};

void *rec_lease_encode(const rec_lease *l, size_t *n) { return rt_encode(&LEASE, l, n); }
int rec_lease_decode(const void *data, size_t n, const char *what, rec_lease *l, tdm_err *e) {
    return rt_decode(&LEASE, data, n, what, l, e);
}

/* ------------------------------------------------------------------ mixture */

static int check_mixture(const codec_map_reader *r, void *rec) {
    const rec_mixture *x = rec;
    if (x->last < x->first) {
        char msg[128];
        snprintf(msg, sizeof msg, "= %llu is outside %llu..%llu", (unsigned long long)x->last,
                 (unsigned long long)x->first, (unsigned long long)UINT32_MAX);
        return codec_field_error(r, "last", msg);
    }
    return 0;
}

/* sealed: read by other runs (data.mixture: file), so damage must not pass as α* */
static const rt_field MIXTURE_FIELDS[] = {
    {"names", RT_NAMES, offsetof(rec_mixture, names), 0, 0, 0, 0, 0, NULL, NULL, NULL},
    DOMAINS(rec_mixture, alpha, RT_PROB),
    U64(rec_mixture, first, 0, UINT32_MAX),
    U64(rec_mixture, last, 0, UINT32_MAX),
};
static const rt_table MIXTURE = {"mixture.mp", sizeof(rec_mixture), MIXTURE_FIELDS, 4, offsetof(rec_mixture, M),
                                 RT_SEAL_ALWAYS, 0, NULL, check_mixture, NULL, 0, 0, 0};

void *rec_mixture_encode(const rec_mixture *x, size_t *n) { return rt_encode(&MIXTURE, x, n); }
int rec_mixture_decode(const void *data, size_t n, const char *what, rec_mixture *x, tdm_err *e) {
    return rt_decode(&MIXTURE, data, n, what, x, e);
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

static void put_sweep_texts(codec_writer *w, const void *rec) {
    const rec_sweep *s = rec;
    codec_array(w, (size_t)s->n);
    for (int k = 0; k < s->n; k++) codec_str(w, s->text[k]);
}
static int get_sweep_texts(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    rec_sweep *w = rec;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 || o->via.array.size > REC_SWEEP_MAX_KEYS)
        return codec_field_error(r, key, "is not a list of 1 to 8 key=values texts");
    for (uint32_t k = 0; k < o->via.array.size; k++) {
        const msgpack_object *t = &o->via.array.ptr[k];
        if (t->type != MSGPACK_OBJECT_STR || t->via.str.size == 0 || t->via.str.size >= REC_SWEEP_TEXT_MAX ||
            memchr(t->via.str.ptr, '\0', t->via.str.size))
            return codec_field_error(r, key, "holds a bad text");
        memcpy(w->text[k], t->via.str.ptr, t->via.str.size);
        w->text[k][t->via.str.size] = '\0';
        w->n = (int)k + 1;
    }
    return 0;
}

static const rt_field SWEEP_FIELDS[] = {
    CUSTOM(rec_sweep, "sweep", 0, put_sweep_texts, get_sweep_texts),
    U64(rec_sweep, points, 1, 10000),
};
static const rt_table SWEEP = {"SWEEP", sizeof(rec_sweep), SWEEP_FIELDS, 2, RT_NO_M, RT_SEAL_REQUIRED, 0, NULL, NULL,
                               NULL, 0, 0, 0};

void *rec_sweep_encode(const rec_sweep *w, size_t *n) { return rt_encode(&SWEEP, w, n); }
int rec_sweep_decode(const void *data, size_t n, const char *what, rec_sweep *w, tdm_err *e) {
    return rt_decode(&SWEEP, data, n, what, w, e);
}

/* ------------------------------------------------------------------ model.mp */

static const rt_field MODEL_FIELDS[] = {
    STR(rec_model, init),
    DIGEST(rec_model, config_sha, "config_sha256"),
    DIGEST(rec_model, weights_sha, "weights_sha256"),
};
static const rt_table MODEL = {"model.mp", sizeof(rec_model), MODEL_FIELDS, 3, RT_NO_M, RT_SEAL_REQUIRED, 0, NULL, NULL,
                               NULL, 0, 0, 0};

void *rec_model_encode(const rec_model *m, size_t *n) { return rt_encode(&MODEL, m, n); }
int rec_model_decode(const void *data, size_t n, const char *what, rec_model *m, tdm_err *e) {
    return rt_decode(&MODEL, data, n, what, m, e);
}

/* ------------------------------------------------------------------ data.mp */

/* "sha256": one array per domain of its splits' digests, as 32-byte binaries. */
static void put_data_sha(codec_writer *w, const void *rec) {
    const rec_data *d = rec;
    codec_array(w, (size_t)d->M);
    for (int m = 0; m < d->M; m++) {
        codec_array(w, REC_DATA_SPLITS);
        for (int s = 0; s < REC_DATA_SPLITS; s++) codec_bin(w, d->sha[m][s].b, sizeof d->sha[m][s].b);
    }
}
static int get_data_sha(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    rec_data *d = rec;
    if (o->type != MSGPACK_OBJECT_ARRAY || (int)o->via.array.size != d->M)
        return codec_field_error(r, key, "is not one entry per domain");
    for (int m = 0; m < d->M; m++) {
        const msgpack_object *a = &o->via.array.ptr[m];
        if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size != REC_DATA_SPLITS)
            return codec_field_error(r, key, "is not three digests per domain");
        for (int s = 0; s < REC_DATA_SPLITS; s++) {
            const msgpack_object *b = &a->via.array.ptr[s];
            if (b->type != MSGPACK_OBJECT_BIN || b->via.bin.size != sizeof d->sha[m][s].b)
                return codec_field_error(r, key, "holds a digest that is not 32 bytes");
            memcpy(d->sha[m][s].b, b->via.bin.ptr, sizeof d->sha[m][s].b);
        }
    }
    return 0;
}

static const rt_field DATA_FIELDS[] = {
    {"domains", RT_NAMES, offsetof(rec_data, domains), 0, 0, 0, RT_EARLY, 0, NULL, NULL, NULL},
    CUSTOM(rec_data, "sha256", 0, put_data_sha, get_data_sha),
};
static const rt_table DATA = {"data.mp", sizeof(rec_data), DATA_FIELDS, 2, offsetof(rec_data, M), RT_SEAL_REQUIRED, 0,
                              NULL, NULL, NULL, 0, 0, 0};

void *rec_data_encode(const rec_data *d, size_t *n) { return rt_encode(&DATA, d, n); }
int rec_data_decode(const void *data, size_t n, const char *what, rec_data *d, tdm_err *e) {
    return rt_decode(&DATA, data, n, what, d, e);
}

/* ------------------------------------------------------------------ diverged.mp */

static const char *const DIVERGED_STEPS[] = {"probe", "alpha", "free", NULL};

/* a step of the loop (not "done": a finished run takes no step), an index only in the
 * free phase, a state that stands no further than where the run diverged, a message */
static int check_diverged(const codec_map_reader *r, void *rec) {
    const rec_diverged *d = rec;
    int known = 0;
    for (const char *const *k = DIVERGED_STEPS; *k; k++) known |= strcmp(*k, d->step) == 0;
    if (!known) return codec_field_error(r, "step", "is not probe, alpha or free");
    if (d->index && strcmp(d->step, "free")) return codec_field_error(r, "index", "is not 0 outside the free phase");
    if (d->state_seq > d->seq) return codec_field_error(r, "state_seq", "is past the run position seq");
    if (!d->message[0]) return codec_field_error(r, "message", "is empty");
    /* printed by status, mixture and verify as it is: written without control characters
     * (util/err.c's messages; the host masked by ledger_diverged) */
    for (const char *p = d->message; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return codec_field_error(r, "message", "holds a control character");
    for (const char *p = d->host; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return codec_field_error(r, "host", "holds a control character");
    return 0;
}

static const rt_field DIVERGED_FIELDS[] = {
    U64(rec_diverged, epoch, 0, UINT64_MAX),
    U64(rec_diverged, seq, 0, UINT64_MAX / 2),
    U64(rec_diverged, episode, 0, UINT32_MAX),
    STR(rec_diverged, step),
    U64(rec_diverged, index, 0, UINT32_MAX),
    U64(rec_diverged, state_seq, 0, UINT64_MAX / 2),
    STR(rec_diverged, message),
    F64(rec_diverged, time, RT_FINITE),
    STR(rec_diverged, host),
    U64(rec_diverged, attempt, 0, UINT64_MAX),
};
static const rt_table DIVERGED = {"diverged.mp", sizeof(rec_diverged), DIVERGED_FIELDS, 10, RT_NO_M,
                                  RT_SEAL_REQUIRED, 0, NULL, check_diverged, NULL, 0, 0, 0};

void *rec_diverged_encode(const rec_diverged *d, size_t *n) { return rt_encode(&DIVERGED, d, n); }
int rec_diverged_decode(const void *data, size_t n, const char *what, rec_diverged *d, tdm_err *e) {
    return rt_decode(&DIVERGED, data, n, what, d, e);
}

/* ------------------------------------------------------------------ state manifests */

static const char *const STEP_NAMES[] = {"probe", "alpha", "free", "done", NULL};

static void put_cursors(codec_writer *w, const void *rec) {
    const rec_state *s = rec;
    codec_array(w, (size_t)s->M);
    for (int m = 0; m < s->M; m++) codec_u64s(w, s->cursors[m], 4);
}
static int get_cursors(const codec_map_reader *r, const msgpack_object *c, const char *key, void *rec) {
    rec_state *s = rec;
    if (c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size != (uint32_t)s->M)
        return codec_field_error(r, key, "is not an array of M cursors");
    for (int m = 0; m < s->M; m++) {
        const msgpack_object *row = &c->via.array.ptr[m];
        if (row->type != MSGPACK_OBJECT_ARRAY || row->via.array.size != 4)
            return codec_field_error(r, key, "holds a cursor that is not 4 integers");
        for (int k = 0; k < 4; k++)
            if (codec_obj_u64(&row->via.array.ptr[k], &s->cursors[m][k]))
                return codec_field_error(r, key, "holds a non-integer");
    }
    return 0;
}

static void put_views(codec_writer *w, const void *rec) {
    const rec_state *s = rec;
    codec_array(w, s->nviews);
    for (size_t i = 0; i < s->nviews; i++) {
        const rec_view *v = &s->views[i];
        codec_map(w, 4);
        codec_key(w, "name");
        codec_str(w, v->name);
        codec_key(w, "rows");
        codec_u64(w, v->rows);
        codec_key(w, "cols");
        codec_u64(w, v->cols);
        codec_key(w, "offset");
        codec_u64(w, v->offset);
    }
}

static void put_tensors(codec_writer *w, const void *rec) {
    const rec_state *s = rec;
    codec_array(w, s->ntensors);
    for (size_t i = 0; i < s->ntensors; i++) {
        const rec_tensor *t = &s->tensors[i];
        codec_map(w, 5);
        codec_key(w, "name");
        codec_str(w, t->name);
        codec_key(w, "dtype");
        codec_str(w, t->dtype);
        codec_key(w, "shape");
        codec_u64s(w, t->shape, (size_t)t->ndim);
        codec_key(w, "chunk_bytes");
        codec_u64(w, t->chunk_bytes);
        codec_key(w, "chunks");
        codec_array(w, t->nchunks);
        for (size_t c = 0; c < t->nchunks; c++) codec_bin(w, t->chunks[c].b, SHA256_LEN);
    }
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
        /* whole floats: the writer rounds to 4, and the device loads copy in floats (a
         * chunk of 6 bytes would land its floats in the wrong places, unnoticed) */
        if (!rc && out->chunk_bytes % 4 != 0) rc = codec_field_error(&t, "chunk_bytes", "is not a multiple of 4");
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

static int get_views(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o, (void)key;
    return decode_views(r, rec);
}
static int get_tensors(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec) {
    (void)o, (void)key;
    return decode_tensors(r, rec);
}

/* The state's own rules: a known step; the ep_* fields (what the episode's metrics row
 * needs mid-episode) all present or all absent, only in the free phase, counting the free
 * steps done. */
static int check_state(const codec_map_reader *r, void *rec) {
    rec_state *s = rec;
    int known = 0;
    for (const char *const *k = STEP_NAMES; *k; k++) known |= strcmp(*k, s->step) == 0;
    if (!known) return codec_field_error(r, "step", "is not probe, alpha, free or done");
    /* one record per episode's α step, at most: a state claiming more (2^32 - 1) had a
     * load walk that many keys */
    if (s->alpha_records > s->episode + 1)
        return codec_field_error(r, "alpha_records", "is more than one α record per episode done");
    static const char *const ep[] = {"ep_loss_u", "ep_loss_w", "ep_free_loss", "ep_grad", "ep_free_n"};
    int present = 0;
    for (int k = 0; k < 5; k++) present += codec_field(r, ep[k]) != NULL;
    s->has_episode = present == 5;
    if (present && present != 5)
        return codec_field_error(r, "ep_loss_u", "and the other ep_* fields must all be present or all absent");
    if (present && strcmp(s->step, "free")) return codec_field_error(r, "ep_loss_u", "is present outside the free phase");
    if (s->has_episode && s->ep_free_n != s->index)
        return codec_field_error(r, "ep_free_n", "is not the number of free steps the episode has done (index)");
    static const char *const val[] = {"val_n", "val_now", "val_ema", "val_var", "val_best", "val_best_seen", "overfit"};
    present = 0;
    for (int k = 0; k < 7; k++) present += codec_field(r, val[k]) != NULL;
    s->has_val = present == 7;
    if (present && present != 7)
        return codec_field_error(r, "val_n", "and the other fields of the overfitting record (val_now, val_ema, "
                                 "val_var, val_best, val_best_seen, overfit) must all be present or all absent");
    for (int m = 0; s->has_val && m < s->M; m++)
        if (s->overfit[m] != 0 && s->overfit[m] != 1)
            return codec_field_error(r, "overfit", "holds a value other than 0 or 1");
    return 0;
}
static void release_state(void *rec) { rec_state_free(rec); }

#define EP(f, type, fl) {#f, type, offsetof(rec_state, f), 0, 0, UINT32_MAX, RT_OPT | (fl), offsetof(rec_state, has_episode), NULL, NULL, NULL}
#define VAL(f, type, fl) {#f, type, offsetof(rec_state, f), 0, 0, UINT32_MAX, RT_OPT | (fl), offsetof(rec_state, has_val), NULL, NULL, NULL}
static const rt_field STATE_FIELDS[] = {
    U64(rec_state, seq, 0, UINT64_MAX / 2),
    U64(rec_state, episode, 0, UINT32_MAX),
    STR(rec_state, step),
    U64(rec_state, index, 0, UINT32_MAX),
    U64(rec_state, free_steps, 0, UINT64_MAX / 2),
    U64(rec_state, seed, 0, UINT64_MAX),
    DOMAINS(rec_state, alpha, RT_PROB),
    {"loss_u", RT_DOMAINS, offsetof(rec_state, loss_u), 0, 0, 0, RT_IF, offsetof(rec_state, have_losses),
     "have_losses", NULL, NULL},
    {"loss_w", RT_DOMAINS, offsetof(rec_state, loss_w), 0, 0, 0, RT_IF, offsetof(rec_state, have_losses),
     "have_losses", NULL, NULL},
    CUSTOM(rec_state, "cursors", 0, put_cursors, get_cursors),
    U64(rec_state, alpha_records, 0, UINT32_MAX),
    DIGEST(rec_state, alpha_head, "alpha_head"),
    CUSTOM(rec_state, "views", 0, put_views, get_views),
    CUSTOM(rec_state, "tensors", 0, put_tensors, get_tensors),
    {"have_losses", RT_BOOL, offsetof(rec_state, have_losses), 0, 0, 0, RT_EARLY, 0, NULL, NULL, NULL},
    {"M", RT_INT, offsetof(rec_state, M), 0, 1, REC_MAX_DOMAINS, RT_EARLY, 0, NULL, NULL, NULL},
    EP(ep_loss_u, RT_DOMAINS, 0),
    EP(ep_loss_w, RT_DOMAINS, 0),
    EP(ep_free_loss, RT_DOMAINS, 0),
    EP(ep_grad, RT_F64, RT_FINITE),
    EP(ep_free_n, RT_U64, 0),
    {"seen", RT_DOMAINS, offsetof(rec_state, seen), 0, 0, 0, RT_OPT | RT_NONNEG, offsetof(rec_state, has_seen), NULL,
     NULL, NULL},
    VAL(val_n, RT_U64, 0),
    VAL(val_now, RT_DOMAINS, RT_NONNEG),
    VAL(val_ema, RT_DOMAINS, RT_NONNEG),
    VAL(val_var, RT_DOMAINS, RT_NONNEG),
    VAL(val_best, RT_DOMAINS, RT_NONNEG),
    VAL(val_best_seen, RT_DOMAINS, RT_NONNEG),
    VAL(overfit, RT_DOMAINS, RT_NONNEG),
    {"run", RT_DIGEST, offsetof(rec_state, run), 0, 0, 0, RT_OPT, offsetof(rec_state, has_run), NULL, NULL, NULL},
    {"gen", RT_U64, offsetof(rec_state, gen), 0, 0, UINT32_MAX, RT_OPT, offsetof(rec_state, has_gen), NULL, NULL, NULL},
};
static const rt_table STATE = {"states/<seq>.mp", sizeof(rec_state), STATE_FIELDS, 31, offsetof(rec_state, M),
                               RT_SEAL_IF, offsetof(rec_state, has_gen), "gen", check_state, release_state, 0,
                               1, offsetof(rec_state, has_run)};

void *rec_state_encode(const rec_state *s, size_t *n) { return rt_encode(&STATE, s, n); }
/* A manifest read under its own key (states/<seq>.mp) must hold that run position: one
 * copied over another (a rollback of one object) would otherwise resume the run from
 * another position than the one its name promises, and fail its replay forever. */
int rec_state_decode(const void *data, size_t n, const char *what, rec_state *s, tdm_err *e) {
    int rc = rt_decode(&STATE, data, n, what, s, e);
    uint64_t named;
    if (rc == 0 && what && ledger_key_index(what, LEDGER_STATES, &named) == 0 && named != s->seq) {
        unsigned long long held = (unsigned long long)s->seq;
        rec_state_free(s);
        return err_set(e, ERR_STORE, "%s holds run position %llu, not the %llu its name says (another "
                       "state's manifest copied over it)", what, held, (unsigned long long)named);
    }
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
