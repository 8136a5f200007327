/* parquet.c — the text column of a Parquet file; see parquet.h. The format's structures
 * are read field by field from their Thrift ids (parquet-format's parquet.thrift):
 * FileMetaData, SchemaElement, RowGroup, ColumnChunk, ColumnMetaData, PageHeader and its
 * three page headers. */
#include "data/parquet.h"

#include <snappy-c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "data/thrift.h"

enum { T_BYTE_ARRAY = 6 };                                     /* parquet Type */
enum { R_REQUIRED = 0, R_OPTIONAL = 1, R_REPEATED = 2 };       /* FieldRepetitionType */
enum { C_NONE = 0, C_SNAPPY = 1, C_GZIP = 2, C_ZSTD = 6 };     /* CompressionCodec */
enum { E_PLAIN = 0, E_PLAIN_DICT = 2, E_RLE = 3, E_BIT_PACKED = 4, E_DELTA_BINARY = 5, E_DELTA_LENGTH = 6,
       E_DELTA_BYTE_ARRAY = 7, E_RLE_DICT = 8 }; /* Encoding */
enum { P_DATA = 0, P_DICT = 2, P_DATA_V2 = 3 };                /* PageType */

static const char *const TYPE_NAMES[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                         "FIXED_LEN_BYTE_ARRAY"};
static const char *const CODEC_NAMES[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
static const char *const ENC_NAMES[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                        "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};

/* ------------------------------------------------------------------ the footer */

typedef struct pq_schema {
    const uint8_t *name;
    size_t name_len;
    int type, repetition, children;
} pq_schema;

typedef struct pq_chunk {
    int type, codec;
    int64_t num_values, data_off, dict_off, size;
    int has_dict;
    int elsewhere; /* kept in another file (file_path) or encrypted (crypto_metadata) */
} pq_chunk;

typedef struct pq_group {
    int64_t rows;
    pq_chunk *chunks;
    size_t nchunks;
} pq_group;

typedef struct pq_meta {
    pq_schema *schema;
    size_t nschema;
    pq_group *groups;
    size_t ngroups;
} pq_meta;

static void meta_free(pq_meta *m) {
    for (size_t i = 0; i < m->ngroups; i++) free(m->groups[i].chunks);
    free(m->groups);
    free(m->schema);
}

/* One SchemaElement. */
static void read_schema(thrift_rd *r, pq_schema *s) {
    int16_t last = 0, id = 0;
    int t;
    s->type = -1, s->repetition = R_REQUIRED;
    if (thrift_enter(r)) return;
    while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) {
        if (id == 1 && t == THRIFT_I32) s->type = (int)thrift_int(r, t);
        else if (id == 3 && t == THRIFT_I32) s->repetition = (int)thrift_int(r, t);
        else if (id == 4 && t == THRIFT_BINARY) s->name = thrift_binary(r, &s->name_len);
        else if (id == 5 && t == THRIFT_I32) s->children = (int)thrift_int(r, t);
        else thrift_skip(r, t);
    }
    thrift_leave(r);
}

/* ColumnMetaData. */
static void read_column_meta(thrift_rd *r, pq_chunk *c) {
    int16_t last = 0, id = 0;
    int t;
    if (thrift_enter(r)) return;
    while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) {
        if (id == 1 && t == THRIFT_I32) c->type = (int)thrift_int(r, t);
        else if (id == 4 && t == THRIFT_I32) c->codec = (int)thrift_int(r, t);
        else if (id == 5 && t == THRIFT_I64) c->num_values = thrift_int(r, t);
        else if (id == 7 && t == THRIFT_I64) c->size = thrift_int(r, t);
        else if (id == 9 && t == THRIFT_I64) c->data_off = thrift_int(r, t);
        else if (id == 11 && t == THRIFT_I64) c->dict_off = thrift_int(r, t), c->has_dict = 1;
        else thrift_skip(r, t);
    }
    thrift_leave(r);
}

/* ColumnChunk: its meta_data (field 3); one kept in another file (file_path) or encrypted
 * (crypto_metadata, field 8) is marked `elsewhere`, whichever order the fields come in. */
