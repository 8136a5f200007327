/* test_sigv4.c — AWS Signature Version 4: AWS's official test suite (every case, header
 * signing and presigned URLs, byte for byte), the worked S3 examples of the AWS docs,
 * URI encoding, S3 path handling, and that no credential leaks into an error.
 *
 * The suite lives outside the repository: $TANDEM_SHARED/aws-sigv4-test-suite, else
 * $TANDEM_ROOT/../shared/aws-sigv4-test-suite, else ../shared/aws-sigv4-test-suite.
 * Not finding it is a failure, never a silent pass. */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include "storage/sha256.h"
#include "storage/sigv4.h"
#include "tests/test.h"

/* ---- small helpers --------------------------------------------------------------- */

/* Whole file, NUL-terminated (binary-safe length in *len); NULL if unreadable. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    if (!p) abort();
    for (;;) {
        if (n + 1 >= cap && !(p = realloc(p, cap *= 2))) abort();
        size_t got = fread(p + n, 1, cap - n - 1, f);
        if (!got) break;
        n += got;
    }
    fclose(f);
    p[n] = '\0';
    if (len) *len = n;
    return p;
}

static char *xstrdup(const char *s) {
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

/* A growable string for building expected texts. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        if (!(b->p = realloc(b->p, b->cap))) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* ---- a tiny JSON reader for context.json ----------------------------------------- */

/* The flat facts of a case. Keys are matched by their own name at any depth, which is
 * all context.json needs (its only nesting is "credentials"). */
typedef struct vcontext {
    char access[128], secret[128], token[2048], region[64], service[64], timestamp[64];
    int has_token, normalize, sign_body, omit_token;
    long expires;
} vcontext;

