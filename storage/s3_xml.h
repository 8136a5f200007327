/* s3_xml.h — the few XML reads the S3 client needs (ListObjectsV2 keys and continuation
 * token, multipart upload ids, error codes). S3 answers are flat, so a tag-scanner with
 * entity decoding suffices; it never allocates more than the text it returns and treats
 * malformed input as "not found". */
#ifndef TANDEM_STORAGE_S3_XML_H
#define TANDEM_STORAGE_S3_XML_H

#include <stddef.h>

/* Copies the decoded text of the first <tag>...</tag> into out (NUL-terminated).
 * 1 when found and it fit; 0 otherwise: out untouched when there is no such element (a
 * caller's default stands), "" when the value did not fit or held a bad entity (never
 * half a value). */
int s3_xml_first(const char *xml, size_t n, const char *tag, char *out, size_t cap);

/* Calls fn(ctx, text) for the decoded text of every <tag>...</tag> in order; stops and
 * returns fn's value when it is non-zero. A text longer than 4096 bytes or with a bad
 * entity makes it return -1 (S3 keys are at most 1024 bytes). */
int s3_xml_each(const char *xml, size_t n, const char *tag, int (*fn)(void *ctx, const char *text),
                void *ctx);

/* Decodes XML entities of src[0..n) into out; -1 if it does not fit or an entity is bad. */
int s3_xml_decode(const char *src, size_t n, char *out, size_t cap);

/* Escapes text for an XML element (&, <, >, ", '); -1 if it does not fit. */
int s3_xml_escape(const char *src, char *out, size_t cap);

#endif
