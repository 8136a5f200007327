/* parquet.h — the text column of a Parquet file, read without Arrow (Debian has no
 * Parquet C library): the Thrift compact footer (data/thrift.h), the schema's top-level
 * columns, every row group's column chunk, its pages (data page v1 and v2, dictionary
 * page), definition levels for nulls (RLE / bit-packed hybrid), PLAIN and dictionary
 * (PLAIN_DICTIONARY, RLE_DICTIONARY) encodings, and the codecs UNCOMPRESSED, SNAPPY
 * (libsnappy), GZIP (zlib) and ZSTD (libzstd).
 *
 * Supported: a top-level BYTE_ARRAY column (a string), REQUIRED or OPTIONAL. Refused with
 * a reason: a nested or repeated column, another type, other codecs (LZO, BROTLI, LZ4)
 * and encodings (the DELTA_* ones, BYTE_STREAM_SPLIT), encrypted files. Hostile input is
 * expected: every offset and size is checked against the file, page sizes are bounded,
 * and a problem names the row group (and page) where it is.
 */
#ifndef TANDEM_DATA_PARQUET_H
#define TANDEM_DATA_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Why a file could not be read through (parquet_read's result when not 0 or the sink's). */
enum {
    PARQUET_CORRUPT = -1,     /* not Parquet, or damaged */
    PARQUET_NO_COLUMN = -2,   /* no top-level string column of that name */
    PARQUET_UNSUPPORTED = -3, /* a codec, encoding or layout this reader does not read */
};

/* A page larger than this (uncompressed) is refused: real writers use ~1 MiB pages. */
#define PARQUET_MAX_PAGE ((size_t)1 << 30)
/* Past PARQUET_FREE_PAGE, a compressed page may decompress to at most PARQUET_MAX_RATIO
 * times its stored size: a tiny file whose pages claim a GiB each (a decompression bomb:
 * zstd turns 16 KiB into 512 MiB of zeros) is refused before anything is allocated, so
 * the memory a file costs is bounded by its size. Text compresses 3-10x; a page of one
 * repeated value can exceed 1024x, and stays readable up to 64 MiB. */
#define PARQUET_FREE_PAGE ((size_t)64 << 20)
#define PARQUET_MAX_RATIO 1024
/* Nor a page of more values than this (the memory of its levels and indices is bounded). */
#define PARQUET_MAX_PAGE_VALUES (1 << 26)

/* Where the column's values go, in row order: value() for each non-null string (its bytes
 * as stored, not NUL-terminated), null() for each null. A non-zero return from value()
 * stops the read and is returned (with e set). */
typedef struct parquet_sink {
    void *ctx;
    int (*value)(void *ctx, const char *text, size_t n, uint64_t row, tdm_err *e);
    void (*null)(void *ctx, uint64_t row);
} parquet_sink;

/* Reads the column `column` of the Parquet file data[0..n). 0 when every row was given to
 * the sink; a PARQUET_* code with why (cap bytes) saying what and where ("row group 2,
 * page 5: ..."); or the sink's error. */
int parquet_read(const uint8_t *data, size_t n, const char *column, const parquet_sink *s, char *why, size_t cap,
                 tdm_err *e);

/* The RLE / bit-packed hybrid encoding (definition levels, dictionary indices): `count`
 * values of `width` bits (0..32) from p[0..n) into out[]. NULL when all were read; else
 * what is wrong (a run past the page, a width above 32, an empty run), never a read past
 * p[n) whatever the run headers say. Public for its tests (test_parquet). */
const char *parquet_hybrid(const uint8_t *p, size_t n, int width, uint32_t *out, size_t count);

#endif