static void read_chunk(thrift_rd *r, pq_chunk *c) {
    int16_t last = 0, id = 0;
    int t;
    c->type = -1;
    if (thrift_enter(r)) return;
    while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) {
        if (id == 3 && t == THRIFT_STRUCT) read_column_meta(r, c);
        else if ((id == 1 && t == THRIFT_BINARY) || (id == 8 && t == THRIFT_STRUCT)) thrift_skip(r, t), c->elsewhere = 1;
        else thrift_skip(r, t);
    }
    thrift_leave(r);
}

/* A list of structs, each read by `one` into an array of `size`-byte items. */
static void *read_struct_list(thrift_rd *r, size_t size, size_t *n, void (*one)(thrift_rd *, void *)) {
    int et;
    size_t count;
    if (thrift_list(r, &et, &count)) return NULL;
    if (et != THRIFT_STRUCT) {
        if (!r->bad) r->bad = "a list of something else than structs";
        return NULL;
    }
    char *items = calloc(count ? count : 1, size);
    if (!items) {
        r->bad = "out of memory";
        return NULL;
    }
    for (size_t i = 0; i < count && !r->bad; i++) one(r, items + i * size);
    *n = count;
    return items;
}

static void one_schema(thrift_rd *r, void *p) { read_schema(r, p); }
static void one_chunk(thrift_rd *r, void *p) { read_chunk(r, p); }

/* RowGroup: its columns (field 1) and num_rows (field 3). */
static void one_group(thrift_rd *r, void *p) {
    pq_group *g = p;
    int16_t last = 0, id = 0;
    int t;
    if (thrift_enter(r)) return;
    while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) {
        if (id == 1 && t == THRIFT_LIST) {
            free(g->chunks);
            g->chunks = read_struct_list(r, sizeof *g->chunks, &g->nchunks, one_chunk);
        } else if (id == 3 && t == THRIFT_I64) {
            g->rows = thrift_int(r, t);
        } else {
            thrift_skip(r, t);
        }
    }
    thrift_leave(r);
}

/* FileMetaData: the schema (field 2) and the row groups (field 4). */
static const char *read_meta(const uint8_t *p, size_t n, pq_meta *m) {
    thrift_rd r;
    thrift_init(&r, p, n);
    int16_t last = 0, id = 0;
    int t;
    while ((t = thrift_field(&r, &last, &id)) != THRIFT_STOP) {
        if (id == 2 && t == THRIFT_LIST && !m->schema)
            m->schema = read_struct_list(&r, sizeof *m->schema, &m->nschema, one_schema);
        else if (id == 4 && t == THRIFT_LIST && !m->groups)
            m->groups = read_struct_list(&r, sizeof *m->groups, &m->ngroups, one_group);
        else
            thrift_skip(&r, t);
    }
    if (r.bad) return r.bad;
    if (!m->schema || m->nschema < 2) return "no schema (or one without columns)";
    return NULL;
}

/* The leaf index of the top-level column `name` (its ColumnChunk in every row group) and
 * its schema element; PARQUET_NO_COLUMN / PARQUET_UNSUPPORTED with why naming the columns
 * there are. */
static int find_column(const pq_meta *m, const char *name, size_t *leaf, const pq_schema **el, char *why, size_t cap) {
    /* the names for the message: each cut at 48 bytes, the list at what fits in the message
     * (pwhy is 256 bytes), a cut said as such */
    char names[160] = "";
    size_t at = 0, idx = 1, leaves = 0, nl = strlen(name), more = 0;
    int top = m->schema[0].children;
    for (int c = 0; c < top && idx < m->nschema; c++) {
        const pq_schema *s = &m->schema[idx];
        if (!more && at + 2 + 48 + 3 < sizeof names)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%.*s%s", c ? ", " : "",
                                   (int)(s->name_len <= 48 ? s->name_len : 45),
                                   s->name ? (const char *)s->name : "?", s->name_len > 48 ? "..." : "");
        else
            more++;
        int match = s->name && s->name_len == nl && !memcmp(s->name, name, nl);
        /* the subtree: a group's descendants, counted by their num_children */
        size_t span = 1, sub_leaves = 0;
        for (size_t pending = (size_t)(s->children > 0 ? s->children : 0); pending && idx + span < m->nschema; span++) {
            pending--;
            const pq_schema *d = &m->schema[idx + span];
            if (d->children > 0) pending += (size_t)d->children;
            else sub_leaves++;
        }
        if (s->children <= 0) sub_leaves = 1;
        if (match) {
            if (s->children > 0 || s->repetition == R_REPEATED) {
                snprintf(why, cap, "column \"%s\" is %s: only a top-level string column is read", name,
                         s->children > 0 ? "a group (nested)" : "repeated (a list)");
                return PARQUET_UNSUPPORTED;
            }
            if (s->type != T_BYTE_ARRAY) {
                if (s->type >= 0 && s->type < 8)
                    snprintf(why, cap, "column \"%s\" is not a string column (%s)", name, TYPE_NAMES[s->type]);
                else
                    snprintf(why, cap, "column \"%s\" is not a string column (physical type %d)", name, s->type);
                return PARQUET_NO_COLUMN;
            }
            *leaf = leaves;
            *el = s;
            return 0;
        }
        leaves += sub_leaves;
        idx += span;
    }
    char tail[40] = "";
    if (more) snprintf(tail, sizeof tail, " and %zu more", more);
    snprintf(why, cap, "no column \"%.64s%s\" (the columns are: %s%s); --text-field [NAME=]FIELD picks it", name,
             nl > 64 ? "..." : "", names, tail);
    return PARQUET_NO_COLUMN;
}

