/* test_s3_xml.c — the S3 client's XML reads (storage/s3_xml.h) on answers a hostile or
 * broken endpoint may give: a value that does not fit or holds a bad entity leaves ""
 * behind, never a half-decoded, unterminated copy (a multipart completion's ETag was
 * read that way and became a version every later compare-and-swap missed); entities
 * decode; a missing element is "not found". */
#include <string.h>

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

int main(void) {
    RUN(test_first_whole_or_nothing);
    return test_summary("test_s3_xml");
}
