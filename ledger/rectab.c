/* rectab.c — one encoder and one strict decoder for every record kind's table; see
 * rectab.h. */
#include "ledger/rectab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(rec, off) ((char *)(rec) + (off))
#define AT_C(rec, off) ((const char *)(rec) + (off))

/* ------------------------------------------------------------------ encoding */

static int present(const rt_field *f, const void *rec) {
    return !(f->flags & (RT_OPT | RT_IF)) || *(const int *)AT_C(rec, f->has) != 0;
}

static int sealed(const rt_table *t, const void *rec) {
    return t->seal == RT_SEAL_ALWAYS || t->seal == RT_SEAL_REQUIRED ||
           (t->seal == RT_SEAL_IF && *(const int *)AT_C(rec, t->seal_if) != 0);
}

static void put_value(codec_writer *w, const rt_field *f, const void *rec, int M) {
    const char *p = AT_C(rec, f->off);
    switch (f->type) {
    case RT_U64: codec_u64(w, *(const uint64_t *)p); break;
    case RT_INT: codec_u64(w, (uint64_t) * (const int *)p); break;
    case RT_F64: codec_f64(w, *(const double *)p); break;
    case RT_BOOL: codec_bool(w, *(const int *)p); break;
    case RT_STR: codec_str(w, p); break;
    case RT_DIGEST: codec_bin(w, ((const sha256_digest *)p)->b, SHA256_LEN); break;
    case RT_DOMAINS: codec_f64s(w, (const double *)p, (size_t)M); break;
    case RT_NAMES:
        codec_array(w, (size_t)M);
        for (int m = 0; m < M; m++) codec_str(w, p + (size_t)m * REC_DOMAIN_MAX);
        break;
    case RT_CUSTOM: f->put(w, rec); break;
    }
}

/* "format" and the present fields (all, or the hash's: no RT_META) in table order. */
static void put_fields(codec_writer *w, const rt_table *t, const void *rec, int body, size_t extra) {
    size_t n = 1 + extra;
    for (int i = 0; i < t->n; i++)
        n += present(&t->fields[i], rec) && !(body && (t->fields[i].flags & RT_META));
    codec_map(w, n);
    codec_key(w, "format");
    int v2 = t->format_run && *(const int *)AT_C(rec, t->format_run_if) != 0;
    codec_u64(w, v2 ? REC_FORMAT_RUN : REC_FORMAT);
    int M = t->M == RT_NO_M ? 0 : *(const int *)AT_C(rec, t->M);
    for (int i = 0; i < t->n; i++) {
        const rt_field *f = &t->fields[i];
        if (!present(f, rec) || (body && (f->flags & RT_META))) continue;
        codec_key(w, f->name);
        put_value(w, f, rec, M);
    }
}

void rt_put_body(codec_writer *w, const rt_table *t, const void *rec) { put_fields(w, t, rec, 1, 0); }

void *rt_encode(const rt_table *t, const void *rec, size_t *n) {
    codec_writer w;
    codec_writer_init(&w);
    int seal = sealed(t, rec);
    put_fields(&w, t, rec, 0, seal ? 1 : 0);
    if (seal) codec_put_self(&w);
    void *data = codec_writer_take(&w, n);
    codec_writer_free(&w);
    return data;
}

/* ------------------------------------------------------------------ decoding */

/* A domain-indexed array into out: one value per domain (the first one read fixes *M when
 * it is 0), finite unless RT_LOOSE; RT_PROB in [0, 1]; RT_NONNEG >= 0. */
static int get_domains(const codec_map_reader *r, const rt_field *f, double *out, int *M) {
    size_t got = 0;
    int rc = codec_get_f64s(r, f->name, out, REC_MAX_DOMAINS, &got);
    if (rc) return rc;
    if (f->flags & RT_LOOSE) {
        if (got < 1 || (*M && (int)got != *M)) return codec_field_error(r, f->name, "is not one value per domain");
        *M = (int)got;
        return 0;
    }
    if (got < 1) return codec_field_error(r, f->name, "is empty");
    if (*M == 0) *M = (int)got;
    else if ((int)got != *M) return codec_field_error(r, f->name, "has a different domain count");
    for (size_t i = 0; i < got; i++)
        if (!isfinite(out[i])) return codec_field_error(r, f->name, "holds NaN or Inf");
    for (size_t i = 0; (f->flags & RT_PROB) && i < got; i++)
        if (out[i] < 0 || out[i] > 1) return codec_field_error(r, f->name, "is not in [0, 1]");
    for (size_t i = 0; (f->flags & RT_NONNEG) && i < got; i++)
        if (out[i] < 0) return codec_field_error(r, f->name, "holds a negative count");
    return 0;
}

/* An array of 1..REC_MAX_DOMAINS names of [A-Za-z0-9_.-] (the dataset's rules). */
static int get_names(const codec_map_reader *r, const msgpack_object *o, const char *key, char *names, int *M) {
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 || o->via.array.size > REC_MAX_DOMAINS ||
        (*M && (int)o->via.array.size != *M))
        return codec_field_error(r, key, "is not one name per domain");
    *M = (int)o->via.array.size;
    for (int m = 0; m < *M; m++) {
        const msgpack_object *s = &o->via.array.ptr[m];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size == 0 || s->via.str.size >= REC_DOMAIN_MAX)
            return codec_field_error(r, key, "holds a bad name");
        for (uint32_t i = 0; i < s->via.str.size; i++) {
            char c = s->via.str.ptr[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-'))
                return codec_field_error(r, key, "holds a bad name");
        }
        memcpy(names + (size_t)m * REC_DOMAIN_MAX, s->via.str.ptr, s->via.str.size);
        names[(size_t)m * REC_DOMAIN_MAX + s->via.str.size] = '\0';
        /* one name per domain: a name twice would leave another domain without its weight
         * where a reader matches weights to its dataset by name (data.mixture_file) */
        for (int k = 0; k < m; k++)
            if (!strcmp(names + (size_t)k * REC_DOMAIN_MAX, names + (size_t)m * REC_DOMAIN_MAX))
                return codec_field_error(r, key, "names a domain twice");
    }
    return 0;
}

