/* docread.c — documents of one file: decompression and formats (docread.h). */
#include "data/docread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "data/jsonl.h"
#include "data/parquet.h"
#include "data/utf8.h"
#include "util/buf.h"

#define DR_BUF (1u << 20) /* decompressed bytes per read */

enum { DR_PLAIN, DR_JSONL, DR_JSON, DR_PARQUET };
enum { DR_RAW, DR_GZ, DR_ZST };

/* ---- the decompressed byte stream of a file ------------------------------------------- */

#define DR_GZ_IN (1u << 17) /* compressed bytes per read (gzip) */

typedef struct dr_in {
    int fd, comp;
    z_stream gz;      /* gzip: zlib's inflater with gzip framing, one member at a time */
    int gz_ready;     /* gz initialised (inflateEnd at close) */
    int gz_between;   /* a member ended: what follows is another member, zero padding, or the end */
    unsigned long long raw_off; /* compressed bytes read from the file so far */
    ZSTD_DCtx *z;
    unsigned char *zbuf; /* compressed input (gzip and zstd) */
    ZSTD_inBuffer zin;
    size_t zret;      /* the last ZSTD_decompressStream result: 0 at a frame's end */
    int raw_eof, zfull;
    int first;        /* no byte read yet (gzip: check that it is gzip at all) */
} dr_in;

static int dr_suffix(const char *s, size_t n, const char *suf) {
    size_t l = strlen(suf);
    return n >= l && !strncasecmp(s + n - l, suf, l); /* "A.JSONL.GZ" too */
}

/* The compression a name says that prep cannot read ("bzip2"...), or NULL. */
static const char *dr_unsupported(const char *path, int fd) {
    /* by name and by the format's own first bytes (a text file named x.pt.bz2 by chance
     * is read as text) */
    static const struct {
        const char *suffix, *name, *magic;
        size_t n;
    } kinds[] = {{".bz2", "bzip2", "BZh", 3},
                 {".xz", "xz", "\xfd" "7zXZ", 6},
                 {".lz4", "lz4", "\x04\x22\x4d\x18", 4},
                 {".zip", "zip", "PK\x03\x04", 4},
                 {".7z", "7-Zip", "7z\xbc\xaf\x27\x1c", 6}};
    unsigned char head[8];
    ssize_t got = pread(fd, head, sizeof head, 0);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (dr_suffix(path, strlen(path), kinds[i].suffix) && got >= (ssize_t)kinds[i].n &&
            !memcmp(head, kinds[i].magic, kinds[i].n))
            return kinds[i].name;
    return NULL;
}

/* Compression from the last suffix, format from the one before it. */
static void dr_kind(const char *path, int *fmt, int *comp) {
    size_t n = strlen(path);
    *comp = DR_RAW;
    if (dr_suffix(path, n, ".gz")) *comp = DR_GZ, n -= 3;
    else if (dr_suffix(path, n, ".zst")) *comp = DR_ZST, n -= 4;
    /* JSON lines under its other names too (read as text, a record's JSON became the text) */
    *fmt = dr_suffix(path, n, ".jsonl") || dr_suffix(path, n, ".ndjson") || dr_suffix(path, n, ".jsonlines")
               ? DR_JSONL
           : dr_suffix(path, n, ".json")    ? DR_JSON
           : dr_suffix(path, n, ".parquet") ? DR_PARQUET
                                            : DR_PLAIN;
}

static void dr_close(dr_in *in) {
    if (in->gz_ready) inflateEnd(&in->gz);
    if (in->fd >= 0) close(in->fd);
    ZSTD_freeDCtx(in->z);
    free(in->zbuf);
    memset(in, 0, sizeof *in);
    in->fd = -1;
}

/* dr_read for gzip: zlib's inflate over the file's members in turn (`cat a.gz b.gz` is one
 * gzip file, as gzip(1) reads it). Why not gzread: it ignores whatever follows the last
 * member, so a file with other bytes appended (two files concatenated wrongly, a partial
 * overwrite) read as good and those bytes were lost without a word. Here only zero bytes
 * (block padding, as tar and some writers leave) may follow; anything else makes the file
 * corrupt, naming the offset. */