/* ------------------------------------------------------------------ pages */

typedef struct pq_page {
    int type, usize, csize;
    int num_values, encoding, def_len, rep_len, compressed;
    int has_v1, has_v2, has_dict;
} pq_page;

static void read_page_header(thrift_rd *r, pq_page *h) {
    int16_t last = 0, id = 0;
    int t;
    h->type = -1, h->compressed = 1;
    while ((t = thrift_field(r, &last, &id)) != THRIFT_STOP) {
        if (id == 1 && t == THRIFT_I32) h->type = (int)thrift_int(r, t);
        else if (id == 2 && t == THRIFT_I32) h->usize = (int)thrift_int(r, t);
        else if (id == 3 && t == THRIFT_I32) h->csize = (int)thrift_int(r, t);
        else if ((id == 5 || id == 7 || id == 8) && t == THRIFT_STRUCT) {
            /* DataPageHeader (5), DictionaryPageHeader (7), DataPageHeaderV2 (8) */
            int16_t l2 = 0, f = 0;
            int t2;
            if (thrift_enter(r)) return;
            h->has_v1 |= id == 5, h->has_dict |= id == 7, h->has_v2 |= id == 8;
            while ((t2 = thrift_field(r, &l2, &f)) != THRIFT_STOP) {
                int isint = t2 == THRIFT_I32;
                if (f == 1 && isint) h->num_values = (int)thrift_int(r, t2);
                else if (f == 2 && isint && id != 8) h->encoding = (int)thrift_int(r, t2);
                else if (f == 4 && isint && id == 8) h->encoding = (int)thrift_int(r, t2);
                else if (f == 5 && isint && id == 8) h->def_len = (int)thrift_int(r, t2);
                else if (f == 6 && isint && id == 8) h->rep_len = (int)thrift_int(r, t2);
                else if (f == 7 && id == 8 && (t2 == THRIFT_TRUE || t2 == THRIFT_FALSE)) h->compressed = t2 == THRIFT_TRUE;
                else thrift_skip(r, t2);
            }
            thrift_leave(r);
        } else {
            thrift_skip(r, t);
        }
    }
}

/* src[0..sn) decompressed by `codec` into exactly un bytes: *out (malloc'd, or src itself
 * when uncompressed: *owned 0). A static phrase on failure. */
static const char *decompress(int codec, const uint8_t *src, size_t sn, size_t un, const uint8_t **out, uint8_t **owned) {
    *owned = NULL;
    if (codec == C_NONE) {
        if (sn != un) return "an uncompressed page whose two sizes differ";
        *out = src;
        return NULL;
    }
    uint8_t *dst = malloc(un ? un : 1);
    if (!dst) return "out of memory";
    const char *bad = NULL;
    if (codec == C_SNAPPY) {
        size_t len = 0;
        if (snappy_uncompressed_length((const char *)src, sn, &len) != SNAPPY_OK || len != un)
            bad = "a snappy page that does not say its page size";
        else if (snappy_uncompress((const char *)src, sn, (char *)dst, &len) != SNAPPY_OK || len != un)
            bad = "a snappy page that does not decompress";
    } else if (codec == C_GZIP) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) bad = "out of memory";
        else {
            z.next_in = (Bytef *)(uintptr_t)src, z.avail_in = (uInt)sn;
            z.next_out = dst, z.avail_out = (uInt)un;
            int zr = inflate(&z, Z_FINISH);
            if (zr != Z_STREAM_END || z.total_out != un) bad = "a gzip page that does not decompress to its size";
            inflateEnd(&z);
        }
    } else if (codec == C_ZSTD) {
        size_t got = ZSTD_decompress(dst, un, src, sn);
        if (ZSTD_isError(got) || got != un) bad = "a zstd page that does not decompress to its size";
    } else {
        bad = "unsupported codec";
    }
    if (bad) {
        free(dst);
        return bad;
    }
    *out = *owned = dst;
    return NULL;
}