static void json_ws(const char **s) {
    while (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r') (*s)++;
}

/* Parses a JSON string at *s into out[cap] (UTF-8; \uXXXX in the BMP). */
static int json_string(const char **s, char *out, size_t cap) {
    if (**s != '"') return -1;
    (*s)++;
    size_t n = 0;
    while (**s && **s != '"') {
        unsigned cp = (unsigned char)**s;
        if (cp == '\\') {
            (*s)++;
            char c = **s;
            if (!c) return -1;
            (*s)++;
            switch (c) {
            case 'n': cp = '\n'; break;
            case 't': cp = '\t'; break;
            case 'r': cp = '\r'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'u':
                cp = 0;
                for (int i = 0; i < 4; i++, (*s)++) {
                    char h = **s;
                    int v = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
                    if (v < 0) return -1;
                    cp = cp << 4 | (unsigned)v;
                }
                break;
            default: cp = (unsigned char)c; break; /* \" \\ \/ */
            }
        } else {
            (*s)++;
        }
        unsigned char enc[3];
        size_t k;
        if (cp < 0x80) {
            enc[0] = (unsigned char)cp;
            k = 1;
        } else if (cp < 0x800) {
            enc[0] = (unsigned char)(0xC0 | cp >> 6);
            enc[1] = (unsigned char)(0x80 | (cp & 63));
            k = 2;
        } else {
            enc[0] = (unsigned char)(0xE0 | cp >> 12);
            enc[1] = (unsigned char)(0x80 | (cp >> 6 & 63));
            enc[2] = (unsigned char)(0x80 | (cp & 63));
            k = 3;
        }
        if (n + k >= cap) return -1;
        memcpy(out + n, enc, k);
        n += k;
    }
    if (**s != '"') return -1;
    (*s)++;
    out[n] = '\0';
    return 0;
}

static int json_value(const char **s, const char *key, vcontext *c);

static void store_string(vcontext *c, const char *key, const char *v) {
    struct {
        const char *key;
        char *dst;
        size_t cap;
    } map[] = {
        {"access_key_id", c->access, sizeof c->access},
        {"secret_access_key", c->secret, sizeof c->secret},
        {"token", c->token, sizeof c->token},
        {"session_token", c->token, sizeof c->token},
        {"region", c->region, sizeof c->region},
        {"service", c->service, sizeof c->service},
        {"timestamp", c->timestamp, sizeof c->timestamp},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        if (strcmp(key, map[i].key) == 0) {
            snprintf(map[i].dst, map[i].cap, "%s", v);
            if (map[i].dst == c->token) c->has_token = 1;
        }
    }
}

static void store_bool(vcontext *c, const char *key, int v) {
    if (strcmp(key, "normalize") == 0) c->normalize = v;
    if (strcmp(key, "sign_body") == 0) c->sign_body = v;
    if (strcmp(key, "omit_session_token") == 0) c->omit_token = v;
}

static int json_object(const char **s, vcontext *c) {
    (*s)++; /* '{' */
    json_ws(s);
    if (**s == '}') return (*s)++, 0;
    for (;;) {
        char key[64];
        json_ws(s);
        if (json_string(s, key, sizeof key) != 0) return -1;
        json_ws(s);
        if (**s != ':') return -1;
        (*s)++;
        json_ws(s);
        if (json_value(s, key, c) != 0) return -1;
        json_ws(s);
        if (**s == ',') {
            (*s)++;
            continue;
        }
        if (**s != '}') return -1;
        (*s)++;
        return 0;
    }
}

/* Reads one value; strings, booleans and integers under a known key are stored. */
static int json_value(const char **s, const char *key, vcontext *c) {
    json_ws(s);
    if (**s == '{') return json_object(s, c);
    if (**s == '[') {
        (*s)++;
        json_ws(s);
        if (**s == ']') return (*s)++, 0;
        for (;;) {
            if (json_value(s, "", c) != 0) return -1;
            json_ws(s);
            if (**s == ',') {
                (*s)++;
                continue;
            }
            if (**s != ']') return -1;
            (*s)++;
            return 0;
        }
    }
    if (**s == '"') {
        char v[4096];
        if (json_string(s, v, sizeof v) != 0) return -1;
        store_string(c, key, v);
        return 0;
    }
    if (strncmp(*s, "true", 4) == 0) return *s += 4, store_bool(c, key, 1), 0;
    if (strncmp(*s, "false", 5) == 0) return *s += 5, store_bool(c, key, 0), 0;
    if (strncmp(*s, "null", 4) == 0) return *s += 4, 0;
    char *end;
    double d = strtod(*s, &end);
    if (end == *s) return -1;
    if (strcmp(key, "expiration_in_seconds") == 0) c->expires = (long)d;
    *s = end;
    return 0;
}

static int parse_context(const char *text, vcontext *c) {
    memset(c, 0, sizeof *c);
    const char *s = text;
    json_ws(&s);
    if (*s != '{' || json_object(&s, c) != 0) return -1;
    json_ws(&s);
    return *s ? -1 : 0;
}

/* "2015-08-30T12:36:00Z" -> "20150830T123600Z", through sigv4_amz_date on purpose. */
static int iso_to_amz(const char *iso, char out[SIGV4_AMZ_DATE_LEN + 1]) {
    struct tm tm = {0};
    int n = 0;
    if (sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || iso[n] != '\0')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return sigv4_amz_date(timegm(&tm), out);
}

/* ---- request.txt ----------------------------------------------------------------- */

#define MAX_HEADERS 64

typedef struct vrequest {
    char *text;                 /* the file, request line NUL-split */
    char *method, *path, *query, *version;
    sigv4_header h[MAX_HEADERS];
    size_t nh;
    const char *raw_headers;    /* header lines exactly as in the file */
    size_t raw_len;
    const char *body;
    size_t body_len;
} vrequest;

static void free_request(vrequest *r) {
    for (size_t i = 0; i < r->nh; i++) {
        free((char *)r->h[i].name);
        free((char *)r->h[i].value);
    }
    free(r->method);
    free(r->path);
    free(r->query);
    free(r->version);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* Request line "METHOD TARGET VERSION" (the target may hold spaces: split at the first
 * and last), header lines until a blank line (a line starting with a blank continues
 * the previous value, obs-fold, and is unfolded with one space as RFC 7230 says), then
 * the body. Returns -1 on a malformed file. */
static int parse_request(char *text, size_t len, vrequest *r) {
    memset(r, 0, sizeof *r);
    r->text = text;
    char *eol = memchr(text, '\n', len);
    if (!eol) return -1;
    size_t line_len = (size_t)(eol - text);
    if (line_len && text[line_len - 1] == '\r') line_len--;
    char *first = memchr(text, ' ', line_len), *last = NULL;
    for (char *p = text + line_len; p > text; p--)
        if (p[-1] == ' ') {
            last = p - 1;
            break;
        }
    if (!first || last == first) return -1;
    r->method = strndup(text, (size_t)(first - text));
    char *target = strndup(first + 1, (size_t)(last - first - 1));
    r->version = strndup(last + 1, (size_t)(text + line_len - last - 1));
    if (!r->method || !target || !r->version) abort();
    char *q = strchr(target, '?');
    r->query = xstrdup(q ? q + 1 : "");
    if (q) *q = '\0';
    r->path = target;

    const char *p = eol + 1, *end = text + len;
    r->raw_headers = p;
    for (;;) {
        if (p >= end) {
            r->raw_len = (size_t)(end - r->raw_headers);
            r->body = end;
            break;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        if (n && p[n - 1] == '\r') n--;
        if (n == 0) {
            r->raw_len = (size_t)(p - r->raw_headers);
            r->body = nl ? nl + 1 : end;
            break;
        }
        if (p[0] == ' ' || p[0] == '\t') {
            if (!r->nh) return -1;
            size_t i = 0;
            while (i < n && (p[i] == ' ' || p[i] == '\t')) i++;
            const char *old = r->h[r->nh - 1].value;
            size_t ol = strlen(old);
            char *v = malloc(ol + 1 + (n - i) + 1);
            if (!v) abort();
            memcpy(v, old, ol);
            v[ol] = ' ';
            memcpy(v + ol + 1, p + i, n - i);
            v[ol + 1 + n - i] = '\0';
            free((char *)old);
            r->h[r->nh - 1].value = v;
        } else {
            const char *colon = memchr(p, ':', n);
            if (!colon || r->nh == MAX_HEADERS) return -1;
            char *name = strndup(p, (size_t)(colon - p));
            char *value = strndup(colon + 1, n - (size_t)(colon - p) - 1);
            if (!name || !value) abort();
            r->h[r->nh++] = (sigv4_header){name, value};
        }
        p = nl ? nl + 1 : end;
    }
    r->body_len = (size_t)(end - r->body);
    return 0;
}

/* ---- the official suite ---------------------------------------------------------- */

static char suite_dir[4096];
static char suite_tried[8192];

/* Finds the suite; 0 if found (path in suite_dir), -1 with what was tried. */
static int find_suite(void) {
    const char *shared = getenv("TANDEM_SHARED"), *root = getenv("TANDEM_ROOT");
    struct stat st;
    suite_tried[0] = '\0';
    char cand[4096];
    if (shared && *shared) {
        snprintf(cand, sizeof cand, "%s/aws-sigv4-test-suite", shared);
    } else if (root && *root) {
        snprintf(cand, sizeof cand, "%s/../shared/aws-sigv4-test-suite", root);
    } else {
        snprintf(cand, sizeof cand, "../shared/aws-sigv4-test-suite");
    }
    snprintf(suite_tried, sizeof suite_tried, "%s", cand);
    if (stat(cand, &st) != 0 || !S_ISDIR(st.st_mode)) return -1;
    snprintf(suite_dir, sizeof suite_dir, "%s", cand);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Case folders (those with a context.json), sorted; *n set. Caller frees. */
static char **list_cases(size_t *n) {
    *n = 0;
    DIR *d = opendir(suite_dir);
    if (!d) return NULL;
    size_t cap = 64;
    char **v = malloc(cap * sizeof *v);
    if (!v) abort();
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[8192];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/context.json", suite_dir, de->d_name);
        if (stat(path, &st) != 0) continue; /* LICENSE, SOURCE.txt: not cases */
        if (*n == cap && !(v = realloc(v, (cap *= 2) * sizeof *v))) abort();
        v[(*n)++] = xstrdup(de->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static char *case_file(const char *name, const char *file, size_t *len) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s/%s", suite_dir, name, file);
    return slurp(path, len);
}

/* Compares one produced text with the suite's file; prints both on a mismatch. */
static int same_as_file(const char *name, const char *file, const char *got) {
    char *want = case_file(name, file, NULL);
    if (!want) {
        printf("    %s: %s missing\n", name, file);
        return 0;
    }
    int ok = got && strcmp(want, got) == 0;
    if (!ok)
        printf("    %s: %s differs\n    --- want\n%s\n    --- got\n%s\n", name, file, want,
               got ? got : "(null)");
    free(want);
    return ok;
}

enum { CASE_PASS, CASE_SKIP, CASE_FAIL };

/* Signs one case the way its files expect (header signing or presigning) and checks
 * canonical request, string to sign, signature and the whole signed request. */
static int run_case(const char *name, int presign, char *why, size_t why_len) {
    const char *pre = presign ? "query" : "header";
    char f_creq[64], f_sts[64], f_sig[64], f_signed[64];
    snprintf(f_creq, sizeof f_creq, "%s-canonical-request.txt", pre);
    snprintf(f_sts, sizeof f_sts, "%s-string-to-sign.txt", pre);
    snprintf(f_sig, sizeof f_sig, "%s-signature.txt", pre);
    snprintf(f_signed, sizeof f_signed, "%s-signed-request.txt", pre);
    char *probe = case_file(name, f_sig, NULL);
    if (!probe) {
        snprintf(why, why_len, "no %s file in the case", f_sig);
        return CASE_SKIP;
    }
    free(probe);

    size_t clen = 0, rlen = 0;
    char *ctext = case_file(name, "context.json", &clen);
    char *rtext = case_file(name, "request.txt", &rlen);
    vcontext c;
    vrequest r;
    int result = CASE_FAIL;
    memset(&r, 0, sizeof r);
    if (!ctext || parse_context(ctext, &c) != 0) {
        snprintf(why, why_len, "context.json unreadable or not JSON");
        free(rtext);
        goto out;
    }
    if (!rtext || parse_request(rtext, rlen, &r) != 0) {
        snprintf(why, why_len, "request.txt unreadable or malformed");
        if (!r.text) free(rtext);
        goto out;
    }
    char amz[SIGV4_AMZ_DATE_LEN + 1];
    if (iso_to_amz(c.timestamp, amz) != 0) {
        snprintf(why, why_len, "timestamp '%s' not understood", c.timestamp);
        goto out;
    }
    sha256_digest d;
    char body_hex[SHA256_HEX_LEN + 1];
    sha256(r.body, r.body_len, &d);
    sha256_hex(&d, body_hex);
    /* These vectors are for a generic service: the path is encoded (again) and
     * normalised as context.json says. The body hash is the payload hash even when
     * sign_body is false; sign_body only adds x-amz-content-sha256. */
    sigv4_params p = {
        .access_key = c.access,
        .secret_key = c.secret,
        .session_token = c.has_token ? c.token : NULL,
        .region = c.region,
        .service = c.service,
        .amz_date = amz,
        .normalize_path = c.normalize,
        .double_encode_path = 1,
        .content_sha256_header = c.sign_body,
        .omit_session_token = c.omit_token,
    };
    sigv4_request q = {r.method, r.path, r.query, r.h, r.nh, body_hex};
    sigv4_output o;
    tdm_err e = {0};
    int rc = presign ? sigv4_presign(&q, &p, c.expires, &o, &e) : sigv4_sign(&q, &p, &o, &e);
    if (rc != 0) {
        snprintf(why, why_len, "signing failed: %s", e.msg);
        goto out;
    }
    /* The signed request as the suite prints it: the original, with the signer's
     * headers after the original ones (or its parameters after the original query). */
    sbuf s = {0};
    sb_puts(&s, r.method);
    sb_puts(&s, " ");
    sb_puts(&s, r.path);
    if (presign) {
        sb_puts(&s, "?");
        if (*r.query) {
            sb_puts(&s, r.query);
            sb_puts(&s, "&");
        }
        sb_puts(&s, o.query);
    } else if (*r.query) {
        sb_puts(&s, "?");
        sb_puts(&s, r.query);
    }
    sb_puts(&s, " ");
    sb_puts(&s, r.version);
    sb_puts(&s, "\n");
    sb_putn(&s, r.raw_headers, r.raw_len);
    if (r.raw_len && r.raw_headers[r.raw_len - 1] != '\n') sb_puts(&s, "\n");
    for (size_t i = 0; i < o.nheaders; i++) {
        sb_puts(&s, o.headers[i].name);
        sb_puts(&s, ":");
        sb_puts(&s, o.headers[i].value);
        sb_puts(&s, "\n");
    }
    sb_puts(&s, "\n");
    sb_putn(&s, r.body, r.body_len);
    int ok = same_as_file(name, f_creq, o.canonical_request);
    ok &= same_as_file(name, f_sts, o.string_to_sign);
    ok &= same_as_file(name, f_sig, o.signature);
    ok &= same_as_file(name, f_signed, s.p);
    free(s.p);
    sigv4_output_free(&o);
    if (ok) {
        result = CASE_PASS;
    } else {
        snprintf(why, why_len, "output differs from the suite (shown above)");
    }
out:
    free(ctext);
    if (r.text) free_request(&r);
    return result;
}

/* Walks every case folder for one signing form; each case prints a line. */
static void run_suite(int presign) {
    const char *form = presign ? "presign" : "header";
    CHECK(find_suite() == 0,
          "AWS SigV4 test suite not found at '%s' (set TANDEM_SHARED to the folder holding "
          "aws-sigv4-test-suite, or put shared/ beside the repository as CI does)",
          suite_tried);
    size_t n = 0;
    char **cases = list_cases(&n);
    CHECK(cases, "cannot list '%s'", suite_dir);
    if (n == 0) free(cases);
    CHECK(n > 0, "no case folders (with context.json) in '%s'", suite_dir);
    size_t passed = 0, skipped = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        char why[1200] = "";
        int res = run_case(cases[i], presign, why, sizeof why);
        if (res == CASE_PASS) {
            passed++;
            printf("  PASS %-7s %s\n", form, cases[i]);
        } else if (res == CASE_SKIP) {
            skipped++;
            printf("  SKIP %-7s %s: %s\n", form, cases[i], why);
        } else {
            failed++;
            printf("  FAIL %-7s %s: %s\n", form, cases[i], why);
        }
        free(cases[i]);
    }
    free(cases);
    printf("  suite %s (%s): %zu cases, %zu passed, %zu skipped, %zu failed\n", suite_dir,
           form, n, passed, skipped, failed);
    fflush(stdout);
    CHECK(failed == 0, "%zu %s case(s) of the AWS suite failed", failed, form);
    /* Every case applies to tandem's signer; a skip means the suite changed shape. */
    CHECK(skipped == 0, "%zu %s case(s) skipped", skipped, form);
}

static void test_aws_suite_header_signing(void) { run_suite(0); }

static void test_aws_suite_presigned_urls(void) { run_suite(1); }

/* ---- unit checks ----------------------------------------------------------------- */

static void test_uri_encode(void) {
    const char *unres = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    struct {
        const char *in;
        int keep_slash;
        const char *want;
    } cases[] = {
        {unres, 0, unres},
        {"", 0, ""},
        {"a b", 0, "a%20b"},
        {"a+b", 0, "a%2Bb"},
        {"a/b/c", 1, "a/b/c"},
        {"a/b/c", 0, "a%2Fb%2Fc"},
        {"!*'();:@&=+$,?#[]%", 0, "%21%2A%27%28%29%3B%3A%40%26%3D%2B%24%2C%3F%23%5B%5D%25"},
        {"\xc3\xa9\xe1\x88\xb4", 1, "%C3%A9%E1%88%B4"}, /* é, U+1234: UTF-8 bytes, upper hex */
        {"\x01\x7f\xff", 0, "%01%7F%FF"},
        {"runs/r1/states/12.mp", 1, "runs/r1/states/12.mp"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = sigv4_uri_encode(cases[i].in, cases[i].keep_slash);
        CHECK(got, "out of memory");
        int ok = strcmp(got, cases[i].want) == 0;
        if (!ok) printf("  encode case %zu: got '%s' want '%s'\n", i, got, cases[i].want);
        free(got);
        CHECK(ok, "encode case %zu", i);
    }
}

static void test_amz_date(void) {
    char d[SIGV4_AMZ_DATE_LEN + 1];
    CHECK(sigv4_amz_date(1440938160, d) == 0 && strcmp(d, "20150830T123600Z") == 0, "%s", d);
    CHECK(sigv4_amz_date(0, d) == 0 && strcmp(d, "19700101T000000Z") == 0, "%s", d);
    CHECK(sigv4_amz_date(1709251199, d) == 0 && strcmp(d, "20240229T235959Z") == 0, "%s", d);
    if (sizeof(time_t) > 4)
        CHECK(sigv4_amz_date((time_t)400000000000LL, d) == -1 && d[0] == '\0',
              "a five-digit year is refused");
}

/* The AWS docs' S3 examples (examplebucket, 2013-05-24). */
static const char *const S3_AK = "AKIAIOSFODNN7EXAMPLE";
static const char *const S3_SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

static sigv4_params s3_params(void) {
    return (sigv4_params){.access_key = S3_AK,
                          .secret_key = S3_SK,
                          .region = "us-east-1",
                          .service = "s3",
                          .amz_date = "20130524T000000Z",
                          .normalize_path = 0,
                          .double_encode_path = 0,
                          .content_sha256_header = 1};
}

static void test_s3_documented_examples(void) {
    sigv4_params p = s3_params();
    sigv4_output o;
    tdm_err e = {0};

    /* GET Object with a Range header. */
    sigv4_header get_h[] = {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}};
    sigv4_request get = {"GET", "/test.txt", NULL, get_h, 2, NULL};
    CHECK(sigv4_sign(&get, &p, &o, &e) == 0, "%s", e.msg);
    int ok = strcmp(o.canonical_request,
                    "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                    "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
                    "a495991b7852b855\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-conte"
                    "nt-sha256;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4"
                    "95991b7852b855") == 0 &&
             strcmp(o.authorization,
                    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws"
                    "4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Sig"
                    "nature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") ==
                 0;
    if (!ok) printf("  GET:\n%s\n%s\n", o.canonical_request, o.authorization);
    CHECK(o.nheaders == 3 && strcmp(o.headers[0].name, "X-Amz-Date") == 0 &&
              strcmp(o.headers[1].name, "x-amz-content-sha256") == 0 &&
              strcmp(o.headers[2].name, "Authorization") == 0 &&
              o.headers[2].value == o.authorization,
          "added headers");
    sigv4_output_free(&o);
    CHECK(ok, "GET Object example");

    /* PUT Object: a '$' in the key, a body, a Date header; encoded or not, same sig. */
    sigv4_header put_h[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                            {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                            {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    sha256_digest d;
    char body_hex[SHA256_HEX_LEN + 1];
    sha256("Welcome to Amazon S3.", 21, &d);
    sha256_hex(&d, body_hex);
    const char *paths[] = {"/test%24file.text", "/test$file.text", "/test%24file%2etext"};
    for (size_t i = 0; i < 3; i++) {
        sigv4_request put = {"PUT", paths[i], "", put_h, 3, body_hex};
        CHECK(sigv4_sign(&put, &p, &o, &e) == 0, "%s", e.msg);
        ok = strcmp(o.signature,
                    "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd") == 0 &&
             strstr(o.canonical_request, "PUT\n/test%24file.text\n\n") == o.canonical_request;
        if (!ok) printf("  PUT %s:\n%s\n", paths[i], o.canonical_request);
        sigv4_output_free(&o);
        CHECK(ok, "PUT Object example, path %s", paths[i]);
    }

    /* GET Bucket lifecycle (a sub-resource without '=') and a listing query. */
    sigv4_header bucket_h[] = {{"Host", "examplebucket.s3.amazonaws.com"}};
    struct {
        const char *query, *sig;
    } lists[] = {
        {"lifecycle", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
        {"lifecycle=", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
        {"max-keys=2&prefix=J", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
        {"prefix=J&max-keys=2", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
    };
    for (size_t i = 0; i < 4; i++) {
        sigv4_request req = {"GET", "/", lists[i].query, bucket_h, 1, NULL};
        CHECK(sigv4_sign(&req, &p, &o, &e) == 0, "%s", e.msg);
        ok = strcmp(o.signature, lists[i].sig) == 0;
        if (!ok) printf("  GET ?%s:\n%s\n", lists[i].query, o.canonical_request);
        sigv4_output_free(&o);
        CHECK(ok, "bucket example ?%s", lists[i].query);
    }

    /* Presigned GET, 24 hours. */
    sigv4_request pre = {"GET", "/test.txt", NULL, bucket_h, 1, SIGV4_UNSIGNED_PAYLOAD};
    CHECK(sigv4_presign(&pre, &p, 86400, &o, &e) == 0, "%s", e.msg);
    ok = strcmp(o.query,
                "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2013"
                "0524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Signe"
                "dHeaders=host&X-Amz-Expires=86400&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d"
                "86835f995330da4c265957d157751f604d404") == 0 &&
         o.nheaders == 0 && !o.authorization;
    if (!ok) printf("  presign:\n%s\n%s\n", o.canonical_request, o.query);
    sigv4_output_free(&o);
    CHECK(ok, "presigned URL example");
}

/* The canonical URI line of signing `path` (caller frees), or NULL on error. */
static char *canonical_path(const char *path, int normalize, int double_encode) {
    sigv4_params p = s3_params();
    p.normalize_path = normalize;
    p.double_encode_path = double_encode;
    sigv4_header h[] = {{"Host", "b.example"}};
    sigv4_request r = {"GET", path, NULL, h, 1, NULL};
    sigv4_output o;
    tdm_err e = {0};
    if (sigv4_sign(&r, &p, &o, &e) != 0) return NULL;
    char *line = strchr(o.canonical_request, '\n') + 1;
    char *res = strndup(line, (size_t)(strchr(line, '\n') - line));
    sigv4_output_free(&o);
    return res;
}

static void test_s3_paths_kept_as_sent(void) {
    struct {
        const char *path;
        int normalize, dbl;
        const char *want;
    } cases[] = {
        /* S3: "//", "." and ".." are part of the key and stay as sent. */
        {"/bucket//a/./b/../c", 0, 0, "/bucket//a/./b/../c"},
        {"/bucket/key%20with%20space%2Bplus", 0, 0, "/bucket/key%20with%20space%2Bplus"},
        {"/bucket/key with space+plus", 0, 0, "/bucket/key%20with%20space%2Bplus"},
        {"/b/a%2Fb", 0, 0, "/b/a%2Fb"},    /* an encoded slash inside a segment stays */
        {"/b/a%2fb%7e", 0, 0, "/b/a%2Fb~"}, /* escapes canonicalised */
        {"/b/\xc3\xa9", 0, 0, "/b/%C3%A9"},
        {"/b/%C3%A9", 0, 0, "/b/%C3%A9"},
        {"/b/dir/", 0, 0, "/b/dir/"},
        {"", 0, 0, "/"},
        /* Other services: encoded once more, and normalised when asked. */
        {"/a%20b", 0, 1, "/a%2520b"},
        {"/a/./b/../c//d/", 1, 0, "/a/c/d/"},
        {"/a/..", 1, 1, "/"},
        {"/../../x", 1, 1, "/x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = canonical_path(cases[i].path, cases[i].normalize, cases[i].dbl);
        int ok = got && strcmp(got, cases[i].want) == 0;
        if (!ok) printf("  path '%s': got '%s' want '%s'\n", cases[i].path, got ? got : "(error)",
                        cases[i].want);
        free(got);
        CHECK(ok, "path case %zu", i);
    }
    CHECK(canonical_path("/b/100%", 0, 0) == NULL, "a lone %% is refused");
    CHECK(canonical_path("/b/%zz", 0, 0) == NULL, "a bad escape is refused");
    CHECK(canonical_path("b/no-slash", 0, 0) == NULL, "a relative path is refused");
    CHECK(canonical_path("/b/k?x=1", 0, 0) == NULL, "a query inside the path is refused");
}

static void test_query_and_header_canonicalisation(void) {
    sigv4_params p = s3_params();
    sigv4_header h[] = {{"Host", "b.example"},
                        {"X-Amz-Meta-A", "  one \t two  "},
                        {"x-amz-meta-a", "three"},
                        {"X-Amz-Meta-Empty", ""}};
    sigv4_request r = {"GET", "/",
                       "b=2&a=1&&a=0&c&d=&e=x=y&sp=a b&plus=a+b&enc=%2F%7e&%E1%88%B4=u",
                       h, 4, NULL};
    sigv4_output o;
    tdm_err e = {0};
    CHECK(sigv4_sign(&r, &p, &o, &e) == 0, "%s", e.msg);
    const char *want =
        "GET\n/\n%E1%88%B4=u&a=0&a=1&b=2&c=&d=&e=x%3Dy&enc=%2F~&plus=a%2Bb&sp=a%20b\n"
        "host:b.example\nx-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b"
        "934ca495991b7852b855\nx-amz-date:20130524T000000Z\nx-amz-meta-a:one two,three\n"
        "x-amz-meta-empty:\n\nhost;x-amz-content-sha256;x-amz-date;x-amz-meta-a;x-amz-meta-"
        "empty\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    int ok = strcmp(o.canonical_request, want) == 0;
    if (!ok) printf("  got:\n%s\n  want:\n%s\n", o.canonical_request, want);
    sigv4_output_free(&o);
    CHECK(ok, "canonical request");
}

static void test_wrong_secret_changes_signature(void) {
    sigv4_params p = s3_params();
    sigv4_header h[] = {{"Host", "examplebucket.s3.amazonaws.com"}};
    sigv4_request r = {"GET", "/test.txt", NULL, h, 1, NULL};
    sigv4_output a, b;
    tdm_err e = {0};
    CHECK(sigv4_sign(&r, &p, &a, &e) == 0, "%s", e.msg);
    p.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ";
    if (sigv4_sign(&r, &p, &b, &e) != 0) {
        sigv4_output_free(&a);
        CHECK(0, "%s", e.msg);
    }
    int same_sig = strcmp(a.signature, b.signature) == 0;
    int same_creq = strcmp(a.canonical_request, b.canonical_request) == 0;
    sigv4_output_free(&a);
    sigv4_output_free(&b);
    CHECK(!same_sig, "a different secret must give a different signature");
    CHECK(same_creq, "the canonical request does not depend on the secret");
}

#define SECRET "SeCrEt/Key+Value0123456789abcdefghijklmn"
#define TOKEN "ToKeN//Value+With=Base64Chars0123456789"

static int leaks(const char *s) { return s && (strstr(s, SECRET) || strstr(s, TOKEN)); }

/* The secret appears in no output; the token only where the protocol puts it; neither
 * in any error message. */
static void test_no_credentials_in_outputs_or_errors(void) {
    sigv4_params p = s3_params();
    p.secret_key = SECRET;
    p.session_token = TOKEN;
    sigv4_header h[] = {{"Host", "b.example"}};
    sigv4_request r = {"PUT", "/b/k", NULL, h, 1, NULL};
    sigv4_output o;
    tdm_err e = {0};
    CHECK(sigv4_sign(&r, &p, &o, &e) == 0, "%s", e.msg);
    int secret_seen = strstr(o.canonical_request, SECRET) || strstr(o.string_to_sign, SECRET) ||
                      strstr(o.authorization, SECRET);
    for (size_t i = 0; i < o.nheaders; i++) secret_seen |= !!strstr(o.headers[i].value, SECRET);
    int token_where = strstr(o.canonical_request, "x-amz-security-token:" TOKEN "\n") != NULL &&
                      o.nheaders == 4 && strcmp(o.headers[0].name, "X-Amz-Security-Token") == 0 &&
                      strcmp(o.headers[0].value, TOKEN) == 0 && !leaks(o.authorization) &&
                      !leaks(o.string_to_sign) &&
                      strstr(o.authorization, "x-amz-security-token") != NULL;
    sigv4_output_free(&o);
    CHECK(!secret_seen, "the secret must not appear in any output");
    CHECK(token_where, "the token is a signed header, and only there");

    CHECK(sigv4_presign(&r, &p, 60, &o, &e) == 0, "%s", e.msg);
    secret_seen = strstr(o.canonical_request, SECRET) || strstr(o.query, SECRET);
    int token_enc = strstr(o.query, "X-Amz-Security-Token=ToKeN%2F%2FValue%2BWith%3DBase64") != 0;
    sigv4_output_free(&o);
    CHECK(!secret_seen, "the secret must not appear in a presigned query");
    CHECK(token_enc, "the token goes encoded into the presigned query");

    /* Each of these must fail with ERR_USAGE, an empty output, and a clean message. */
    sigv4_header no_host[] = {{"X-Amz-Meta-A", "1"}};
    sigv4_header crlf[] = {{"Host", "b.example"}, {"X-Amz-Meta-A", "1\r\nX-Evil: " TOKEN}};
    sigv4_header dup_date[] = {{"Host", "b.example"}, {"x-amz-date", "20130524T000000Z"}};
    sigv4_header dup_tok[] = {{"Host", "b.example"}, {"X-Amz-Security-Token", TOKEN}};
    sigv4_header dup_auth[] = {{"Host", "b.example"}, {"Authorization", SECRET}};
    sigv4_header bad_name[] = {{"Host", "b.example"}, {"Bad Name", SECRET}};
    struct {
        const char *what;
        sigv4_request r;
        sigv4_params p;
        int presign;
        long expires;
    } bad[] = {
        {"no host", {"GET", "/", NULL, no_host, 1, NULL}, p, 0, 0},
        {"CRLF in a value", {"GET", "/", NULL, crlf, 2, NULL}, p, 0, 0},
        {"caller's x-amz-date", {"GET", "/", NULL, dup_date, 2, NULL}, p, 0, 0},
        {"caller's token header", {"GET", "/", NULL, dup_tok, 2, NULL}, p, 0, 0},
        {"caller's Authorization", {"GET", "/", NULL, dup_auth, 2, NULL}, p, 0, 0},
        {"bad header name", {"GET", "/", NULL, bad_name, 2, NULL}, p, 0, 0},
        {"bad payload hash", {"GET", "/", NULL, h, 1, "E3B0"}, p, 0, 0},
        {"bad escape", {"GET", "/%g0", NULL, h, 1, NULL}, p, 0, 0},
        {"bad query escape", {"GET", "/", "a=%", h, 1, NULL}, p, 0, 0},
        {"no method", {"", "/", NULL, h, 1, NULL}, p, 0, 0},
        {"expires 0", {"GET", "/", NULL, h, 1, NULL}, p, 1, 0},
        {"expires > 7 days", {"GET", "/", NULL, h, 1, NULL}, p, 1, SIGV4_MAX_EXPIRES + 1},
        {"signature in query", {"GET", "/", "X-Amz-Signature=" TOKEN, h, 1, NULL}, p, 1, 60},
    };
    size_t nbad = sizeof bad / sizeof *bad;
    for (size_t i = 0; i < nbad; i++) {
        memset(&o, 0x5a, sizeof o); /* garbage in: the signer must clear it */
        tdm_err be = {0};
        int rc = bad[i].presign ? sigv4_presign(&bad[i].r, &bad[i].p, bad[i].expires, &o, &be)
                                : sigv4_sign(&bad[i].r, &bad[i].p, &o, &be);
        CHECK(rc == ERR_USAGE && be.code == ERR_USAGE, "%s: rc %d", bad[i].what, rc);
        CHECK(!o.canonical_request && !o.authorization && !o.query && o.nheaders == 0,
              "%s: output left empty", bad[i].what);
        sigv4_output_free(&o);
        CHECK(be.msg[0] && !leaks(be.msg), "%s: message '%s'", bad[i].what, be.msg);
    }
    /* Broken credentials: the message says which, never what. */
    const char *bad_tokens[] = {TOKEN "\n", "x " TOKEN, TOKEN "\x01"};
    for (size_t i = 0; i < 3; i++) {
        sigv4_params bp = p;
        bp.session_token = bad_tokens[i];
        tdm_err be = {0};
        CHECK(sigv4_sign(&r, &bp, &o, &be) == ERR_USAGE, "bad token %zu accepted", i);
        CHECK(strstr(be.msg, "session token") && !leaks(be.msg), "message '%s'", be.msg);
    }
    sigv4_params bp = p;
    bp.secret_key = "";
    tdm_err be = {0};
    CHECK(sigv4_sign(&r, &bp, &o, &be) == ERR_USAGE && strstr(be.msg, "secret key"),
          "empty secret: '%s'", be.msg);
    bp = p;
    bp.amz_date = "2013-05-24T00:00:00Z";
    CHECK(sigv4_sign(&r, &bp, &o, &be) == ERR_USAGE && strstr(be.msg, "amz_date") &&
              !leaks(be.msg),
          "bad date: '%s'", be.msg);
    bp = p;
    bp.access_key = "AK ID";
    CHECK(sigv4_sign(&r, &bp, &o, &be) == ERR_USAGE && !leaks(be.msg), "bad access key");
    bp = p;
    bp.region = "us/east";
    CHECK(sigv4_sign(&r, &bp, &o, &be) == ERR_USAGE && !leaks(be.msg), "bad region");
    sigv4_output_free(NULL);
}

/* An unsigned token (omit_session_token) is sent but left out of the signature. */
static void test_omitted_token_is_sent_unsigned(void) {
    sigv4_params p = s3_params();
    p.session_token = TOKEN;
    p.omit_session_token = 1;
    sigv4_header h[] = {{"Host", "b.example"}};
    sigv4_request r = {"GET", "/", NULL, h, 1, NULL};
    sigv4_output o;
    tdm_err e = {0};
    CHECK(sigv4_sign(&r, &p, &o, &e) == 0, "%s", e.msg);
    int ok = !strstr(o.canonical_request, "security-token") && o.nheaders == 4 &&
             strcmp(o.headers[0].value, TOKEN) == 0;
    sigv4_output_free(&o);
    CHECK(ok, "token header sent, not signed");
}

int main(void) {
    RUN(test_uri_encode);
    RUN(test_amz_date);
    RUN(test_s3_documented_examples);
    RUN(test_s3_paths_kept_as_sent);
    RUN(test_query_and_header_canonicalisation);
    RUN(test_wrong_secret_changes_signature);
    RUN(test_no_credentials_in_outputs_or_errors);
    RUN(test_omitted_token_is_sent_unsigned);
    RUN(test_aws_suite_header_signing);
    RUN(test_aws_suite_presigned_urls);
    return test_summary("test_sigv4");
}