static long dr_read_gz(dr_in *in, unsigned char *buf, size_t n, int *reason, char *why, size_t wl) {
    z_stream *z = &in->gz;
    z->next_out = buf;
    z->avail_out = (uInt)n; /* n <= DR_BUF */
    for (;;) {
        if (z->avail_in == 0 && !in->raw_eof) {
            ssize_t r = read(in->fd, in->zbuf, DR_GZ_IN);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                *reason = TEXTSRC_UNREADABLE;
                snprintf(why, wl, "read error: %s", strerror(errno));
                return -1;
            }
            if (r == 0) in->raw_eof = 1;
            in->raw_off += (unsigned long long)r;
            z->next_in = in->zbuf;
            z->avail_in = (uInt)r;
        }
        size_t got = n - z->avail_out;
        unsigned long long at = in->raw_off - z->avail_in; /* offset of next_in in the file */
        if (in->first && z->avail_in > 0) {
            in->first = 0;
            if (z->next_in[0] != 0x1f || (z->avail_in > 1 && z->next_in[1] != 0x8b)) {
                *reason = TEXTSRC_CORRUPT;
                snprintf(why, wl, "not gzip data (a .gz name on an uncompressed file?)");
                return -1;
            }
        }
        if (in->gz_between) {
            if (z->avail_in == 0) {
                if (in->raw_eof) return (long)got; /* the end, after a whole member */
                continue;
            }
            if (z->next_in[0] == 0) { /* padding: zero bytes to the end, nothing else */
                while (z->avail_in > 0 && z->next_in[0] == 0) z->next_in++, z->avail_in--;
                if (z->avail_in == 0) continue;
                at = in->raw_off - z->avail_in;
            } else if (z->next_in[0] == 0x1f) { /* another member: inflate checks its header */
                in->gz_between = 0;
                inflateReset(z);
                continue;
            }
            *reason = TEXTSRC_CORRUPT;
            snprintf(why, wl, "gzip: other data after the gzip stream at byte %llu (a damaged or "
                     "wrongly joined file; gzip -t says the same)", at);
            return -1;
        }
        if (got == n) return (long)got;
        int zr = inflate(z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            in->gz_between = 1;
            continue;
        }
        if (zr == Z_OK || (zr == Z_BUF_ERROR && !(z->avail_in == 0 && in->raw_eof))) continue;
        if (zr == Z_BUF_ERROR) { /* no input left inside a member */
            *reason = TEXTSRC_CORRUPT;
            snprintf(why, wl, "gzip: unexpected end of file (truncated inside a member)");
            return -1;
        }
        *reason = zr == Z_MEM_ERROR ? TEXTSRC_UNREADABLE : TEXTSRC_CORRUPT;
        snprintf(why, wl, "gzip: %s at byte %llu", zr == Z_MEM_ERROR ? "out of memory"
                 : z->msg ? z->msg : "invalid data", (unsigned long long)(in->raw_off - z->avail_in));
        return -1;
    }
}

/* The window a zstd frame header at p[0..n) declares (RFC 8878 3.1.1.1: the window
 * descriptor, or the content size of a single-segment frame); 0 when it does not read. */
static uint64_t zstd_frame_window(const unsigned char *p, size_t n) {
    if (n < 6 || p[0] != 0x28 || p[1] != 0xB5 || p[2] != 0x2F || p[3] != 0xFD) return 0;
    unsigned fhd = p[4], fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, did_flag = fhd & 3;
    if (!single) {
        unsigned wd = p[5], log = 10 + (wd >> 3);
        uint64_t base = (uint64_t)1 << log;
        return base + (base / 8) * (wd & 7);
    }
    static const size_t did_size[4] = {0, 1, 2, 4}, fcs_size[4] = {1, 2, 4, 8};
    size_t at = 5 + did_size[did_flag], fn = fcs_size[fcs_flag];
    if (at + fn > n) return 0;
    uint64_t v = 0;
    for (size_t k = 0; k < fn; k++) v |= (uint64_t)p[at + k] << (8 * k);
    return fn == 2 ? v + 256 : v;
}