static int get_field(const codec_map_reader *r, const rt_table *t, const rt_field *f, void *rec) {
    const msgpack_object *o = codec_field(r, f->name);
    int *has = (f->flags & (RT_OPT | RT_IF)) ? (int *)AT(rec, f->has) : NULL;
    if (f->flags & RT_IF) {
        if (!*has && o) {
            char why[160];
            snprintf(why, sizeof why, "is present although %s is false", f->cond ? f->cond : "its flag");
            return codec_field_error(r, f->name, why);
        }
        if (!*has) return 0;
    }
    if (!o) return has && !(f->flags & RT_IF) ? 0 : codec_field_error(r, f->name, "is missing");
    if ((f->flags & RT_OPT) && !*has) *has = 1;
    char *p = AT(rec, f->off);
    int none = 0, *M = t->M == RT_NO_M ? &none : (int *)AT(rec, t->M);
    uint64_t v = 0;
    int rc = 0;
    switch (f->type) {
    case RT_U64: return codec_get_u64(r, f->name, f->min, f->max, (uint64_t *)p);
    case RT_INT:
        rc = codec_get_u64(r, f->name, f->min, f->max, &v);
        if (!rc) *(int *)p = (int)v;
        return rc;
    case RT_F64:
        rc = codec_get_f64(r, f->name, (double *)p);
        if (!rc && (f->flags & RT_FINITE) && !isfinite(*(double *)p)) rc = codec_field_error(r, f->name, "is NaN or Inf");
        return rc;
    case RT_BOOL: return codec_get_bool(r, f->name, (int *)p);
    case RT_STR: return codec_get_str(r, f->name, p, f->size);
    case RT_DIGEST: return codec_get_digest(r, f->name, (sha256_digest *)p);
    case RT_DOMAINS: return get_domains(r, f, (double *)p, M);
    case RT_NAMES: return get_names(r, o, f->name, p, M);
    case RT_CUSTOM: return f->get(r, o, f->name, rec);
    }
    return err_set(r->e, ERR_INTERNAL, "%s: field %s of an unknown type", r->what, f->name);
}

unsigned long long rec_format_newer(const void *data, size_t n) {
    codec_parsed p;
    tdm_err e;
    if (codec_parse(data, n, "record", &p, &e)) return 0;
    unsigned long long newer = 0;
    if (p.root->type == MSGPACK_OBJECT_MAP) {
        codec_map_reader r = {.map = p.root, .what = "record", .e = &e};
        const msgpack_object *fmt = codec_field(&r, "format");
        uint64_t v = 0;
        if (fmt && !codec_obj_u64(fmt, &v) && v > REC_FORMAT_MAX) newer = (unsigned long long)v;
    }
    codec_parsed_free(&p);
    return newer;
}

int rt_decode(const rt_table *t, const void *data, size_t n, const char *what, void *rec, tdm_err *e) {
    memset(rec, 0, t->size);
    codec_parsed p;
    int rc = codec_parse(data, n, what, &p, e);
    if (rc) return rc;
    codec_map_reader r = {.map = p.root, .what = what, .e = e};
    /* the version first, so that a record of a newer tandem says so rather than naming a
     * field this one does not know */
    const msgpack_object *fmt = p.root->type == MSGPACK_OBJECT_MAP ? codec_field(&r, "format") : NULL;
    uint64_t v = 0;
    if (p.root->type != MSGPACK_OBJECT_MAP)
        rc = err_set(e, ERR_STORE, "%s: not a tandem record (expected a map)", what);
    else if (!fmt || codec_obj_u64(fmt, &v))
        rc = err_set(e, ERR_STORE, "%s: not a tandem record (no 'format' field)", what);
    else if (v < REC_FORMAT || v > REC_FORMAT_MAX || (v == REC_FORMAT_RUN && !t->format_run))
        rc = err_set(e, ERR_STORE,
                     "%s: format version %llu is not supported by this tandem (it reads versions %d to %d); use a "
                     "newer tandem",
                     what, (unsigned long long)v, REC_FORMAT, REC_FORMAT_MAX);
    const char *keys[RT_MAX_FIELDS + 3];
    int nk = 0;
    keys[nk++] = "format";
    for (int i = 0; i < t->n && nk < RT_MAX_FIELDS + 1; i++) keys[nk++] = t->fields[i].name;
    if (t->seal != RT_SEAL_NONE) keys[nk++] = "self";
    keys[nk] = NULL;
    if (!rc) rc = codec_open_map(&r, p.root, what, t->open ? NULL : keys, e);
    int has_self = 0;
    if (!rc && t->seal != RT_SEAL_NONE) rc = codec_check_self(data, n, &r, &has_self);
    if (!rc && t->seal == RT_SEAL_REQUIRED && !has_self) rc = codec_field_error(&r, "self", "is missing");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; !rc && i < t->n; i++)
            if ((t->fields[i].flags & RT_EARLY) ? pass == 0 : pass == 1) rc = get_field(&r, t, &t->fields[i], rec);
    if (!rc && t->seal == RT_SEAL_IF && (*(int *)AT(rec, t->seal_if) != 0) != has_self)
        rc = codec_field_error(&r, t->seal_field, "and 'self' must both be present or both absent");
    if (!rc && t->check) rc = t->check(&r, rec);
    codec_parsed_free(&p);
    if (rc && t->release) t->release(rec);
    return rc;
}
