/* test_util.c — the small shared pieces: util/buf (growable strings with a sticky
 * out-of-memory flag) and ledger/keys (the store's key names, spelled and parsed in one
 * place).
 *
 *   buf     appends of every kind, growth across many doublings, printf of long output,
 *           take hands over and empties, an impossible size sets oom for good
 *   keys    each key kind spelled as the store layout says; indices parsed back, and
 *           leading zeros, overflow, other suffixes, other prefixes refused
 */
#include <stdint.h>

#include "ledger/keys.h"
#include "tests/test.h"
#include "util/buf.h"

static void test_buf(void) {
    buf_t b = {0};
    char *empty = buf_take(&b);
    CHECK(empty && !strcmp(empty, ""), "an empty take is \"\"");
    free(empty);
    buf_puts(&b, "ab");
    buf_putc(&b, 'c');
    buf_putn(&b, "dexx", 2);
    buf_printf(&b, "-%d-%s", 42, "z");
    CHECK(!b.oom && b.n == 10 && !strcmp(b.p, "abcde-42-z"), "%zu '%s'", b.n, b.p);
    for (int i = 0; i < 20000; i++) buf_putc(&b, (char)('a' + i % 26));
    CHECK(!b.oom && b.n == 20010 && b.p[20009] == (char)('a' + 19999 % 26) && b.p[20010] == '\0',
          "growth: %zu", b.n);
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_printf(&b, "%s!", big);
    CHECK(b.n == 20010 + 5000 && b.p[b.n - 1] == '!', "long printf: %zu", b.n);
    char *s = buf_take(&b);
    CHECK(s && strlen(s) == 25010 && b.p == NULL && b.n == 0, "take");
    free(s);
    /* an impossible size: oom, sticky; later appends dropped; take gives NULL */
    buf_puts(&b, "x");
    CHECK(buf_reserve(&b, SIZE_MAX - 8) == -1 && b.oom, "impossible reserve");
    buf_puts(&b, "more");
    CHECK(b.n == 1, "an append after oom was kept");
    CHECK(buf_take(&b) == NULL && b.p == NULL && !b.oom, "take after oom");
    buf_free(&b);
}

static void test_keys(void) {
    char k[128];
    ledger_state_key(k, sizeof k, 12);
    CHECK(!strcmp(k, "states/12.mp"), "%s", k);
    ledger_alpha_key(k, sizeof k, 0);
    CHECK(!strcmp(k, "alpha/0.mp"), "%s", k);
    ledger_config_key(k, sizeof k, 3);
    CHECK(!strcmp(k, "configs/3.mp"), "%s", k);
    ledger_pin_key(k, sizeof k, 18446744073709551615ull);
    CHECK(!strcmp(k, "pins/18446744073709551615"), "%s", k);
    sha256_digest d;
    sha256("abc", 3, &d);
    ledger_blob_key(k, sizeof k, &d);
    CHECK(!strcmp(k, "blobs/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", k);
    ledger_quarantine_key(k, sizeof k, 7, "states/3.mp");
    CHECK(!strcmp(k, "quarantine/7/states/3.mp"), "%s", k);
    ledger_superseded_key(k, sizeof k, 1, "alpha/9.mp");
    CHECK(!strcmp(k, "superseded/1/alpha/9.mp"), "%s", k);
    uint64_t n = 99;
    CHECK(ledger_key_index("states/0.mp", LEDGER_STATES, &n) == 0 && n == 0, "0");
    CHECK(ledger_key_index("alpha/18446744073709551615.mp", LEDGER_ALPHA, &n) == 0 &&
              n == UINT64_MAX,
          "max");
    CHECK(ledger_key_index("pins/42", LEDGER_PINS, &n) == 0 && n == 42, "pin");
    static const char *const bad[][2] = {
        {"states/01.mp", LEDGER_STATES},  {"states/.mp", LEDGER_STATES},
        {"states/1.mpx", LEDGER_STATES},  {"states/1", LEDGER_STATES},
        {"alpha/1.mp", LEDGER_STATES},    {"alpha/18446744073709551616.mp", LEDGER_ALPHA},
        {"pins/5.mp", LEDGER_PINS},       {"pins/-1", LEDGER_PINS},
        {"states/1a.mp", LEDGER_STATES},  {"states/ 1.mp", LEDGER_STATES},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ledger_key_index(bad[i][0], bad[i][1], &n) == -1, "%s accepted", bad[i][0]);
}

int main(void) {
    RUN(test_buf);
    RUN(test_keys);
    return test_summary("test_util");
}
