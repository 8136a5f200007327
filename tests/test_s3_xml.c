/* test_s3_xml.c — the S3 client's reads of answers a hostile or broken endpoint may give.
 * XML (storage/s3_xml.h): a value that does not fit or holds a bad entity leaves ""
 * behind, never a half-decoded, unterminated copy (a multipart completion's ETag was
 * read that way and became a version every later compare-and-swap missed); entities
 * decode; a missing element is "not found". The redaction of an answer's text before it
 * goes into a message (s3_config_redact): no piece of a secret survives it. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3_config.h"
#include "storage/s3_xml.h"
#include "tests/test.h"

static void test_first_whole_or_nothing(void) {
    char out[16];
    const char *ok = "<R><ETag>&quot;abc&amp;d&#65;&#x42;&quot;</ETag></R>";
    CHECK(s3_xml_first(ok, strlen(ok), "ETag", out, sizeof out) == 1 && !strcmp(out, "\"abc&dAB\""),
          "entities: '%s'", out);
    /* too long for out: 0 and "", where a partial copy was left without its NUL */
    const char *longv = "<R><ETag>0123456789abcdefghijklmnop</ETag></R>";
    memset(out, 'X', sizeof out);
    CHECK(s3_xml_first(longv, strlen(longv), "ETag", out, sizeof out) == 0 && out[0] == '\0',
          "a value past the buffer: '%.16s'", out);
    /* a bad entity after some text: 0 and "" */
    const char *bad = "<R><ETag>abc&bogus;def</ETag></R>";
    memset(out, 'X', sizeof out);
    CHECK(s3_xml_first(bad, strlen(bad), "ETag", out, sizeof out) == 0 && out[0] == '\0',
          "a bad entity: '%.16s'", out);
    const char *none = "<R><Key>k</Key></R>";
    CHECK(s3_xml_first(none, strlen(none), "ETag", out, sizeof out) == 0, "a missing element was found");
}

/* Whether text holds a run of 12 characters of secret (what the redaction promises to
 * remove); the first such offset in *at. */
static int holds_piece(const char *text, const char *secret, size_t *at) {
    size_t tl = strlen(text), sl = strlen(secret);
    for (size_t i = 0; i + 12 <= tl; i++)
        if (memmem(secret, sl, text + i, 12)) {
            *at = i;
            return 1;
        }
    return 0;
}

/* A secret-looking string of n characters (the base64 alphabet of AWS's keys and tokens),
 * the same for the same seed. */
static void fake_secret(char *out, size_t n, unsigned seed) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        out[i] = b64[(seed >> 16) % 64];
    }
    out[n] = '\0';
}

/* An endpoint echoes pieces of the credentials it was sent or handed out — the middle of
 * the session token as its error code, a token cut short by the reader's buffer, part of
 * the secret key beside ordinary text — and none of it may reach a message. Before, only
 * a whole secret or one cut short after its first 16 characters was found: the middle of a
 * token (any 127 characters of it fit an error code) went into the log as it was. */