/* "2 GiB", "192 MiB", "1.5 GiB" */
static void dr_size_text(uint64_t b, char *out, size_t cap) {
    if (b >= (uint64_t)1 << 30) snprintf(out, cap, "%.3g GiB", (double)b / (double)((uint64_t)1 << 30));
    else snprintf(out, cap, "%.3g MiB", (double)b / (double)(1 << 20));
}

/* why for a frame that needs a window past DOCREAD_ZSTD_WINDOW_LOG: the window its header
 * declares (the last frame start in the input read so far, at or before the decoder's
 * position), the cap, and what to do. */
static void dr_zstd_window_why(const dr_in *in, char *why, size_t wl) {
    const unsigned char *src = in->zin.src;
    uint64_t w = 0;
    for (size_t at = in->zin.pos < in->zin.size ? in->zin.pos + 1 : in->zin.size; !w && at-- > 0;)
        w = zstd_frame_window(src + at, in->zin.size - at);
    char need[32] = "more", cap[32];
    if (w) dr_size_text(w, need, sizeof need);
    dr_size_text((uint64_t)1 << DOCREAD_ZSTD_WINDOW_LOG, cap, sizeof cap);
    snprintf(why, wl, "zstd: a frame that needs a window of %s, more than the %s prep decodes with (zstd --long "
             "writes such frames): decompress it with zstd -d --long=31 and compress it again without --long", need,
             cap);
}

/* Reads up to n decompressed bytes: the count, 0 at the end, or -1 with *reason
 * (TEXTSRC_UNREADABLE or TEXTSRC_CORRUPT) and why filled in. */
static long dr_read(dr_in *in, unsigned char *buf, size_t n, int *reason, char *why, size_t wl) {
    if (in->comp == DR_RAW) {
        for (;;) {
            ssize_t r = read(in->fd, buf, n);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                *reason = TEXTSRC_UNREADABLE;
                snprintf(why, wl, "read error: %s", strerror(errno));
                return -1;
            }
            return (long)r;
        }
    }
    if (in->comp == DR_GZ) return dr_read_gz(in, buf, n, reason, why, wl);
    for (;;) {
        if (in->zin.pos == in->zin.size && !in->raw_eof && !in->zfull) {
            ssize_t r = read(in->fd, in->zbuf, ZSTD_DStreamInSize());
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                *reason = TEXTSRC_UNREADABLE;
                snprintf(why, wl, "read error: %s", strerror(errno));
                return -1;
            }
            if (r == 0) in->raw_eof = 1;
            in->zin = (ZSTD_inBuffer){in->zbuf, (size_t)r, 0};
        }
        if (in->zin.pos < in->zin.size || in->zfull) {
            ZSTD_outBuffer out = {buf, n, 0};
            size_t ret = ZSTD_decompressStream(in->z, &out, &in->zin);
            if (ZSTD_isError(ret) && ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge) {
                *reason = TEXTSRC_UNSUPPORTED; /* a sound file, if a large one to decode */
                dr_zstd_window_why(in, why, wl);
                return -1;
            }
            if (ZSTD_isError(ret)) {
                *reason = TEXTSRC_CORRUPT;
                snprintf(why, wl, "zstd: %s", ZSTD_getErrorName(ret));
                return -1;
            }
            in->zret = ret;
            /* output full: more may be waiting inside zstd — unless the frame just ended
             * (0: decoded and flushed); a call then would start a new frame and answer
             * with its header's size, read as a stream cut inside a frame */
            in->zfull = out.pos == n && ret != 0;
            if (out.pos) return (long)out.pos;
            continue;
        }
        if (in->zret != 0) {
            *reason = TEXTSRC_CORRUPT;
            snprintf(why, wl, "zstd: truncated stream (the file ends inside a frame)");
            return -1;
        }
        return 0;
    }
}

/* ---- one file --------------------------------------------------------------------------- */

typedef struct dr {
    const textsrc_file *f;
    const char *field;
    const docread_sink *s;
    dr_in in;
    unsigned char *buf;
    uint64_t docs; /* documents ended with keep */
    uint64_t records; /* .jsonl lines that are not blank */
    int open_doc;  /* text() was called since the last end() */
    int fmt;
    uint64_t elem; /* a .json array's record being read (1-based), else 0 */
    tdm_err *e;
} dr;

