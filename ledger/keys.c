/* keys.c — the store's key names; see keys.h. */
#include "ledger/keys.h"

#include <stdio.h>
#include <string.h>

void ledger_state_key(char *buf, size_t cap, uint64_t seq) {
    snprintf(buf, cap, LEDGER_STATES "%llu.mp", (unsigned long long)seq);
}

void ledger_alpha_key(char *buf, size_t cap, uint64_t t) {
    snprintf(buf, cap, LEDGER_ALPHA "%llu.mp", (unsigned long long)t);
}

void ledger_metrics_key(char *buf, size_t cap, uint64_t t) {
    snprintf(buf, cap, LEDGER_METRICS "%llu.mp", (unsigned long long)t);
}

void ledger_config_key(char *buf, size_t cap, uint64_t n) {
    snprintf(buf, cap, LEDGER_CONFIGS "%llu.mp", (unsigned long long)n);
}

void ledger_pin_key(char *buf, size_t cap, uint64_t seq) {
    snprintf(buf, cap, LEDGER_PINS "%llu", (unsigned long long)seq);
}

void ledger_blob_key(char *buf, size_t cap, const sha256_digest *d) {
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(d, hex);
    snprintf(buf, cap, LEDGER_BLOBS "%s", hex);
}

void ledger_quarantine_key(char *buf, size_t cap, uint64_t epoch, const char *key) {
    snprintf(buf, cap, LEDGER_QUARANTINE "%llu/%s", (unsigned long long)epoch, key);
}

void ledger_superseded_key(char *buf, size_t cap, uint64_t change, const char *key) {
    snprintf(buf, cap, LEDGER_SUPERSEDED "%llu/%s", (unsigned long long)change, key);
}

int ledger_key_owned(const char *rel) {
    static const char *const names[] = {LEDGER_RUN, LEDGER_HEAD, LEDGER_LEASE, LEDGER_MIXTURE, LEDGER_MODEL,
                                        LEDGER_DATA, LEDGER_SWEEP, LEDGER_DIVERGED, ".lock"};
    static const char *const folders[] = {LEDGER_STATES, LEDGER_BLOBS, LEDGER_ALPHA, LEDGER_METRICS,
                                          LEDGER_CONFIGS, LEDGER_PINS, LEDGER_SUPERSEDED, LEDGER_QUARANTINE};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(rel, names[i])) return 1;
    for (size_t i = 0; i < sizeof folders / sizeof *folders; i++) {
        size_t n = strlen(folders[i]); /* "states/": "states" itself and all below it */
        if (!strncmp(rel, folders[i], n - 1) && (rel[n - 1] == '\0' || rel[n - 1] == '/')) return 1;
    }
    return !strncmp(rel, ".tmp-", 5);
}

int ledger_key_index(const char *key, const char *prefix, uint64_t *out) {
    size_t pl = strlen(prefix);
    if (strncmp(key, prefix, pl) != 0) return -1;
    const char *p = key + pl;
    /* digits without a leading zero: one spelling per number */
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - digit) / 10) return -1; /* would overflow */
        v = v * 10 + digit;
    }
    /* pins/<seq> alone has no suffix */
    if (strcmp(p, strcmp(prefix, LEDGER_PINS) == 0 ? "" : ".mp") != 0) return -1;
    *out = v;
    return 0;
}