static void test_redact_pieces(void) {
    static s3_config c; /* 9 KiB of buffers */
    memset(&c, 0, sizeof c);
    fake_secret(c.session_token, 900, 7);
    fake_secret(c.secret_key, 40, 11);
    fake_secret(c.src_tok, 600, 13);
    char text[1024];
    size_t at = 0;
    struct {
        const char *name;
        const char *secret;
        size_t from, len;
    } echo[] = {{"the token's middle", c.session_token, 400, 100},
                {"the token's end", c.session_token, 850, 50},
                {"the token's head", c.session_token, 0, 117},
                {"a piece of the secret key", c.secret_key, 9, 20},
                {"the source's token", c.src_tok, 250, 13}};
    for (size_t k = 0; k < sizeof echo / sizeof *echo; k++) {
        snprintf(text, sizeof text, "Code-%.*s-end", (int)echo[k].len, echo[k].secret + echo[k].from);
        s3_config_redact(&c, NULL, text, 128);
        const char *secrets[] = {c.session_token, c.secret_key, c.src_tok};
        for (size_t i = 0; i < 3; i++)
            CHECK(!holds_piece(text, secrets[i], &at), "%s: a piece of a secret is left at %zu: '%s'",
                  echo[k].name, at, text);
        CHECK(!strncmp(text, "Code-[redacted]", 15) && strstr(text, "-end"),
              "%s: the text around the piece is not kept: '%s'", echo[k].name, text);
    }
    /* two pieces of two secrets, and the whole token in a text long enough to hold it */
    snprintf(text, sizeof text, "%.30s and %.14s", c.session_token + 33, c.secret_key + 20);
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, "[redacted] and [redacted]"), "two pieces: '%s'", text);
    snprintf(text, sizeof text, "<%.*s>", 1000, c.src_tok);
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, "<[redacted]>"), "a whole token: '%s'", text);
    /* pieces that overlap: the longest run from the text's start (u v) is followed by a
     * run that begins inside it (v w) and reaches 11 characters further. Taking the first
     * run and going on after it left those 11 characters of the token shown. */
    {
        char u[16], v[11], w[12], z1[41], z2[41];
        fake_secret(u, 15, 21), fake_secret(v, 10, 22), fake_secret(w, 11, 23);
        fake_secret(z1, 40, 24), fake_secret(z2, 40, 25);
        memset(&c, 0, sizeof c);
        snprintf(c.session_token, sizeof c.session_token, "%s%s%s%s%s%s", z1, u, v, z1, v, w);
        snprintf(c.session_token + strlen(c.session_token), 41, "%s", z2);
        snprintf(text, sizeof text, "%s%s%s", u, v, w);
        s3_config_redact(&c, NULL, text, sizeof text);
        CHECK(!strcmp(text, "[redacted]"), "overlapping pieces: '%s'", text);
    }
    /* a piece echoed escaped, as a URL, a JSON body or an XML text would hold it: the
     * escapes hid it from a search of the text as it is */
    {
        memset(&c, 0, sizeof c);
        snprintf(c.session_token, sizeof c.session_token, "IQoJb3JpZ2luX2VjEJr//////////wEaCXVz+LWVhc3Qt=MSJHMEUC");
        const char *escaped[] = {"<Code>b3JpZ2luX2VjEJr%2F%2f%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVz%2BLWVhc3Qt</Code>",
                                 "{\"m\":\"b3JpZ2luX2VjEJr\\/\\/\\/\\/\\/\\/\\/\\/\\/\\/wEa\"}",
                                 "{\"m\":\"\\u0049\\u0051oJb3JpZ2luX2Vj\"}",
                                 "<M>CXVz&#43;LWVhc3Qt&#x3D;MSJH</M>",
                                 "q=Z2luX2VjEJr%2F%2"};
        const char *want[] = {"<Code>[redacted]</Code>", "{\"m\":\"[redacted]\"}",
                              "{\"m\":\"[redacted]\"}", "<M>[redacted]</M>", "q=[redacted]%2"};
        for (size_t k = 0; k < sizeof escaped / sizeof *escaped; k++) {
            snprintf(text, sizeof text, "%s", escaped[k]);
            s3_config_redact(&c, NULL, text, sizeof text);
            CHECK(!strcmp(text, want[k]), "escaped piece %zu: '%s', want '%s'", k, text, want[k]);
        }
        /* escapes of other text are left as they are */
        snprintf(text, sizeof text, "key%%2Fwith%%20space &#47; \\/ ok");
        s3_config_redact(&c, NULL, text, sizeof text);
        CHECK(!strcmp(text, "key%2Fwith%20space &#47; \\/ ok"), "ordinary escapes changed: '%s'", text);
    }
    /* the extra secret (a web identity token) counts the same */
    char web[200];
    fake_secret(web, sizeof web - 1, 17);
    snprintf(text, sizeof text, "x%.40sy", web + 77);
    s3_config_redact(&c, web, text, sizeof text);
    CHECK(!strcmp(text, "x[redacted]y"), "a piece of the extra secret: '%s'", text);
    /* ordinary text is left as it is, but for its control bytes; 11 characters of a
     * secret are not a piece (nothing shorter than 12 is taken for one) */
    snprintf(text, sizeof text, "AccessDenied eu-central-1 %.11s\x1b[2J", c.session_token + 5);
    char want[64];
    snprintf(want, sizeof want, "AccessDenied eu-central-1 %.11s?[2J", c.session_token + 5);
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, want), "ordinary text changed: '%s'", text);
    /* a short secret (8 to 15 characters) is found whole, where it would not fit as a piece */
    memset(&c, 0, sizeof c);
    snprintf(c.secret_key, sizeof c.secret_key, "shortsecret");
    snprintf(text, sizeof text, "a shortsecret b");
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, "a [redacted] b"), "a short secret: '%s'", text);
    /* ... and escaped (a MinIO password echoed in a URL, or in JSON, where "\/" makes it
     * only one character longer than the secret and shorter than the mark) */
    snprintf(c.secret_key, sizeof c.secret_key, "pa/ss+word1");
    snprintf(c.session_token, sizeof c.session_token, "ab/cdefg");
    const char *short_in[] = {"u=pa%2Fss%2Bword1&x", "{\"k\":\"pa\\/ss+word1\"}", "t ab\\/cdefg t ab\\/cdefg"};
    const char *short_want[] = {"u=[redacted]&x", "{\"k\":\"[redacted]\"}", "t [redacted] t [redacted]"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(text, sizeof text, "%s", short_in[k]);
        s3_config_redact(&c, NULL, text, sizeof text);
        CHECK(!strcmp(text, short_want[k]), "an escaped short secret %zu: '%s', want '%s'", k, text, short_want[k]);
    }
    /* an empty text (an endpoint's empty error code) stays empty (a first version of the
     * escaped view wrote through its absent buffers: UBSan "store to null pointer") */
    text[0] = '\0';
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(text[0] == '\0', "an empty text: '%s'", text);
    /* growing past the caller's buffer cuts the text, never writes past it */
    char small[12];
    snprintf(small, sizeof small, "ab\\/cdefg");
    s3_config_redact(&c, NULL, small, sizeof small);
    CHECK(!strcmp(small, "[redacted]"), "a mark longer than its stretch in a small buffer: '%s'", small);
}

