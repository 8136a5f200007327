/* fuzz_s3answer.c — libFuzzer target for what the S3 client reads out of an endpoint's
 * answer before it reaches a message or a key: the XML reads (storage/s3_xml.h) and the
 * redaction of server text (s3_config_redact). Built and run by `make fuzz` (target
 * "s3answer"). The input is a secret and an answer: its first byte picks the secret's
 * length (0..255, bytes 1..), the rest is the answer. Properties beyond "no crash":
 *   - s3_xml_first gives 1 with a NUL-terminated value shorter than its buffer, or 0 and
 *     never part of a value;
 *   - s3_xml_each hands out texts of at most 4096 bytes;
 *   - a value read escapes and decodes back to itself;
 *   - redacted with the secret as the session token, the answer holds no run of 12 of the
 *     secret's characters (when the secret has 16 or more), no control or non-ASCII byte,
 *     and still fits the buffer it came in. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3_config.h"
#include "storage/s3_xml.h"

static int each_len(void *ctx, const char *text) {
    (void)ctx;
    if (strlen(text) > 4096) abort();
    return 0;
}

static void check_value(const char *xml, size_t n, const char *tag) {
    char out[129];
    memset(out, 'X', sizeof out);
    out[0] = '\0'; /* as callers start it: untouched when the element is missing */
    int got = s3_xml_first(xml, n, tag, out, sizeof out);
    if (!got && out[0]) abort();                 /* a half value left behind */
    if (got && strnlen(out, sizeof out) == sizeof out) abort(); /* not terminated */
    if (got) {                       /* it escapes and decodes back to itself */
        char esc[129 * 6 + 1], back[129];
        if (s3_xml_escape(out, esc, sizeof esc) != 0) abort();
        if (s3_xml_decode(esc, strlen(esc), back, sizeof back) != 0 || strcmp(back, out)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t sl = data[0];
    if (sl > size - 1) sl = size - 1;
    static s3_config c; /* 9 KiB of buffers */
    memset(&c, 0, sizeof c);
    /* printable, as real secrets (base64) are, and without '?', '[' or ']': the text's
     * control bytes become '?' and the mark is "[redacted]", so a secret holding those
     * could match what redaction itself wrote */
    for (size_t i = 0; i < sl; i++) { /* printable bytes kept as they are: a seed's echo matches */
        unsigned char b = data[1 + i];
        char ch = b >= 0x21 && b <= 0x7e ? (char)b : (char)(0x21 + b % 94);
        c.session_token[i] = ch == '?' || ch == '[' || ch == ']' ? 'A' : ch;
    }
    const char *xml = (const char *)data + 1 + sl;
    size_t n = size - 1 - sl;
    static const char *tags[] = {"Code", "Message", "Key", "Region", "ETag", "UploadId", "NextContinuationToken"};
    for (size_t t = 0; t < sizeof tags / sizeof *tags; t++) check_value(xml, n, tags[t]);
    s3_xml_each(xml, n, "Key", each_len, NULL);
    /* the answer as text (to its first NUL, at most 1023 bytes, as the client's buffers) */
    char text[1024];
    size_t tl = strnlen(xml, n < sizeof text - 1 ? n : sizeof text - 1);
    memcpy(text, xml, tl);
    text[tl] = '\0';
    s3_config_redact(&c, NULL, text, sizeof text);
    size_t rl = strlen(text);
    if (rl >= sizeof text) abort(); /* a whole secret of 8 or 9 characters grows into the mark */
    for (size_t i = 0; i < rl; i++)
        if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f) abort();
    /* no run of 12 of the secret's characters left */
    if (sl >= 16)
        for (size_t i = 0; i + 12 <= rl; i++)
            if (memmem(c.session_token, sl, text + i, 12)) abort();
    return 0;
}