/* see parquet.h */
const char *parquet_hybrid(const uint8_t *p, size_t n, int width, uint32_t *out, size_t count) {
    if (width < 0 || width > 32) return "a bit width above 32";
    size_t got = 0, i = 0, vbytes = (size_t)(width + 7) / 8;
    while (got < count) {
        uint64_t hdr = 0;
        for (int shift = 0;; shift += 7) {
            if (i >= n || shift > 63) return "levels or indices cut short";
            hdr |= (uint64_t)(p[i] & 0x7f) << shift;
            if (!(p[i++] & 0x80)) break;
        }
        if (hdr & 1) { /* bit-packed: groups of 8 values */
            uint64_t groups = hdr >> 1;
            /* checked by division: groups x width could wrap (a hostile 9-byte header) */
            if (width > 0 && groups > (uint64_t)(n - i) / (uint64_t)width)
                return "a bit-packed run longer than the page";
            size_t bytes = (size_t)groups * (size_t)width;
            /* values in the run; with width 0 no bytes, and groups x 8 could wrap */
            uint64_t vals = groups > UINT64_MAX / 8 ? UINT64_MAX : groups * 8;
            uint64_t acc = 0;
            int bits = 0;
            size_t k = i;
            for (uint64_t v = 0; v < vals && got < count; v++) {
                while (bits < width) acc |= (uint64_t)p[k++] << bits, bits += 8;
                uint32_t x = width ? (uint32_t)(acc & ((width == 32) ? 0xffffffffu : ((1u << width) - 1))) : 0;
                acc >>= width, bits -= width;
                out[got++] = x;
            }
            i += bytes;
        } else { /* a run of one value */
            uint64_t run = hdr >> 1;
            if (vbytes > n - i) return "an RLE run cut short";
            uint32_t x = 0;
            for (size_t b = 0; b < vbytes; b++) x |= (uint32_t)p[i + b] << (8 * b);
            i += vbytes;
            if (run == 0) return "an empty RLE run";
            for (uint64_t v = 0; v < run && got < count; v++) out[got++] = x;
        }
    }
    return NULL;
}

/* DELTA_BINARY_PACKED: `count` integers from p[0..n) into out[] (NULL: count them only);
 * *used gets the bytes the encoding took (what follows it starts there). The header (block
 * size, miniblocks per block, total, first value), then blocks of a minimum delta, a bit
 * width per miniblock and the miniblocks bit-packed. */
static const char *delta_binary(const uint8_t *p, size_t n, int64_t *out, size_t count, size_t *used) {
    size_t i = 0;
    uint64_t hv[4];
    for (int h = 0; h < 4; h++) {
        hv[h] = 0;
        for (int shift = 0;; shift += 7) {
            if (i >= n || shift > 63) return "a DELTA_BINARY_PACKED header cut short";
            hv[h] |= (uint64_t)(p[i] & 0x7f) << shift;
            if (!(p[i++] & 0x80)) break;
        }
    }
    uint64_t block = hv[0], minis = hv[1], total = hv[2];
    if (!block || !minis || block % minis || (block / minis) % 8 || block > (1u << 20) || minis > block)
        return "a DELTA_BINARY_PACKED header with impossible sizes";
    if (total != count) return "a DELTA_BINARY_PACKED run of another length than the page's values";
    uint64_t per = block / minis;
    int64_t prev = (int64_t)(hv[3] >> 1) ^ -(int64_t)(hv[3] & 1);
    size_t got = 0;
    if (count && out) out[got] = prev;
    got += count > 0;
    while (got < count) {
        uint64_t zz = 0;
        for (int shift = 0;; shift += 7) {
            if (i >= n || shift > 63) return "a DELTA_BINARY_PACKED block cut short";
            zz |= (uint64_t)(p[i] & 0x7f) << shift;
            if (!(p[i++] & 0x80)) break;
        }
        int64_t min_delta = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
        if (minis > n - i) return "a DELTA_BINARY_PACKED block cut short";
        const uint8_t *widths = p + i;
        i += minis;
        for (uint64_t m = 0; m < minis && got < count; m++) {
            int w = widths[m];
            if (w > 64) return "a DELTA_BINARY_PACKED bit width above 64";
            size_t bytes = (size_t)(per * (uint64_t)w / 8);
            if (bytes > n - i) return "a DELTA_BINARY_PACKED miniblock cut short";
            unsigned __int128 acc = 0;
            int bits = 0;
            size_t k = i;
            for (uint64_t v = 0; v < per && got < count; v++) {
                while (bits < w) acc |= (unsigned __int128)p[k++] << bits, bits += 8;
                uint64_t x = w == 64 ? (uint64_t)acc : (uint64_t)acc & ((1ull << w) - 1);
                acc >>= w, bits -= w;
                prev = (int64_t)((uint64_t)prev + (uint64_t)min_delta + x); /* wraps as the writer's did */
                if (out) out[got] = prev;
                got++;
            }
            i += bytes;
        }
    }
    *used = i;
    return NULL;
}