static void dr_issue(dr *d, int reason, uint64_t line, const char *what) {
    if (d->s->issues.fn) d->s->issues.fn(d->s->issues.ctx, reason, d->f->path, line, what);
}

/* A document's text to the sink in pieces of at most DR_BUF bytes, as a plain file's
 * arrives: the sink encodes pieces to the same tokens as the whole (prep.c), and a
 * record's text held once is not held again four times over as its byte-level tokens. */
static int dr_text(dr *d, const char *p, size_t n) {
    d->open_doc = 1;
    int rc = 0;
    for (size_t at = 0; !rc && (at < n || n == 0); at += DR_BUF) {
        rc = d->s->text(d->s->ctx, p + at, n - at < DR_BUF ? n - at : DR_BUF, d->e);
        if (n == 0) break;
    }
    return rc;
}

static int dr_end(dr *d, int keep) {
    d->open_doc = 0;
    if (keep) d->docs++;
    return d->s->end(d->s->ctx, keep, d->e);
}

static long dr_next(dr *d, unsigned char *buf, size_t n, int *reason, char *why, size_t wl) {
    long r = dr_read(&d->in, buf, n, reason, why, wl);
    if (r > 0 && d->s->progress) d->s->progress(d->s->ctx, (uint64_t)r);
    return r;
}

static uint64_t dr_lines(const unsigned char *p, size_t n) {
    uint64_t k = 0;
    for (const unsigned char *q = p; (q = memchr(q, '\n', n - (size_t)(q - p))); q++) k++;
    return k;
}

/* A plain text file: one document, checked by the binary rule while it streams. */
static int dr_plain(dr *d, int *fail, char *why, size_t wl) {
    size_t have = 0;
    long r = 1;
    while (have < TEXTSRC_SNIFF_BYTES && r > 0) {
        r = dr_next(d, d->buf + have, DR_BUF - have, fail, why, wl);
        if (r > 0) have += (size_t)r;
    }
    if (r < 0) return 0;
    if (have == 0) {
        dr_issue(d, TEXTSRC_EMPTY, 0, "no text");
        return 0;
    }
    size_t win = have < TEXTSRC_SNIFF_BYTES ? have : TEXTSRC_SNIFF_BYTES;
    const unsigned char *nul = memchr(d->buf, 0, win);
    utf8_state u = {0};
    size_t bad = utf8_scan(&u, d->buf, have);
    if (nul || bad < win) {
        snprintf(why, wl, "%s at byte %zu (binary, left out)",
                 nul ? "a NUL byte" : "bytes that are not UTF-8", nul ? (size_t)(nul - d->buf) : bad);
        dr_issue(d, TEXTSRC_BINARY, 0, why);
        return 0;
    }
    uint64_t line = 1;
    int rc = 0;
    for (;;) {
        /* a NUL past the sniffed window: a text file holds none (a byte-level dataset
         * would take it as a token), so the file goes as binary, named with its line */
        const unsigned char *z = memchr(d->buf, 0, bad < have ? bad : have);
        if (z) {
            snprintf(why, wl, "a NUL byte (binary, the file is left out)");
            dr_issue(d, TEXTSRC_BINARY, line + dr_lines(d->buf, (size_t)(z - d->buf)), why);
            return d->open_doc ? dr_end(d, 0) : 0;
        }
        if (bad < have) {
            snprintf(why, wl, "bytes that are not UTF-8 (the file is left out)");
            dr_issue(d, TEXTSRC_BAD_UTF8, line + dr_lines(d->buf, bad), why);
            return d->open_doc ? dr_end(d, 0) : 0;
        }
        if ((rc = dr_text(d, (const char *)d->buf, have))) return rc;
        line += dr_lines(d->buf, have);
        r = dr_next(d, d->buf, DR_BUF, fail, why, wl);
        if (r < 0) return dr_end(d, 0);
        if (r == 0) break;
        have = (size_t)r;
        bad = utf8_scan(&u, d->buf, have);
    }
    if (!utf8_done(&u)) {
        dr_issue(d, TEXTSRC_BAD_UTF8, line, "the file ends inside a UTF-8 character (left out)");
        return dr_end(d, 0);
    }
    return dr_end(d, 1);
}

