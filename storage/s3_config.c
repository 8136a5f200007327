/* s3_config.c — an s3:// store's settings: the wipe of their secrets, no core dumps while
 * a process holds one; see s3_config.h (s3_resolve.c fills the struct). */
#include "storage/s3_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "util/secretname.h"

void s3_config_no_core_dumps(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
}

extern char **environ;

/* Every variable whose name says it holds a secret (util/secretname.h), not only the two
 * AWS keys: the container authorization token (AWS_CONTAINER_AUTHORIZATION_TOKEN),
 * AWS_SECURITY_TOKEN, a password or API key set for some other tool. A process that never
 * opens an S3 store (a file-store run, manifest, prep) still holds its environment, and a
 * core dump would hold it too. */
int s3_config_env_has_secret(void) {
    for (char **v = environ; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        if (eq && eq[1] && secret_env_name(*v, (size_t)(eq - *v))) return 1; /* empty: nothing to keep */
    }
    return 0;
}

/* Zeroes p[0..n) in a way the compiler keeps (a plain memset before free may be dropped). */
static void wipe_buf(char *p, size_t n) {
    volatile char *v = p;
    for (size_t i = 0; i < n; i++) v[i] = 0;
}

void s3_config_wipe(s3_config *c) {
    volatile char *p;
    p = c->src_sk;
    for (size_t i = 0; i < sizeof c->src_sk; i++) p[i] = 0;
    p = c->src_tok;
    for (size_t i = 0; i < sizeof c->src_tok; i++) p[i] = 0;
    p = c->secret_key;
    for (size_t i = 0; i < sizeof c->secret_key; i++) p[i] = 0;
    p = c->session_token;
    for (size_t i = 0; i < sizeof c->session_token; i++) p[i] = 0;
}

/* A piece of a secret as long as this is redacted wherever it stands: an endpoint may
 * echo any part of a session token it was sent (its middle as an error code, the rest cut
 * off by a buffer), and 12 characters of a base64 secret do not occur in a message by
 * chance. Longer than "[redacted]", so a redaction never lengthens the text. */
#define REDACT_RUN 12

/* The length of the longest prefix of text (of tl bytes) that occurs in the secret s (sl
 * bytes), if it is at least REDACT_RUN; else 0. A prefix that occurs makes every shorter
 * one occur, so the length is found by bisection. */