/* The strings of a DELTA_LENGTH_BYTE_ARRAY (lengths, then the bytes one after another) or
 * DELTA_BYTE_ARRAY (prefix lengths shared with the value before, then the suffixes as
 * DELTA_LENGTH_BYTE_ARRAY) page: count values into v[], len[]; *owned holds the rebuilt
 * bytes (DELTA_BYTE_ARRAY), freed by the caller. */
static const char *delta_strings(int enc, const uint8_t *p, size_t n, size_t count, const uint8_t **v, uint32_t *len,
                                 uint8_t **owned) {
    *owned = NULL;
    int64_t *pre = NULL, *sl = calloc(count ? count : 1, sizeof *sl);
    if (!sl) return "out of memory";
    size_t at = 0, used = 0;
    const char *bad = NULL;
    if (enc == E_DELTA_BYTE_ARRAY) {
        if (!(pre = calloc(count ? count : 1, sizeof *pre))) bad = "out of memory";
        else bad = delta_binary(p, n, pre, count, &used);
        at = used;
    }
    if (!bad) bad = delta_binary(p + at, n - at, sl, count, &used);
    at += used;
    uint64_t total = 0;
    for (size_t i = 0; !bad && i < count; i++) {
        if (sl[i] < 0 || (uint64_t)sl[i] > n - at || (pre && (pre[i] < 0 || (uint64_t)pre[i] > PARQUET_MAX_PAGE)))
            bad = "a string length outside the page";
        else total += (uint64_t)sl[i] + (pre ? (uint64_t)pre[i] : 0);
    }
    if (!bad && total > (uint64_t)PARQUET_MAX_PAGE) bad = "strings larger than a page";
    uint8_t *buf = NULL;
    if (!bad && pre && !(buf = malloc(total ? total : 1))) bad = "out of memory";
    size_t out = 0;
    for (size_t i = 0; !bad && i < count; i++) {
        uint64_t s = (uint64_t)sl[i];
        if (s > n - at) {
            bad = "the strings run past the page";
            break;
        }
        if (pre) {
            uint64_t k = (uint64_t)pre[i];
            if (k > (i ? len[i - 1] : 0)) {
                bad = "a prefix longer than the string before it";
                break;
            }
            if (k) memcpy(buf + out, v[i - 1], k);
            memcpy(buf + out + k, p + at, s);
            v[i] = buf + out, len[i] = (uint32_t)(k + s);
            out += k + s;
        } else {
            v[i] = p + at, len[i] = (uint32_t)s;
        }
        at += s;
    }
    free(pre);
    free(sl);
    if (bad) free(buf);
    else *owned = buf;
    return bad;
}

static int bit_width(uint32_t max) {
    int w = 0;
    while (max) w++, max >>= 1;
    return w;
}

/* A column chunk's reading state: its dictionary (spans into `dict_buf`) and the row. */
typedef struct pq_read {
    const parquet_sink *s;
    tdm_err *e;
    int max_def;
    const uint8_t **dict;
    uint32_t *dict_len;
    size_t ndict;
    uint8_t *dict_buf;
    uint64_t row;
    char *why;
    size_t cap;
} pq_read;