/* One record's outcome: a document, or an issue at `line`. A .json array's issues also
 * name the element: an array written on one line has every element on line 1. */
static int dr_record(dr *d, const jsonl_result *r, const char *text, size_t len, uint64_t line) {
    char what[240], at[40] = "";
    if (d->elem) snprintf(at, sizeof at, "element %llu: ", (unsigned long long)d->elem);
    switch (r->status) {
    case JSONL_OK:
        if (len == 0) {
            snprintf(what, sizeof what, "%sthe \"%s\" field is empty", at, d->field);
            dr_issue(d, TEXTSRC_EMPTY, line, what);
            return 0;
        }
        if (memchr(text, 0, len)) {
            /* \u0000 decodes to a NUL, which a plain file may not hold either (a byte-level
             * dataset would take it as a token): the record goes as binary, as such a file */
            snprintf(what, sizeof what, "%sa NUL character (\\u0000) in the \"%s\" field (binary, left out)", at,
                     d->field);
            dr_issue(d, TEXTSRC_BINARY, line, what);
            return 0;
        }
        {
            int rc = dr_text(d, text, len);
            return rc ? rc : dr_end(d, 1);
        }
    case JSONL_SYNTAX:
    case JSONL_NOT_OBJECT:
        if (d->fmt == DR_JSONL)
            snprintf(what, sizeof what, "bad JSON line: %s (at byte %zu)", r->why, r->at + 1);
        else
            snprintf(what, sizeof what, "%sbad JSON record: %s", at, r->why);
        dr_issue(d, TEXTSRC_BAD_JSON, line, what);
        return 0;
    case JSONL_NO_FIELD:
        snprintf(what, sizeof what, "%sno string \"%s\" field (see --text-field)", at, d->field);
        dr_issue(d, TEXTSRC_NO_FIELD, line, what);
        return 0;
    case JSONL_BAD_UTF8:
        snprintf(what, sizeof what, "%sinvalid UTF-8 in the text field", at);
        dr_issue(d, TEXTSRC_BAD_UTF8, line, what);
        return 0;
    default:
        return err_set(d->e, ERR_INTERNAL, "out of memory");
    }
}

static int dr_jsonl_line(dr *d, buf_t *line, buf_t *out, uint64_t lineno) {
    /* a byte order mark before the first record (editors on Windows write one): JSON's
     * readers may skip it (RFC 8259), and before, the first record was lost as bad JSON */
    size_t bom = lineno == 1 && line->n >= 3 && !memcmp(line->p, "\xef\xbb\xbf", 3) ? 3 : 0;
    if (bom) {
        memmove(line->p, line->p + 3, line->n -= 3);
        line->p[line->n] = '\0'; /* as buf_t keeps it */
    }
    size_t i = 0;
    /* blank: spaces, tabs, CRs only (a NUL is no blank: strchr would find the string's own
     * terminator, and a zero-filled block — damage after a crash — vanished unreported) */
    while (i < line->n && (line->p[i] == ' ' || line->p[i] == '\t' || line->p[i] == '\r')) i++;
    if (i == line->n) return 0;
    d->records++;
    jsonl_result r;
    jsonl_record(line->p, line->n, d->field, out, &r);
    return dr_record(d, &r, out->p, out->n, lineno);
}

/* A .jsonl file: a record per line. */
/* DOCREAD_RECORD_MAX, or TANDEM_TEST_RECORD_MAX bytes for the tests (a record past the
 * real limit would cost them 256 MiB). */
static size_t record_max(void) {
    const char *v = getenv("TANDEM_TEST_RECORD_MAX");
    unsigned long long n = v ? strtoull(v, NULL, 10) : 0;
    return n ? (size_t)n : DOCREAD_RECORD_MAX;
}

