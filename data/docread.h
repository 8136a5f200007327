/* docread.h — the documents of one input file of `tandem prep`.
 *
 * The name decides how a file is read (suffixes in any case): a ".gz" suffix is gunzipped (zlib; concatenated
 * members too), ".zst" decompressed (libzstd; concatenated frames too), and the name
 * without that suffix decides the format:
 *   - ".jsonl": one JSON object per line, the document is its string field `field`
 *     (data/jsonl.h); lines holding only whitespace are passed over; CRLF line ends are
 *     fine. A line is held in memory whole, with its decoded text: one longer than
 *     DOCREAD_RECORD_MAX is left out (TEXTSRC_TOO_LONG, with its line), so that a small
 *     compressed file cannot exhaust memory with one huge record.
 *   - ".json": one object, or an array of objects, each a record as above. The file is
 *     read into memory whole and checked before any record is taken: a syntax error
 *     anywhere drops the whole file (TEXTSRC_BAD_JSON) rather than half of it; a file
 *     (decompressed) past DOCREAD_JSON_MAX is left out (TEXTSRC_TOO_LONG).
 *   - anything else: plain text, the whole file one document, bytes kept as they are
 *     (CRLF stays CRLF). Binary rule: a NUL byte, or bytes that are not UTF-8, within the
 *     first TEXTSRC_SNIFF_BYTES of the (decompressed) file make it binary (TEXTSRC_BINARY,
 *     dropped; a multi-byte character cut by the end of that window does not count);
 *     invalid UTF-8 later drops the file as TEXTSRC_BAD_UTF8 with its line, a NUL later
 *     as TEXTSRC_BINARY with its line.
 * Per record: invalid UTF-8 in the text field, a missing field, an empty text, a line
 * that is not JSON are reported with their line and dropped; the file goes on.
 * Per file: a file that cannot be opened or read (TEXTSRC_UNREADABLE) or a compressed
 * stream that is corrupt or truncated (TEXTSRC_CORRUPT) drops the whole file, including
 * documents already passed on: `*dropped` tells the caller to take them back.
 */
#ifndef TANDEM_DATA_DOCREAD_H
#define TANDEM_DATA_DOCREAD_H

#include <stddef.h>
#include <stdint.h>

#include "data/textsrc.h"
#include "util/err.h"

#define TEXTSRC_SNIFF_BYTES 8192
#define DOCREAD_RECORD_MAX ((size_t)256 << 20) /* bytes of a .jsonl line */
#define DOCREAD_RECORD_MAX_TEXT "256 MiB"
#define DOCREAD_JSON_MAX ((size_t)1 << 30) /* bytes of a .json file, decompressed */
#define DOCREAD_JSON_MAX_TEXT "1 GiB"
/* The largest zstd window decoded (2^27 = 128 MiB, zstd's own default limit): a frame
 * that needs more (`zstd --long=28` and up, on a large input) is left out as
 * TEXTSRC_UNSUPPORTED, saying the window it needs. */
#define DOCREAD_ZSTD_WINDOW_LOG 27

/* Where the documents go. text() gets a document's text in pieces (all valid UTF-8
 * together; a piece may end inside a character), end() closes it: keep 1 for a document,
 * 0 to drop the pieces given since the last end(). A non-zero return from either stops
 * the read and is returned (with e set). issue() may be NULL; progress(), if not NULL,
 * gets the count of (decompressed) bytes read since its last call. */
typedef struct docread_sink {
    void *ctx;
    int (*text)(void *ctx, const char *p, size_t n, tdm_err *e);
    int (*end)(void *ctx, int keep, tdm_err *e);
    textsrc_issues issues;
    void (*progress)(void *ctx, uint64_t bytes);
} docread_sink;

/* Reads the documents of f, with `field` the JSON text key. Returns 0 or the sink's
 * error; ERR_USAGE when f is no longer the file that was listed (another device, inode
 * or size: the plan made from it would not hold); ERR_INTERNAL for out of memory (the
 * message names the file). Sets
 * *dropped when the whole file was left out after documents had been passed on. */
int docread_file(const textsrc_file *f, const char *field, const docread_sink *s,
                 int *dropped, tdm_err *e);

#endif