static int failf(pq_read *q, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(pq_read *q, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->why, q->cap, fmt, ap);
    va_end(ap);
    return code;
}

/* PLAIN byte arrays: 4-byte little-endian lengths, each followed by its bytes. */
static const char *plain_next(const uint8_t *p, size_t n, size_t *at, const uint8_t **v, uint32_t *len) {
    if (n - *at < 4) return "a PLAIN value cut short";
    uint32_t l = (uint32_t)p[*at] | (uint32_t)p[*at + 1] << 8 | (uint32_t)p[*at + 2] << 16 | (uint32_t)p[*at + 3] << 24;
    *at += 4;
    if (l > n - *at) return "a PLAIN value longer than the page";
    *v = p + *at, *len = l;
    *at += l;
    return NULL;
}

/* One data page's values: `nv` values (nulls included), levels decoded from def[0..dn)
 * (v1: with their 4-byte length first; v2: without), the values at val[0..vn). */
static int data_page(pq_read *q, const pq_page *h, const uint8_t *def, size_t dn, int v2, const uint8_t *val, size_t vn,
                     const char *where) {
    size_t nv = (size_t)h->num_values;
    uint32_t *lv = NULL, *idx = NULL;
    const char *bad = NULL;
    int rc = 0;
    if (q->max_def) {
        if (!(lv = malloc(nv * sizeof *lv))) return failf(q, PARQUET_CORRUPT, "%s: out of memory", where);
        if (!v2) {
            if (dn < 4) bad = "definition levels cut short";
            else {
                uint32_t l = (uint32_t)def[0] | (uint32_t)def[1] << 8 | (uint32_t)def[2] << 16 | (uint32_t)def[3] << 24;
                if (l > dn - 4) bad = "definition levels longer than the page";
                else bad = parquet_hybrid(def + 4, l, bit_width((uint32_t)q->max_def), lv, nv), val = def + 4 + l, vn = dn - 4 - l;
            }
        } else {
            bad = parquet_hybrid(def, dn, bit_width((uint32_t)q->max_def), lv, nv);
        }
    }
    /* a level above the maximum is no null: the page is corrupt */
    for (size_t i = 0; !bad && lv && i < nv; i++)
        if (lv[i] > (uint32_t)q->max_def) bad = "a definition level above the column's maximum";
    size_t present = 0;
    for (size_t i = 0; !bad && i < nv; i++) present += !lv || lv[i] == (uint32_t)q->max_def;
    int dict_enc = h->encoding == E_PLAIN_DICT || h->encoding == E_RLE_DICT;
    int delta = h->encoding == E_DELTA_LENGTH || h->encoding == E_DELTA_BYTE_ARRAY;
    if (!bad && !dict_enc && !delta && h->encoding != E_PLAIN) {
        free(lv);
        return failf(q, PARQUET_UNSUPPORTED, "%s: the %s encoding is not supported for strings (PLAIN, the "
                     "dictionary and the DELTA_*_BYTE_ARRAY ones are)", where,
                     h->encoding >= 0 && h->encoding < 10 ? ENC_NAMES[h->encoding] : "unknown");
    }
    const uint8_t **dv = NULL;
    uint32_t *dl = NULL;
    uint8_t *downed = NULL;
    if (!bad && delta) {
        if (!(dv = malloc((present ? present : 1) * sizeof *dv)) || !(dl = malloc((present ? present : 1) * sizeof *dl)))
            bad = "out of memory";
        else
            bad = delta_strings(h->encoding, val, vn, present, dv, dl, &downed);
    }
    if (!bad && dict_enc) {
        if (!q->dict) bad = "dictionary-encoded values without a dictionary page";
        else if (present && vn < 1) bad = "dictionary indices cut short";
        else if (present && !(idx = malloc(present * sizeof *idx))) bad = "out of memory";
        else if (present) bad = parquet_hybrid(val + 1, vn - 1, val[0], idx, present);
    }
    size_t at = 0, k = 0;
    for (size_t i = 0; !bad && !rc && i < nv; i++, q->row++) {
        if (lv && lv[i] != (uint32_t)q->max_def) {
            if (q->s->null) q->s->null(q->s->ctx, q->row);
            continue;
        }
        const uint8_t *v;
        uint32_t len;
        if (delta) {
            v = dv[k], len = dl[k];
            k++;
        } else if (dict_enc) {
            uint32_t d = idx[k++];
            if (d >= q->ndict) {
                bad = "a dictionary index past the dictionary";
                break;
            }
            v = q->dict[d], len = q->dict_len[d];
        } else if ((bad = plain_next(val, vn, &at, &v, &len))) {
            break;
        }
        rc = q->s->value(q->s->ctx, (const char *)v, len, q->row, q->e);
    }
    free(lv);
    free(idx);
    free(dv);
    free(dl);
    free(downed);
    if (bad) return failf(q, PARQUET_CORRUPT, "%s: %s", where, bad);
    return rc;
}