static int dr_jsonl(dr *d, int *fail, char *why, size_t wl) {
    buf_t line = {0}, out = {0};
    uint64_t lineno = 0;
    int rc = 0, too_long = 0; /* the current line passed DOCREAD_RECORD_MAX: skipped to its end */
    size_t max = record_max();
    for (;;) {
        long r = dr_next(d, d->buf, DR_BUF, fail, why, wl);
        if (r <= 0) {
            if (r == 0 && too_long) {
                d->records++;
                dr_issue(d, TEXTSRC_TOO_LONG, ++lineno, "a record longer than " DOCREAD_RECORD_MAX_TEXT
                         " (left out: split the document)");
            }
            else if (r == 0 && line.n) rc = dr_jsonl_line(d, &line, &out, ++lineno);
            break;
        }
        const unsigned char *p = d->buf, *end = d->buf + r;
        while (!rc && p < end) {
            const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
            const unsigned char *stop = nl ? nl : end;
            if (!too_long && line.n + (size_t)(stop - p) > max) {
                too_long = 1; /* held whole, with its decoded copy: refused before memory runs out */
                buf_free(&line);
            }
            if (!too_long) buf_putn(&line, (const char *)p, (size_t)(stop - p));
            if (line.oom) rc = err_set(d->e, ERR_INTERNAL, "out of memory");
            p = stop;
            if (nl && !rc) {
                p++;
                if (too_long) {
                    dr_issue(d, TEXTSRC_TOO_LONG, ++lineno, "a record longer than " DOCREAD_RECORD_MAX_TEXT
                             " (left out: split the document)");
                    d->records++;
                    too_long = 0;
                } else {
                    rc = dr_jsonl_line(d, &line, &out, ++lineno);
                }
                line.n = 0;
            }
        }
        if (rc) break;
    }
    if (!rc && *fail < 0 && !d->records) dr_issue(d, TEXTSRC_EMPTY, 0, "no records (blank lines only)");
    buf_free(&line);
    buf_free(&out);
    return rc;
}

typedef struct dr_json_ctx {
    dr *d;
    const char *s;
    size_t off;     /* the offset line was counted to */
    uint64_t line;
    int rc;
    uint64_t records; /* seen: none in an empty array, which is an empty file */
    int array;        /* the file is an array of records, not one record */
} dr_json_ctx;

static int dr_json_record(void *ctx, const jsonl_result *r, const char *text, size_t len) {
    dr_json_ctx *c = ctx;
    c->records++;
    c->line += dr_lines((const unsigned char *)c->s + c->off, r->at - c->off);
    c->off = r->at;
    c->d->elem = c->array ? c->records : 0;
    c->rc = dr_record(c->d, r, text, len, c->line);
    c->d->elem = 0;
    return c->rc;
}

/* A .json file: read whole, checked, then its records. */
static int dr_json(dr *d, int *fail, char *why, size_t wl) {
    buf_t all = {0}, out = {0};
    long r;
    int too_long = 0;
    while (!too_long && (r = dr_next(d, d->buf, DR_BUF, fail, why, wl)) > 0) {
        if (all.n + (size_t)r > DOCREAD_JSON_MAX) too_long = 1;
        else buf_putn(&all, (const char *)d->buf, (size_t)r);
    }
    int rc = 0;
    if (!too_long && !all.oom && all.n >= 3 && !memcmp(all.p, "\xef\xbb\xbf", 3)) /* a BOM: as dr_jsonl_line */
        memmove(all.p, all.p + 3, all.n -= 3), all.p[all.n] = '\0';
    if (too_long)
        dr_issue(d, TEXTSRC_TOO_LONG, 0, "a .json file of more than " DOCREAD_JSON_MAX_TEXT " (read whole; left out: "
                 "write it as .jsonl, a record per line)");
    else if (all.oom) rc = err_set(d->e, ERR_INTERNAL, "out of memory");
    else if (r == 0 && all.n == 0) dr_issue(d, TEXTSRC_EMPTY, 0, "no text");
    else if (r == 0) {
        size_t lead = strspn(all.p, " \t\r\n");
        dr_json_ctx c = {d, all.p, 0, 1, 0, 0, lead < all.n && all.p[lead] == '['};
        jsonl_result res;
        int st = jsonl_each(all.p, all.n, d->field, &out, dr_json_record, &c, &res);
        if (st == JSONL_SYNTAX && !c.rc) {
            uint64_t line = 1 + dr_lines((const unsigned char *)all.p, res.at);
            char what[200];
            snprintf(what, sizeof what, "bad JSON: %s (the whole file is left out)", res.why);
            dr_issue(d, TEXTSRC_BAD_JSON, line, what);
        } else if (st == JSONL_OOM) {
            rc = err_set(d->e, ERR_INTERNAL, "out of memory");
        } else if (!c.rc && !c.records) {
            dr_issue(d, TEXTSRC_EMPTY, 0, "no records (an empty array)"); /* counted, as an empty file */
        } else {
            rc = c.rc;
        }
    }
    buf_free(&all);
    buf_free(&out);
    return rc;
}

