/* thrift.c — Thrift's compact protocol, read with every bound checked; see thrift.h. */
#include "data/thrift.h"

static void bad(thrift_rd *r, const char *why) {
    if (!r->bad) r->bad = why;
    r->p = r->end; /* nothing more is read */
}

void thrift_init(thrift_rd *r, const void *data, size_t n) {
    r->p = data;
    r->end = r->p + n;
    r->depth = 0;
    r->bad = NULL;
}

static uint64_t varint(thrift_rd *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return bad(r, "truncated"), 0;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    bad(r, "a varint longer than 10 bytes");
    return 0;
}

static int64_t zigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

int thrift_enter(thrift_rd *r) {
    if (++r->depth > THRIFT_MAX_DEPTH) return bad(r, "nested too deep"), -1;
    return 0;
}

void thrift_leave(thrift_rd *r) { r->depth--; }

int thrift_field(thrift_rd *r, int16_t *last, int16_t *id) {
    if (r->bad) return THRIFT_STOP;
    if (r->p >= r->end) return bad(r, "truncated"), THRIFT_STOP;
    uint8_t b = *r->p++;
    int type = b & 0x0f, delta = b >> 4;
    if (type == THRIFT_STOP) return THRIFT_STOP;
    if (type > THRIFT_STRUCT) return bad(r, "an unknown field type"), THRIFT_STOP;
    if (delta) *id = (int16_t)(*last + delta);
    else *id = (int16_t)zigzag(varint(r));
    *last = *id;
    return r->bad ? THRIFT_STOP : type;
}

int64_t thrift_int(thrift_rd *r, int type) {
    if (type == THRIFT_TRUE) return 1;
    if (type == THRIFT_FALSE) return 0;
    if (type == THRIFT_BYTE) {
        if (r->p >= r->end) return bad(r, "truncated"), 0;
        return (int8_t)*r->p++;
    }
    if (type != THRIFT_I16 && type != THRIFT_I32 && type != THRIFT_I64) return bad(r, "not an integer"), 0;
    return zigzag(varint(r));
}

const uint8_t *thrift_binary(thrift_rd *r, size_t *n) {
    uint64_t len = varint(r);
    if (r->bad) return NULL;
    if (len > (uint64_t)(r->end - r->p)) return bad(r, "a string longer than the bytes left"), NULL;
    const uint8_t *s = r->p;
    r->p += len;
    *n = (size_t)len;
    return s;
}

int thrift_list(thrift_rd *r, int *elem_type, size_t *count) {
    if (r->p >= r->end) return bad(r, "truncated"), -1;
    uint8_t b = *r->p++;
    uint64_t n = b >> 4;
    if (n == 15) n = varint(r);
    *elem_type = b & 0x0f;
    if (r->bad) return -1;
    if (n > (uint64_t)(r->end - r->p)) return bad(r, "a list longer than the bytes left"), -1;
    *count = (size_t)n;
    return 0;
}

/* One element of a list, set or map: a bool there is a byte of its own (in a struct it
 * lives in the field header), so that every element consumes input. */
static void skip_element(thrift_rd *r, int type) {
    if (type == THRIFT_TRUE || type == THRIFT_FALSE) {
        if (r->p >= r->end) bad(r, "truncated");
        else r->p++;
    } else {
        thrift_skip(r, type);
    }
}

void thrift_skip(thrift_rd *r, int type) {
    if (r->bad) return;
    size_t n = 0;
    int et = 0;
    switch (type) {
    case THRIFT_TRUE:
    case THRIFT_FALSE: return;
    case THRIFT_BYTE:
        if (r->p >= r->end) bad(r, "truncated");
        else r->p++;
        return;
    case THRIFT_I16:
    case THRIFT_I32:
    case THRIFT_I64: varint(r); return;
    case THRIFT_DOUBLE:
        if (r->end - r->p < 8) bad(r, "truncated");
        else r->p += 8;
        return;
    case THRIFT_BINARY: thrift_binary(r, &n); return;
    case THRIFT_LIST:
    case THRIFT_SET:
        if (thrift_list(r, &et, &n) || thrift_enter(r)) return;
        for (size_t i = 0; i < n && !r->bad; i++) skip_element(r, et);
        thrift_leave(r);
        return;
    case THRIFT_MAP: {
        uint64_t m = varint(r);
        if (r->bad || m == 0) return;
        if (r->p >= r->end) return bad(r, "truncated");
        uint8_t kv = *r->p++;
        if (m > (uint64_t)(r->end - r->p)) return bad(r, "a map longer than the bytes left");
        if (thrift_enter(r)) return;
        for (uint64_t i = 0; i < m && !r->bad; i++) {
            skip_element(r, kv >> 4);
            skip_element(r, kv & 0x0f);
        }
        thrift_leave(r);
        return;
    }
    case THRIFT_STRUCT: {
        if (thrift_enter(r)) return;
        int16_t last = 0, id = 0;
        int t;
        while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) thrift_skip(r, t);
        thrift_leave(r);
        return;
    }
    default: bad(r, "an unknown type");
    }
}
