/* url.c — store URLs; see url.h. */
#include "storage/url.h"
#include "util/urltext.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Length of the scheme at the start of `s` (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-"
 * / "." ) then ':'), 0 when there is none. */
static size_t scheme_len(const char *s) {
    if (!isalpha((unsigned char)s[0])) return 0;
    size_t n = url_scheme_word_len(s, strlen(s));
    return s[n] == ':' ? n : 0;
}

static int put(store_url_parts *out, int kind, const char *text, tdm_err *e, const char *url) {
    if (strlen(text) >= sizeof out->canon)
        return err_set(e, ERR_USAGE, "store URL %.200s...: too long", url);
    out->kind = kind;
    snprintf(out->canon, sizeof out->canon, "%s", text);
    out->path = kind == STORE_URL_FILE ? out->canon : NULL;
    return 0;
}

/* Whether `host` names this machine: localhost, or its host name. */
static int this_host(const char *host, size_t n) {
    char name[256];
    if (n == 9 && strncasecmp(host, "localhost", 9) == 0) return 1;
    if (gethostname(name, sizeof name) != 0) return 0;
    name[sizeof name - 1] = '\0';
    return strlen(name) == n && strncasecmp(host, name, n) == 0;
}

static int parse_file(const char *url, const char *rest, store_url_parts *out, tdm_err *e) {
    if (strncmp(rest, "//", 2) != 0) {
        if (rest[0] == '/') return put(out, STORE_URL_FILE, rest, e, url); /* file:/ABS */
        return err_set(e, ERR_USAGE,
                       "store URL %s is not a file URL (file:///ABS for an absolute path, "
                       "file://./REL for one relative to here): did you mean file://./%s?",
                       url, rest);
    }
    const char *auth = rest + 2, *slash = strchr(auth, '/');
    size_t alen = slash ? (size_t)(slash - auth) : strlen(auth);
    if (alen == 0) { /* file:///ABS */
        if (!slash || !slash[1])
            return err_set(e, ERR_USAGE, "store URL %s has no path (use file:///abs/path or "
                                         "file://./rel/path)", url);
        return put(out, STORE_URL_FILE, slash, e, url);
    }
    if ((alen == 1 && auth[0] == '.') || (alen == 2 && auth[0] == '.' && auth[1] == '.'))
        return put(out, STORE_URL_FILE, auth, e, url); /* file://./REL, file://../REL */
    if (this_host(auth, alen)) {
        if (!slash || !slash[1])
            return err_set(e, ERR_USAGE, "store URL %s has no path after the host", url);
        return put(out, STORE_URL_FILE, slash, e, url);
    }
    return err_set(e, ERR_USAGE,
                   "store URL %s names the host '%.*s' (RFC 8089: file://HOST/PATH), and tandem's "
                   "file stores are local: did you mean file://./%s (relative to here) or "
                   "file:///%s (absolute)? (or an s3:// store)",
                   url, (int)alen, auth, auth, auth);
}

static int parse_s3(const char *url, const char *rest, store_url_parts *out, tdm_err *e) {
    if (strncmp(rest, "//", 2) != 0) {
        while (*rest == '/') rest++;
        return err_set(e, ERR_USAGE, "store URL %s is not an S3 URL: did you mean s3://%s?", url,
                       *rest ? rest : "BUCKET/PREFIX");
    }
    const char *bucket = rest + 2;
    if (!*bucket || *bucket == '/')
        return err_set(e, ERR_USAGE, "store URL %s names no bucket (use s3://BUCKET/PREFIX)", url);
    char canon[4200];
    if ((size_t)snprintf(canon, sizeof canon, "s3://%s", bucket) >= sizeof canon)
        return err_set(e, ERR_USAGE, "store URL %.200s...: too long", url);
    return put(out, STORE_URL_S3, canon, e, url);
}

int store_url_parse(const char *url, store_url_parts *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    if (!url || !*url) return err_set(e, ERR_USAGE, "empty store URL (use file:///path or a directory path)");
    /* a control character is no part of a name anyone meant: most often the CR of a script
     * saved with Windows line ends, or the line end a YAML block scalar keeps; taken as is,
     * the run went to a folder whose name shows as the one meant, and no later command
     * found it */
    for (size_t i = 0; url[i]; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c >= 0x20 && c != 0x7f) continue;
        char shown[208];
        size_t k = 0;
        for (; url[k] && k < 200; k++) shown[k] = (unsigned char)url[k] < 0x20 || url[k] == 0x7f ? '?' : url[k];
        shown[k] = '\0';
        return err_set(e, ERR_USAGE, "store URL %s%s holds a control character (0x%02x at byte %zu%s): remove it",
                       shown, url[k] ? "..." : "", c, i,
                       c == '\r' ? ": a script saved with Windows line ends?" : c == '\n' ? ": a line end" : "");
    }
    /* user info in any spelling ("s3:/K:S@b", "s3//K:S@b", "K:S@b", a path "runs/K:S@b"):
     * refused before any reading of the URL, whose errors and whose store (RUN pins the
     * URL, a file store is named after it) would carry the secret; shown masked */
    if (url_text_has_userinfo(url, strlen(url))) {
        char shown[240];
        url_text_mask_userinfo(url, shown, sizeof shown);
        return err_set(e, ERR_USAGE, "store URL %s holds user info (a ':' before an '@': user:secret@), "
                       "which is refused and not repeated here: credentials never go into a store "
                       "or a URL; tandem takes them from the environment, a profile or the rest of "
                       "the credential chain (docs/running.md)", shown);
    }
    size_t n = scheme_len(url);
    /* "s3//BUCKET/PREFIX" (the ':' left out) reads as the relative path ./s3/BUCKET/...: a
     * local store where an S3 one was meant, the run's checkpoints on the wrong machine */
    if (n == 0 && !strncasecmp(url, "s3//", 4)) {
        const char *b = url + 4;
        while (*b == '/') b++;
        return err_set(e, ERR_USAGE, "store URL %s is not an S3 URL (the ':' is missing): did you mean "
                       "s3://%s? (a directory called s3 is written ./s3/...)", url, *b ? b : "BUCKET/PREFIX");
    }
    if (n == 0) return put(out, STORE_URL_FILE, url, e, url); /* a directory path */
    /* user info (util/urltext.h), said without repeating any of the URL */
    if (!strncmp(url + n, "://", 3) && url_authority_has_userinfo(url + n + 3))
        return err_set(e, ERR_USAGE, "store URL %.*s://... holds user info (user:secret@) or a ':' "
                       "before its first '/', which is refused and not repeated here: credentials "
                       "never go into a URL; tandem takes them from the environment, a profile or "
                       "the rest of the credential chain (docs/running.md)",
                       (int)(n < 16 ? n : 16), url);
    const char *rest = url + n + 1;
    if (n == 4 && strncasecmp(url, "file", 4) == 0) return parse_file(url, rest, out, e);
    if (n == 2 && strncasecmp(url, "s3", 2) == 0) return parse_s3(url, rest, out, e);
    if (strncmp(rest, "//", 2) == 0)
        return err_set(e, ERR_USAGE,
                       "store URL %s: unsupported scheme '%.*s://' (tandem's stores are s3://BUCKET/PREFIX "
                       "and local directories: file:///ABS, file://./REL or a path)",
                       url, (int)n, url);
    return err_set(e, ERR_USAGE,
                   "store URL %s: '%.*s:' reads as a URL scheme, and tandem knows s3:// and file:// "
                   "only: a directory of that name is written ./%s",
                   url, (int)n, url, url);
}