/* ---- Parquet ------------------------------------------------------------------------ */

typedef struct dr_pq {
    dr *d;
    uint64_t rows; /* values and nulls seen: none in a file of no rows, which is an empty file */
} dr_pq;

/* A row's text: a document when it is non-empty UTF-8, else an issue naming the row. */
static int dr_pq_value(void *ctx, const char *text, size_t n, uint64_t row, tdm_err *e) {
    (void)e;
    dr_pq *q = ctx;
    dr *d = q->d;
    char what[200];
    q->rows++;
    if (d->s->progress) d->s->progress(d->s->ctx, (uint64_t)n);
    if (n == 0) {
        snprintf(what, sizeof what, "row %llu: the \"%s\" column is empty", (unsigned long long)row + 1, d->field);
        dr_issue(d, TEXTSRC_EMPTY, 0, what);
        return 0;
    }
    utf8_state u = {0};
    if (utf8_scan(&u, (const unsigned char *)text, n) < n || !utf8_done(&u)) {
        snprintf(what, sizeof what, "row %llu: invalid UTF-8 in the \"%s\" column", (unsigned long long)row + 1,
                 d->field);
        dr_issue(d, TEXTSRC_BAD_UTF8, 0, what);
        return 0;
    }
    if (memchr(text, 0, n)) { /* as a JSON record's \u0000 */
        snprintf(what, sizeof what, "row %llu: a NUL character in the \"%s\" column (binary, left out)",
                 (unsigned long long)row + 1, d->field);
        dr_issue(d, TEXTSRC_BINARY, 0, what);
        return 0;
    }
    int rc = dr_text(d, text, n);
    return rc ? rc : dr_end(d, 1);
}

/* A null: skipped, and counted as one issue (prep's summary counts them, its warnings name
 * the first few). */
static void dr_pq_null(void *ctx, uint64_t row) {
    dr_pq *q = ctx;
    char what[160];
    q->rows++;
    snprintf(what, sizeof what, "row %llu: null in the \"%s\" column (skipped)", (unsigned long long)row + 1,
             q->d->field);
    dr_issue(q->d, TEXTSRC_NULL, 0, what);
}

/* A .parquet file: the rows of its text column (data/parquet.h), mapped into memory. Nulls
 * are skipped and counted (an issue each); a file that does not read
 * through (corrupt, a column missing, an unsupported codec) is left out whole. */
static int dr_parquet(dr *d, int *fail, char *why, size_t wl) {
    void *map = mmap(NULL, (size_t)d->f->size, PROT_READ, MAP_PRIVATE, d->in.fd, 0);
    if (map == MAP_FAILED) {
        *fail = TEXTSRC_UNREADABLE;
        snprintf(why, wl, "cannot map the file: %s", strerror(errno));
        return 0;
    }
    dr_pq q = {.d = d};
    parquet_sink sink = {&q, dr_pq_value, dr_pq_null};
    char pwhy[256];
    int rc = parquet_read(map, (size_t)d->f->size, d->field, &sink, pwhy, sizeof pwhy, d->e);
    munmap(map, (size_t)d->f->size);
    if (rc == PARQUET_CORRUPT || rc == PARQUET_UNSUPPORTED || rc == PARQUET_NO_COLUMN) {
        *fail = rc == PARQUET_NO_COLUMN ? TEXTSRC_NO_FIELD : rc == PARQUET_UNSUPPORTED ? TEXTSRC_UNSUPPORTED
                                                                                     : TEXTSRC_CORRUPT;
        snprintf(why, wl, "Parquet: %s", pwhy);
        return 0;
    }
    if (!rc && !q.rows) dr_issue(d, TEXTSRC_EMPTY, 0, "no rows (counted as an empty file)");
    return rc;
}

