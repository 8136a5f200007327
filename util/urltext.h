/* urltext.h — one rule shared by the store URL parser (storage/url.c) and the config
 * checks of store and data.mixture_file (config/config_keys.c), which cannot link the
 * storage layer. */
#ifndef TANDEM_UTIL_URLTEXT_H
#define TANDEM_UTIL_URLTEXT_H

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The length of the word a URL scheme would be at the start of text (letters, digits,
 * '+', '-', '.'; 0: none), whatever follows it: the scans below judge the ':' and slashes
 * after it, which a mistyped scheme may lack. */
static inline size_t url_scheme_word_len(const char *text, size_t n) {
    size_t q = 0;
    while (q < n && (isalnum((unsigned char)text[q]) || strchr("+-.", text[q]))) q++;
    return q;
}

/* Whether the authority of a URL (the text after "://", up to its first '/') holds user
 * info: an '@', or a ':' — no bucket name and no local host holds either, and a secret key
 * may itself hold '/' ("s3://AKID:abc/def@bucket"), so '@' alone is not enough. */
static inline int url_authority_has_userinfo(const char *auth) {
    size_t n = strcspn(auth, "/");
    return memchr(auth, '@', n) != NULL || memchr(auth, ':', n) != NULL;
}

/* Whether text[0..n) is shaped like user info in any spelling: a ':' in its authority —
 * its first segment, after a scheme and its slashes if it has one ("s3://", "s3:/",
 * "s3///", "http:\\", or a scheme whose ':' was left out: "s3//", "https//") — and an
 * '@' after that ':' ("s3://K:S@b", "s3:/K:S@b", "s3//K:S@b", "http:\\u:S@h", "K:S@b",
 * "s3:K:S@b", "u:S@proxy:3128"; a secret key may itself hold '/': "s3://AKID:a/b@bkt").
 * The check of the authority above needs "://", and a mistyped scheme (or none) carried
 * the secret past it into errors, stores and rendered jobs. A ':' and an '@' further on
 * in a path ("/scratch/12:00/lr@3", "s3://bkt/exp:v2/run@3", "/opt/a:/home/me@corp") are
 * no password, nor is a ':' or an '@' alone, nor an image digest ("reg:5000/x@sha256:HEX"). */
static inline int url_text_has_userinfo(const char *text, size_t n) {
    size_t p = 0, q = url_scheme_word_len(text, n);
    if (q > 0 && q + 1 < n && text[q] == ':' && (text[q + 1] == '/' || text[q + 1] == '\\')) {
        p = q + 1; /* "scheme:" and slashes */
    } else if (q > 0 && q + 1 < n && (text[q] == '/' || text[q] == '\\') && (text[q + 1] == '/' || text[q + 1] == '\\')) {
        p = q; /* "scheme//": the ':' left out */
    }
    while (p < n && (text[p] == '/' || text[p] == '\\') && p > 0) p++;
    size_t end = p;
    while (end < n && text[end] != '/' && text[end] != '\\') end++;
    const char *colon = memchr(text + p, ':', end - p);
    if (!colon) return 0;
    for (const char *at = colon; (at = memchr(at, '@', n - (size_t)(at - text))); at++) {
        size_t left = n - (size_t)(at + 1 - text);
        int digest = left > 7 && (!strncmp(at + 1, "sha256:", 7) || !strncmp(at + 1, "sha384:", 7) ||
                                  !strncmp(at + 1, "sha512:", 7));
        if (!digest) return 1;
    }
    return 0;
}

/* text with what reads as user info replaced by "***" (out, cap bytes, always
 * terminated): a leading scheme and its slashes stay ("s3:/" or "http://", then "***@host"),
 * everything from there through the last '@' that follows a ':' goes — a password may
 * hold '/' or '@', so more is cut rather than less. Text without user info is copied as
 * is. For errors that show what was given without repeating a secret. */
static inline void url_text_mask_userinfo(const char *text, char *out, size_t cap) {
    if (!cap) return;
    size_t n = strlen(text);
    const char *colon = memchr(text, ':', n), *at = NULL;
    for (const char *p = colon; p && (p = memchr(p, '@', n - (size_t)(p - text))); p++) at = p;
    if (!colon || !at || !url_text_has_userinfo(text, n)) {
        snprintf(out, cap, "%s", text);
        return;
    }
    size_t keep = url_scheme_word_len(text, n); /* "scheme:" followed by at least one '/' or '\\' */
    if (keep && keep < n && text[keep] == ':' && (text[keep + 1] == '/' || text[keep + 1] == '\\')) {
        keep++;
        while (text[keep] == '/' || text[keep] == '\\') keep++;
    } else {
        keep = 0;
    }
    if (text + keep > at) keep = 0;
    snprintf(out, cap, "%.*s***%s", (int)keep, text, at);
}

#endif