/* An endpoint may echo what it was sent hex-encoded (either case) or with its case changed:
 * before, the hex went into the message whole and an upper-cased copy partly
 * ("ZQXSESSIONTOKEN[redacted]ABC..."); every such copy is one mark now. */
static void test_redact_hex_and_case(void) {
    static s3_config c;
    memset(&c, 0, sizeof c);
    const char *tok = "ZQXSESSIONtoken/0123456789+abcdefghijklmnopqrstuv==";
    snprintf(c.session_token, sizeof c.session_token, "%s", tok);
    char hex[256], HEX[256], upper[128], text[1024];
    for (size_t i = 0; tok[i]; i++) {
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)tok[i]);
        snprintf(HEX + 2 * i, 3, "%02X", (unsigned char)tok[i]);
        upper[i] = (char)toupper((unsigned char)tok[i]);
        upper[i + 1] = '\0';
    }
    snprintf(text, sizeof text, "code=%s; msg=%s; echo=%s; end", hex, HEX, upper);
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, "code=[redacted]; msg=[redacted]; echo=[redacted]; end"), "hex and case: '%s'", text);
    /* the extra secret (a web identity token) the same way, a piece of its hex too */
    const char *web = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.payload";
    char piece[64];
    for (size_t i = 0; i < 10; i++) snprintf(piece + 2 * i, 3, "%02x", (unsigned char)web[5 + i]);
    snprintf(text, sizeof text, "x %s y", piece);
    s3_config_redact(NULL, web, text, sizeof text);
    CHECK(!strcmp(text, "x [redacted] y"), "a piece of the extra secret's hex: '%s'", text);
    /* text that merely holds hex digits is left alone */
    snprintf(text, sizeof text, "etag 0123456789abcdef0123456789abcdef");
    s3_config_redact(&c, NULL, text, sizeof text);
    CHECK(!strcmp(text, "etag 0123456789abcdef0123456789abcdef"), "plain hex changed: '%s'", text);
}

int main(void) {
    RUN(test_first_whole_or_nothing);
    RUN(test_redact_pieces);
    RUN(test_redact_hex_and_case);
    return test_summary("test_s3_xml");
}