int docread_file(const textsrc_file *f, const char *field, const docread_sink *s,
                 int *dropped, tdm_err *e) {
    dr d = {.f = f, .field = field, .s = s, .e = e};
    d.in.fd = -1;
    *dropped = 0;
    int fmt, comp;
    dr_kind(f->path, &fmt, &comp);
    d.fmt = fmt;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    char why[300];
    if (fd < 0) {
        snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
        dr_issue(&d, TEXTSRC_UNREADABLE, 0, why);
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != f->dev || st.st_ino != f->ino ||
        (uint64_t)st.st_size != f->size) {
        close(fd);
        return err_set(e, ERR_USAGE,
                       "%s changed since prep listed it (%llu bytes then); rerun when the inputs "
                       "are stable",
                       f->path, (unsigned long long)f->size);
    }
    if (f->size == 0) {
        close(fd);
        dr_issue(&d, TEXTSRC_EMPTY, 0, "empty file");
        return 0;
    }
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    d.in.fd = fd;
    d.in.comp = comp;
    d.in.first = 1;
    int rc = 0;
    if (comp == DR_GZ) {
        if (!(d.in.zbuf = malloc(DR_GZ_IN)) || inflateInit2(&d.in.gz, 16 + MAX_WBITS) != Z_OK)
            rc = err_set(e, ERR_INTERNAL, "out of memory");
        else d.in.gz_ready = 1;
    }
    if (!rc && comp == DR_ZST &&
        (!(d.in.z = ZSTD_createDCtx()) || !(d.in.zbuf = malloc(ZSTD_DStreamInSize()))))
        rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc && comp == DR_ZST && ZSTD_isError(ZSTD_DCtx_setParameter(d.in.z, ZSTD_d_windowLogMax, DOCREAD_ZSTD_WINDOW_LOG)))
        rc = err_set(e, ERR_INTERNAL, "zstd: cannot set the window limit");
    if (!rc && !(d.buf = malloc(DR_BUF))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    int fail = -1;
    why[0] = '\0';
    if (!rc) {
        const char *unsupported = comp == DR_RAW ? dr_unsupported(f->path, fd) : NULL;
        if (unsupported) { /* read as text it was "binary" */
            fail = TEXTSRC_UNREADABLE;
            snprintf(why, sizeof why, "%s-compressed, which prep does not read: decompress it, or recompress it "
                     "with gzip or zstd", unsupported);
        } else if (fmt == DR_PARQUET && comp != DR_RAW) {
            fail = TEXTSRC_CORRUPT;
            snprintf(why, sizeof why, "a compressed Parquet file: Parquet compresses its own pages, decompress "
                     "the file first");
        } else if (fmt == DR_PARQUET) rc = dr_parquet(&d, &fail, why, sizeof why);
        else if (fmt == DR_JSONL) rc = dr_jsonl(&d, &fail, why, sizeof why);
        else if (fmt == DR_JSON) rc = dr_json(&d, &fail, why, sizeof why);
        else rc = dr_plain(&d, &fail, why, sizeof why);
    }
    if (!rc && fail >= 0) { /* the file could not be read through: none of it counts */
        char msg[340];
        snprintf(msg, sizeof msg, "%s (the file is left out)", why);
        dr_issue(&d, fail, 0, msg);
        if (d.open_doc) rc = dr_end(&d, 0);
        *dropped = d.docs > 0;
    }
    dr_close(&d.in);
    free(d.buf);
    if (rc == ERR_INTERNAL) err_prefix(e, "%s: ", f->path); /* out of memory: on which file */
    return rc;
}
