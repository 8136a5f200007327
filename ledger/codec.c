/* codec.c — strict msgpack helpers; see codec.h. */
#include "ledger/codec.h"

#include <stdlib.h>
#include <string.h>

void codec_writer_init(codec_writer *w) {
    msgpack_sbuffer_init(&w->buf);
    msgpack_packer_init(&w->pk, &w->buf, msgpack_sbuffer_write);
}

void *codec_writer_take(codec_writer *w, size_t *n) {
    *n = w->buf.size;
    void *data = msgpack_sbuffer_release(&w->buf);
    return data ? data : calloc(1, 1);
}

void codec_writer_free(codec_writer *w) { msgpack_sbuffer_destroy(&w->buf); }

/* msgpack_sbuffer_write only fails when out of memory; records are small and a
 * half-written record is never stored (we hash and check what we write), so treat it as
 * fatal rather than threading an error through every field. */
static void check(int r) {
    if (r != 0) {
        fprintf(stderr, "tandem: out of memory while encoding a record\n");
        abort();
    }
}

void codec_map(codec_writer *w, size_t n) { check(msgpack_pack_map(&w->pk, n)); }
void codec_array(codec_writer *w, size_t n) { check(msgpack_pack_array(&w->pk, n)); }
void codec_key(codec_writer *w, const char *key) { codec_str(w, key); }
void codec_str(codec_writer *w, const char *s) {
    check(msgpack_pack_str_with_body(&w->pk, s, strlen(s)));
}
void codec_u64(codec_writer *w, uint64_t v) { check(msgpack_pack_uint64(&w->pk, v)); }
void codec_f64(codec_writer *w, double v) { check(msgpack_pack_double(&w->pk, v)); }
void codec_bool(codec_writer *w, int v) {
    check(v ? msgpack_pack_true(&w->pk) : msgpack_pack_false(&w->pk));
}
void codec_bin(codec_writer *w, const void *data, size_t n) {
    check(msgpack_pack_bin_with_body(&w->pk, data, n));
}
void codec_f64s(codec_writer *w, const double *v, size_t n) {
    codec_array(w, n);
    for (size_t i = 0; i < n; i++) codec_f64(w, v[i]);
}
void codec_u64s(codec_writer *w, const uint64_t *v, size_t n) {
    codec_array(w, n);
    for (size_t i = 0; i < n; i++) codec_u64(w, v[i]);
}

/* ------------------------------------------------------------------ pre-scan */

#define MAX_DEPTH 32

static uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* Elements in one record at most: 8M, or one per 8 bytes of a larger record. A state
 * manifest's are mostly chunk digests of 34 bytes each (a small checkpoint.chunk_kib on a
 * large model gives millions: the record stays well within the bound); the unpacker takes
 * ~24 bytes an element, so a sparse file of zero bytes — an element each — declaring 250M
 * of them took 6 GB in every command that read it. */
#define CODEC_MAX_ELEMS ((uint64_t)8 << 20)
static uint64_t codec_max_elems(size_t n) { return n / 8 > CODEC_MAX_ELEMS ? n / 8 : CODEC_MAX_ELEMS; }

/* Skips one object at p[*off..n), counting elements in *count. Returns 0, or -1 when
 * malformed, truncated, too deep, declaring more elements than bytes remain (each element
 * takes ≥ 1 byte) or more than codec_max_elems(n) in all. */
static int skip(const uint8_t *p, size_t n, size_t *off, int depth, uint64_t *count) {
    if (depth > MAX_DEPTH || *off >= n || ++*count > codec_max_elems(n)) return -1;
    uint8_t t = p[(*off)++];
    uint64_t len = 0, elems = 0;
    int hdr = 0;
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) return 0;
    if ((t & 0xe0) == 0xa0) len = t & 0x1f;                  /* fixstr */
    else if ((t & 0xf0) == 0x90) elems = t & 0x0f;           /* fixarray */
    else if ((t & 0xf0) == 0x80) elems = 2u * (t & 0x0f);    /* fixmap */
    else {
        switch (t) {
        case 0xcc: case 0xd0: len = 1; break;
        case 0xcd: case 0xd1: len = 2; break;
        case 0xca: case 0xce: case 0xd2: len = 4; break;
        case 0xcb: case 0xcf: case 0xd3: len = 8; break;
        case 0xd4: len = 2; break; /* fixext: type + data */
        case 0xd5: len = 3; break;
        case 0xd6: len = 5; break;
        case 0xd7: len = 9; break;
        case 0xd8: len = 17; break;
        case 0xc4: case 0xd9: hdr = 1; break;  /* bin8, str8 */
        case 0xc5: case 0xda: hdr = 2; break;  /* bin16, str16 */
        case 0xc6: case 0xdb: hdr = 4; break;  /* bin32, str32 */
        case 0xc7: hdr = 1; break;             /* ext8: len then type */
        case 0xc8: hdr = 2; break;
        case 0xc9: hdr = 4; break;
        case 0xdc: case 0xdd: case 0xde: case 0xdf: {
            int k = (t == 0xdc || t == 0xde) ? 2 : 4;
            if (n - *off < (size_t)k) return -1;
            elems = be(p + *off, k) * ((t == 0xde || t == 0xdf) ? 2 : 1);
            *off += (size_t)k;
            break;
        }
        default: return -1; /* 0xc1 is never used */
        }
        if (hdr) {
            if (n - *off < (size_t)hdr) return -1;
            len = be(p + *off, hdr) + ((t >= 0xc7 && t <= 0xc9) ? 1 : 0);
            *off += (size_t)hdr;
        }
    }
    if (len) {
        if (len > n - *off) return -1;
        *off += (size_t)len;
        return 0;
    }
    if (elems > n - *off || elems > codec_max_elems(n)) return -1;
    for (uint64_t i = 0; i < elems; i++)
        if (skip(p, n, off, depth + 1, count)) return -1;
    return 0;
}