/* Every page of one row group's column chunk, in order. */
static int read_chunk_pages(pq_read *q, const uint8_t *file, size_t fn, const pq_chunk *c, size_t g) {
    int64_t start = c->has_dict && c->dict_off > 0 && c->dict_off < c->data_off ? c->dict_off : c->data_off;
    if (c->elsewhere) return failf(q, PARQUET_UNSUPPORTED, "row group %zu: the column is in another file or encrypted", g);
    if (c->codec != C_NONE && c->codec != C_SNAPPY && c->codec != C_GZIP && c->codec != C_ZSTD)
        return failf(q, PARQUET_UNSUPPORTED, "row group %zu: codec %s is not supported (UNCOMPRESSED, SNAPPY, "
                     "GZIP and ZSTD are)", g, c->codec >= 0 && c->codec < 8 ? CODEC_NAMES[c->codec] : "unknown");
    if (start < 4 || c->size <= 0 || (uint64_t)start > fn || (uint64_t)c->size > fn - (uint64_t)start)
        return failf(q, PARQUET_CORRUPT, "row group %zu: the column chunk lies outside the file", g);
    const uint8_t *p = file + start, *end = p + c->size;
    int64_t seen = 0;
    for (int page = 0; p < end && seen < c->num_values; page++) {
        char where[96];
        snprintf(where, sizeof where, "row group %zu, page %d", g, page);
        thrift_rd r;
        thrift_init(&r, p, (size_t)(end - p));
        pq_page h;
        memset(&h, 0, sizeof h);
        read_page_header(&r, &h);
        if (r.bad) return failf(q, PARQUET_CORRUPT, "%s: a page header that does not read (%s)", where, r.bad);
        p = r.p;
        if (h.csize < 0 || h.usize < 0 || (size_t)h.usize > PARQUET_MAX_PAGE || h.csize > end - p)
            return failf(q, PARQUET_CORRUPT, "%s: page sizes outside the column chunk", where);
        if ((size_t)h.usize > PARQUET_FREE_PAGE && (size_t)h.usize / PARQUET_MAX_RATIO > (size_t)h.csize)
            return failf(q, PARQUET_CORRUPT, "%s: a page of %d bytes that decompresses to %d, more than %d times "
                         "its size (a decompression bomb, or damage); this reader refuses it", where, h.csize,
                         h.usize, PARQUET_MAX_RATIO);
        const uint8_t *body = p;
        p += h.csize;
        if (h.type == P_DICT) {
            if (!h.has_dict || h.num_values < 0 || (h.encoding != E_PLAIN && h.encoding != E_PLAIN_DICT) || q->dict)
                return failf(q, PARQUET_CORRUPT, "%s: a dictionary page that does not read", where);
            const uint8_t *u;
            const char *bad = decompress(c->codec, body, (size_t)h.csize, (size_t)h.usize, &u, &q->dict_buf);
            if (bad) return failf(q, PARQUET_CORRUPT, "%s: %s", where, bad);
            size_t n = (size_t)h.num_values;
            if (n > (size_t)h.usize / 4 + 1) return failf(q, PARQUET_CORRUPT, "%s: more dictionary values than bytes", where);
            if (!(q->dict = malloc((n ? n : 1) * sizeof *q->dict)) || !(q->dict_len = malloc((n ? n : 1) * sizeof *q->dict_len)))
                return failf(q, PARQUET_CORRUPT, "%s: out of memory", where);
            size_t at = 0;
            for (size_t i = 0; i < n; i++)
                if ((bad = plain_next(u, (size_t)h.usize, &at, &q->dict[i], &q->dict_len[i])))
                    return failf(q, PARQUET_CORRUPT, "%s: %s", where, bad);
            q->ndict = n;
            continue;
        }
        if (h.type != P_DATA && h.type != P_DATA_V2) continue; /* an index page */
        if (h.num_values < 0 || (h.type == P_DATA && !h.has_v1) || (h.type == P_DATA_V2 && !h.has_v2))
            return failf(q, PARQUET_CORRUPT, "%s: a data page without its header", where);
        if (h.num_values > PARQUET_MAX_PAGE_VALUES)
            return failf(q, PARQUET_CORRUPT, "%s: %d values in one page, more than this reader takes (%d)", where,
                         h.num_values, PARQUET_MAX_PAGE_VALUES);
        int rc;
        uint8_t *owned = NULL;
        const uint8_t *u = NULL;
        const char *bad;
        if (h.type == P_DATA) {
            if ((bad = decompress(c->codec, body, (size_t)h.csize, (size_t)h.usize, &u, &owned)))
                return failf(q, PARQUET_CORRUPT, "%s: %s", where, bad);
            rc = data_page(q, &h, u, (size_t)h.usize, 0, u, (size_t)h.usize, where);
        } else {
            if (h.rep_len != 0 || h.def_len < 0 || h.def_len > h.csize || h.def_len > h.usize)
                return failf(q, PARQUET_CORRUPT, "%s: level sizes outside the page", where);
            size_t lv = (size_t)h.def_len, cs = (size_t)h.csize - lv, us = (size_t)h.usize - lv;
            if ((bad = decompress(h.compressed ? c->codec : C_NONE, body + lv, cs, us, &u, &owned)))
                return failf(q, PARQUET_CORRUPT, "%s: %s", where, bad);
            rc = data_page(q, &h, body, lv, 1, u, us, where);
        }
        free(owned);
        if (rc) return rc;
        seen += h.num_values;
    }
    if (seen != c->num_values)
        return failf(q, PARQUET_CORRUPT, "row group %zu: the pages hold %lld values, the column chunk says %lld", g,
                     (long long)seen, (long long)c->num_values);
    return 0;
}