static size_t secret_run(const char *text, size_t tl, const char *s, size_t sl) {
    if (tl < REDACT_RUN || sl < REDACT_RUN || !memmem(s, sl, text, REDACT_RUN)) return 0;
    size_t lo = REDACT_RUN, hi = tl < sl ? tl : sl; /* lo occurs; the answer is in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (memmem(s, sl, text, mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The value of the n hex digits at p (n <= 6), or -1 when one is not a hex digit. */
static long hex_value(const char *p, size_t n) {
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hex_digit(p[i]);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The escape at text[0..tl) as a URL, JSON or XML writer would have made it of one ASCII
 * character: %XX, \/ and \uXXXX, &#N; and &#xN;. Returns its length (the character in
 * *ch), or 0 when none starts there. An endpoint may echo what it was sent escaped (a
 * token percent-encoded in a query, a JSON body's "\/"): the escape must not hide it. */
static size_t escape_at(const char *text, size_t tl, char *ch) {
    long v = -1;
    size_t n = 0;
    if (tl >= 3 && text[0] == '%') v = hex_value(text + 1, 2), n = 3;
    else if (tl >= 2 && text[0] == '\\' && text[1] == '/') v = '/', n = 2;
    else if (tl >= 6 && text[0] == '\\' && text[1] == 'u') v = hex_value(text + 2, 4), n = 6;
    else if (tl >= 4 && text[0] == '&' && text[1] == '#') {
        int x = text[2] == 'x' || text[2] == 'X';
        size_t i = 2 + (size_t)x, d = 0;
        for (v = 0; i < tl && d < 6 && (x ? hex_digit(text[i]) >= 0 : text[i] >= '0' && text[i] <= '9'); i++, d++)
            v = v * (x ? 16 : 10) + (x ? hex_digit(text[i]) : text[i] - '0');
        if (!d || i >= tl || text[i] != ';') return 0;
        n = i + 1;
    }
    if (v <= 0 || v >= 0x7f) return 0; /* the secrets' alphabets are ASCII */
    *ch = (char)v;
    return n;
}

/* Marks in hit[] every character of text (tl bytes) that lies in a run of REDACT_RUN or
 * more characters of secret s (sl bytes): as the text is, and as it reads with its escapes
 * decoded (escape_at, the decoded character folded to lower case: the caller passes text
 * and s folded), where a run covers the escapes it was decoded from. whole: s is too
 * short for runs (8 to 15 characters, found whole in the text as it is by the caller):
 * only its whole escaped occurrences. */
static void mark_runs(const char *text, size_t tl, const char *s, size_t sl, int whole, unsigned char *hit,
                      char *dec, size_t *from) {
    for (size_t at = 0; !whole && at + REDACT_RUN <= tl; at++) {
        size_t run = secret_run(text + at, tl - at, s, sl);
        for (size_t k = 0; k < run; k++) hit[at + k] = 1;
    }
    if (!tl) return; /* nothing to decode (and no buffers for it) */
    size_t dl = 0; /* dec[i] came from text[from[i] .. from[i + 1]) */
    for (size_t r = 0; r < tl; dl++) {
        size_t n = escape_at(text + r, tl - r, &dec[dl]);
        if (!n) dec[dl] = text[r], n = 1;
        dec[dl] = (char)tolower((unsigned char)dec[dl]);
        from[dl] = r;
        r += n;
    }
    from[dl] = tl;
    if (dl == tl) return; /* no escape: the text as it is, above */
    for (size_t at = 0; whole && at + sl <= dl; at++)
        if (!memcmp(dec + at, s, sl))
            for (size_t k = from[at]; k < from[at + sl]; k++) hit[k] = 1;
    for (size_t at = 0; !whole && at + REDACT_RUN <= dl; at++) {
        size_t run = secret_run(dec + at, dl - at, s, sl);
        if (run)
            for (size_t k = from[at]; k < from[at + run]; k++) hit[k] = 1;
    }
}

void s3_config_redact(const s3_config *c, const char *extra, char *text, size_t cap) {
    static const char mark[] = "[redacted]";
    const size_t ml = sizeof mark - 1;
    const char *secrets[] = {c ? c->secret_key : "", c ? c->session_token : "", c ? c->src_sk : "",
                             c ? c->src_tok : "", extra ? extra : ""};
    /* a whole secret too short for the runs below (8 to 15 characters; a longer one is a
     * run of itself) */
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++) {
        size_t sl = strlen(secrets[i]);
        if (sl < 8 || sl >= 16) continue; /* shorter: no secret is, and it would match anywhere */
        for (char *p = text; (p = strcasestr(p, secrets[i]));) { /* a case-changed copy too */
            size_t rest = strlen(p + sl);
            if ((size_t)(p - text) + ml + rest + 1 > cap) { /* no room: cut the text there */
                *p = '\0';
                break;
            }
            memmove(p + ml, p + sl, rest + 1);
            memcpy(p, mark, ml);
            p += ml;
        }
    }
    /* any run of REDACT_RUN or more characters of a longer secret, wherever it stands: a
     * copy cut short by the caller's buffer (a session token is 600-1500 characters, the
     * buffers 128-400), or a piece of it that an endpoint chose to echo. Every character
     * that lies in such a run is marked first (runs may overlap, and a longer one may start
     * inside another), then each marked stretch becomes one mark. */
    /* The text and each secret are compared folded to lower case, and each secret also as
     * its hex encoding (either case): an endpoint may echo what it was sent upper-cased or
     * hex-encoded ("ZQXSESSIONTOKEN..." or "5a51..."), and a 12-character run of either
     * occurs in a message by chance no more than the secret's own. Folding keeps every
     * offset, so the marks fall on the text as it is; the work stays that of the runs
     * above, three passes per secret instead of one. */
    size_t tl = strlen(text);
    unsigned char *hit = tl ? calloc(tl, 1) : NULL;
    char *dec = tl ? malloc(tl) : NULL, *low = tl ? malloc(tl) : NULL;
    size_t *from = tl ? malloc((tl + 1) * sizeof *from) : NULL;
    if (tl && (!hit || !dec || !from || !low)) { /* no memory to look: nothing of the text is shown */
        text[0] = '\0';
        free(hit), free(dec), free(from), free(low);
        return;
    }
    for (size_t k = 0; k < tl; k++) low[k] = (char)tolower((unsigned char)text[k]);
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++) {
        size_t sl = strlen(secrets[i]);
        if (sl < 8) continue;
        char *fold = malloc(sl), *hex = malloc(2 * sl);
        if (!fold || !hex) { /* no memory to look: nothing of the text is shown */
            free(fold), free(hex);
            memset(hit, 1, tl);
            break;
        }
        static const char digits[] = "0123456789abcdef";
        for (size_t k = 0; k < sl; k++) {
            unsigned char ch = (unsigned char)secrets[i][k];
            fold[k] = (char)tolower(ch);
            hex[2 * k] = digits[ch >> 4], hex[2 * k + 1] = digits[ch & 15];
        }
        mark_runs(low, tl, fold, sl, sl < 16, hit, dec, from);
        mark_runs(low, tl, hex, 2 * sl, 0, hit, dec, from);
        wipe_buf(fold, sl); /* copies of a secret: wiped like the secret itself */
        wipe_buf(hex, 2 * sl);
        free(fold);
        free(hex);
    }
    free(dec);
    free(low);
    free(from);
    /* each marked stretch becomes one mark, written into a copy: a short secret's escaped
     * occurrence may be shorter than the mark ("\/" adds one character), and the text cut
     * at cap where it grows past it */
    char *out = tl ? malloc(tl * ml + 1) : NULL;
    size_t w = 0;
    for (size_t r = 0; out && r < tl;) {
        if (!hit[r]) {
            out[w++] = text[r++];
            continue;
        }
        while (r < tl && hit[r]) r++;
        memcpy(out + w, mark, ml);
        w += ml;
    }
    if (tl && !out) w = 0; /* no memory: nothing of the text is shown */
    if (tl && cap) {
        if (w > cap - 1) w = cap - 1;
        if (w) memcpy(text, out, w);
        text[w] = '\0';
    }
    free(out);
    free(hit);
    for (unsigned char *p = (unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) *p = '?'; /* no escape sequences or line ends into a log */
}