int codec_parse(const void *data, size_t n, const char *what, codec_parsed *out, tdm_err *e) {
    out->root = NULL;
    msgpack_unpacked_init(&out->u);
    size_t off = 0;
    uint64_t count = 0;
    if (skip(data, n, &off, 0, &count) || off != n)
        return err_set(e, ERR_STORE,
                       "%s: not a valid msgpack record (truncated, corrupt, with trailing bytes or more than "
                       "%llu values; %zu bytes)",
                       what, (unsigned long long)codec_max_elems(n), n);
    size_t pos = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&out->u, data, n, &pos);
    if (r != MSGPACK_UNPACK_SUCCESS || pos != n) {
        msgpack_unpacked_destroy(&out->u);
        msgpack_unpacked_init(&out->u);
        return err_set(e, ERR_STORE, "%s: msgpack decoding failed (code %d)", what, (int)r);
    }
    out->root = &out->u.data;
    return 0;
}

void codec_parsed_free(codec_parsed *p) {
    msgpack_unpacked_destroy(&p->u);
    p->root = NULL;
}

/* ------------------------------------------------------------------ fields */

static int key_is(const msgpack_object *k, const char *s) {
    size_t n = strlen(s);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
           memcmp(k->via.str.ptr, s, n) == 0;
}

int codec_field_error(const codec_map_reader *r, const char *key, const char *problem) {
    return err_set(r->e, ERR_STORE, "%s: field '%s' %s", r->what, key, problem);
}

int codec_open_map(codec_map_reader *r, const msgpack_object *o, const char *what,
                   const char *const *allowed, tdm_err *e) {
    r->map = o;
    r->what = what;
    r->e = e;
    if (o->type != MSGPACK_OBJECT_MAP) return err_set(e, ERR_STORE, "%s: expected a map", what);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *k = &o->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return err_set(e, ERR_STORE, "%s: a map key is not a string", what);
        int known = !allowed;
        for (const char *const *a = allowed; a && *a; a++)
            if (key_is(k, *a)) known = 1;
        if (!known)
            return err_set(e, ERR_STORE, "%s: unknown field '%.*s'", what,
                           (int)(k->via.str.size > 64 ? 64 : k->via.str.size), k->via.str.ptr);
        for (uint32_t j = 0; j < i; j++) {
            const msgpack_object *k2 = &o->via.map.ptr[j].key;
            if (k2->via.str.size == k->via.str.size &&
                memcmp(k2->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0)
                return err_set(e, ERR_STORE, "%s: field '%.*s' appears twice", what,
                               (int)(k->via.str.size > 64 ? 64 : k->via.str.size),
                               k->via.str.ptr);
        }
    }
    return 0;
}

const msgpack_object *codec_field(const codec_map_reader *r, const char *key) {
    for (uint32_t i = 0; i < r->map->via.map.size; i++)
        if (key_is(&r->map->via.map.ptr[i].key, key)) return &r->map->via.map.ptr[i].val;
    return NULL;
}

static const msgpack_object *required(const codec_map_reader *r, const char *key) {
    const msgpack_object *o = codec_field(r, key);
    if (!o) codec_field_error(r, key, "is missing");
    return o;
}

int codec_obj_u64(const msgpack_object *o, uint64_t *out) {
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return -1;
    *out = o->via.u64;
    return 0;
}

int codec_obj_f64(const msgpack_object *o, double *out) {
    if (o->type != MSGPACK_OBJECT_FLOAT64 && o->type != MSGPACK_OBJECT_FLOAT32) return -1;
    *out = o->via.f64;
    return 0;
}

int codec_get_u64(const codec_map_reader *r, const char *key, uint64_t min, uint64_t max,
                  uint64_t *out) {
    const msgpack_object *o = required(r, key);
    if (!o) return ERR_STORE;
    uint64_t v;
    if (codec_obj_u64(o, &v)) return codec_field_error(r, key, "is not a non-negative integer");
    if (v < min || v > max) {
        char msg[128];
        snprintf(msg, sizeof msg, "= %llu is outside %llu..%llu", (unsigned long long)v,
                 (unsigned long long)min, (unsigned long long)max);
        return codec_field_error(r, key, msg);
    }
    *out = v;
    return 0;
}