int parquet_read(const uint8_t *data, size_t n, const char *column, const parquet_sink *s, char *why, size_t cap,
                 tdm_err *e) {
    if (n < 12 || memcmp(data, "PAR1", 4) || memcmp(data + n - 4, "PAR1", 4)) {
        snprintf(why, cap, "not a Parquet file (no PAR1 at both ends%s)",
                 n >= 4 && !memcmp(data + n - 4, "PARE", 4) ? "; an encrypted footer" : "");
        return PARQUET_CORRUPT;
    }
    uint32_t flen = (uint32_t)data[n - 8] | (uint32_t)data[n - 7] << 8 | (uint32_t)data[n - 6] << 16 |
                    (uint32_t)data[n - 5] << 24;
    if (flen > n - 12) {
        snprintf(why, cap, "the footer's length (%u bytes) is more than the file holds", flen);
        return PARQUET_CORRUPT;
    }
    pq_meta m;
    memset(&m, 0, sizeof m);
    const char *bad = read_meta(data + n - 8 - flen, flen, &m);
    int rc = 0;
    if (bad) {
        snprintf(why, cap, "the footer does not read (%s)", bad);
        rc = PARQUET_CORRUPT;
    }
    size_t leaf = 0;
    uint64_t row = 0;
    const pq_schema *el = NULL;
    if (!rc) rc = find_column(&m, column, &leaf, &el, why, cap);
    for (size_t g = 0; !rc && g < m.ngroups; g++) {
        const pq_group *grp = &m.groups[g];
        if (leaf >= grp->nchunks) {
            snprintf(why, cap, "row group %zu: %zu column chunks, no column %zu", g, grp->nchunks, leaf);
            rc = PARQUET_CORRUPT;
            break;
        }
        const pq_chunk *c = &grp->chunks[leaf];
        pq_read q = {.s = s, .e = e, .max_def = el->repetition == R_OPTIONAL, .row = row, .why = why, .cap = cap};
        if (c->type != T_BYTE_ARRAY && !c->elsewhere) {
            snprintf(why, cap, "row group %zu: the column chunk is not of strings", g);
            rc = PARQUET_CORRUPT;
        } else {
            rc = read_chunk_pages(&q, data, n, c, g);
        }
        row = q.row;
        free(q.dict);
        free(q.dict_len);
        free(q.dict_buf);
    }
    meta_free(&m);
    return rc;
}
