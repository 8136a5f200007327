/* url.h — what a store URL names: a local directory or an S3 prefix (open.c opens it).
 *
 *   s3://BUCKET[/PREFIX]      an S3 prefix (the scheme in any case: S3:// is s3://)
 *   file:///ABS, file:/ABS    a local absolute path (RFC 8089; file://localhost/ABS and
 *                             file://THIS-HOST/ABS too)
 *   file://./REL, file://../REL   a path relative to the working directory (tandem's
 *                             form: RFC 8089 has none)
 *   PATH                      a directory path as is, relative or absolute
 *
 * Refused, with what was probably meant: file://HOST/PATH for another host (tandem's file
 * stores are local; "file://runs/x" is host "runs", not ./runs/x), file:REL (no RFC
 * form), s3:/BUCKET, s3:BUCKET and s3//BUCKET, s3:// without a bucket, and any other
 * scheme — a path that starts with "name:" is read as a scheme, not as a directory called
 * "name:...". Refused without being repeated (shown with "***" for it): anything holding
 * user info in any spelling, a ':' before an '@' (util/urltext.h), a local path too.
 * Percent-escapes are not decoded: a path is the text as written.
 */
#ifndef TANDEM_STORAGE_URL_H
#define TANDEM_STORAGE_URL_H

#include <stddef.h>

#include "util/err.h"

enum { STORE_URL_FILE, STORE_URL_S3 };

typedef struct store_url_parts {
    int kind;         /* STORE_URL_FILE or STORE_URL_S3 */
    char canon[4200]; /* the URL as the backends read it: s3://..., or the file store's path */
    const char *path; /* kind FILE: the local path (in canon) */
} store_url_parts;

/* Parses `url` into *out. ERR_USAGE naming the URL and, where one is likely, the URL that
 * was meant ("did you mean file://./runs/x or file:///runs/x?"). */
int store_url_parse(const char *url, store_url_parts *out, tdm_err *e);

#endif