int codec_get_f64(const codec_map_reader *r, const char *key, double *out) {
    const msgpack_object *o = required(r, key);
    if (!o) return ERR_STORE;
    if (codec_obj_f64(o, out)) return codec_field_error(r, key, "is not a float");
    return 0;
}

int codec_get_bool(const codec_map_reader *r, const char *key, int *out) {
    const msgpack_object *o = required(r, key);
    if (!o) return ERR_STORE;
    if (o->type != MSGPACK_OBJECT_BOOLEAN) return codec_field_error(r, key, "is not a boolean");
    *out = o->via.boolean;
    return 0;
}

int codec_get_str(const codec_map_reader *r, const char *key, char *out, size_t cap) {
    const msgpack_object *o = required(r, key);
    if (!o) return ERR_STORE;
    if (o->type != MSGPACK_OBJECT_STR) return codec_field_error(r, key, "is not a string");
    size_t n = o->via.str.size;
    if (n >= cap) return codec_field_error(r, key, "is too long");
    if (memchr(o->via.str.ptr, '\0', n)) return codec_field_error(r, key, "contains a NUL byte");
    memcpy(out, o->via.str.ptr, n);
    out[n] = '\0';
    return 0;
}

int codec_get_digest(const codec_map_reader *r, const char *key, sha256_digest *out) {
    const msgpack_object *o = required(r, key);
    if (!o) return ERR_STORE;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != SHA256_LEN)
        return codec_field_error(r, key, "is not a 32-byte SHA-256");
    memcpy(out->b, o->via.bin.ptr, SHA256_LEN);
    return 0;
}

/* The array at `key` for codec_get_f64s/u64s: exactly cap items (got == NULL) or at most
 * cap (then *got = its length). NULL with the field error in *rc otherwise. */
static const msgpack_object *array_of(const codec_map_reader *r, const char *key, size_t cap,
                                      size_t *got, int *rc) {
    const msgpack_object *o = required(r, key);
    *rc = ERR_STORE;
    if (!o) return NULL;
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        *rc = codec_field_error(r, key, "is not an array");
        return NULL;
    }
    size_t n = o->via.array.size;
    if (got ? n > cap : n != cap) {
        *rc = codec_field_error(r, key, "has the wrong length");
        return NULL;
    }
    if (got) *got = n;
    *rc = 0;
    return o;
}

int codec_get_f64s(const codec_map_reader *r, const char *key, double *out, size_t cap,
                   size_t *got) {
    int rc;
    const msgpack_object *o = array_of(r, key, cap, got, &rc);
    for (size_t i = 0; o && i < o->via.array.size; i++)
        if (codec_obj_f64(&o->via.array.ptr[i], &out[i]))
            return codec_field_error(r, key, "holds a non-float");
    return rc;
}

int codec_get_u64s(const codec_map_reader *r, const char *key, uint64_t *out, size_t cap,
                   size_t *got) {
    int rc;
    const msgpack_object *o = array_of(r, key, cap, got, &rc);
    for (size_t i = 0; o && i < o->via.array.size; i++)
        if (codec_obj_u64(&o->via.array.ptr[i], &out[i]))
            return codec_field_error(r, key, "holds a non-integer");
    return rc;
}

/* The self-digest, always a record's last field: "self" → the SHA-256 of every byte
 * before its 32-byte value (map header, fields, the key and the bin header included), so
 * a record damaged anywhere no longer matches it. */
void codec_put_self(codec_writer *w) {
    static const uint8_t zero[SHA256_LEN];
    codec_key(w, "self");
    codec_bin(w, zero, SHA256_LEN);
    sha256_digest d;
    sha256(w->buf.data, w->buf.size - SHA256_LEN, &d);
    memcpy((uint8_t *)w->buf.data + w->buf.size - SHA256_LEN, d.b, SHA256_LEN);
}

/* Checks the self-digest when the record has one (*has = 1): it must be the record's
 * last 32 bytes and the SHA-256 of everything before them. ERR_STORE "corrupt" when not. */
int codec_check_self(const void *data, size_t n, const codec_map_reader *r, int *has) {
    const msgpack_object *f = codec_field(r, "self");
    *has = f != NULL;
    if (!f) return 0;
    if (f->type != MSGPACK_OBJECT_BIN || f->via.bin.size != SHA256_LEN || n < SHA256_LEN ||
        memcmp((const uint8_t *)data + n - SHA256_LEN, f->via.bin.ptr, SHA256_LEN) != 0)
        return codec_field_error(r, "self", "is not the record's last 32 bytes (corrupt)");
    sha256_digest d;
    sha256(data, n - SHA256_LEN, &d);
    if (memcmp(d.b, f->via.bin.ptr, SHA256_LEN) != 0)
        return err_set(r->e, ERR_STORE, "%s: corrupt: its content does not match its own SHA-256",
                       r->what);
    return 0;
}
