/* args.c — option scanning; see args.h. */
#include "util/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_init(args_iter *it, int argc, char **argv, int first) {
    it->argc = argc;
    it->argv = argv;
    it->i = first;
    it->flag[0] = '\0';
    it->value = NULL;
}

int args_next(args_iter *it) {
    if (it->i >= it->argc) return 0;
    const char *a = it->argv[it->i++];
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
        it->flag[0] = '\0';
        it->value = a;
        return 1;
    }
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= sizeof it->flag) n = sizeof it->flag - 1;
    memcpy(it->flag, a, n);
    it->flag[n] = '\0';
    it->value = eq ? eq + 1 : NULL;
    return 1;
}

int args_value(args_iter *it, const char **out, tdm_err *e) {
    if (it->value) {
        *out = it->value;
        return 0;
    }
    if (it->i >= it->argc) return err_set(e, ERR_USAGE, "%s needs a value", it->flag);
    *out = it->argv[it->i++];
    return 0;
}

/* Whether s is a number's start: leading blanks (strtol and its kin skip them, and older
 * pinned configs may hold " 2"), then a sign where sign_ok, then a digit (or '.' and a
 * digit). The sign is judged after the blanks: " -1" used to get past a check of the
 * first character and strtoull wrapped it to 2^64-1. */
static int starts_number(const char *s, int sign_ok) {
    const char *p = s;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
    if (sign_ok && (*p == '-' || *p == '+')) p++;
    return (*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9');
}

int args_parse_long(const char *s, long *out) {
    if (!starts_number(s, 1)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int args_parse_u64(const char *s, uint64_t *out) {
    if (!starts_number(s, 0)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int args_parse_count(const char *s, uint64_t *out) {
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10)) return -1;
        v = v * 10 + d;
    }
    uint64_t mul = 1;
    int bin = p[0] && p[1] == 'i';
    if (*p == 'k' || *p == 'K')
        mul = bin ? 1ull << 10 : 1000;
    else if (*p == 'M')
        mul = bin ? 1ull << 20 : 1000000;
    else if (*p == 'G')
        mul = bin ? 1ull << 30 : 1000000000;
    if (mul > 1) p += 1 + bin;
    if (*p || v > UINT64_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}

int args_parse_double(const char *s, double *out) {
    /* decimal only: strtod would also read hex floats (0x1p-3), which configs refuse */
    if (!starts_number(s, 1) || strpbrk(s, "xX")) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* underflow (a subnormal, or below it to 0) is a number, as the config reads it;
     * overflow is inf, refused below */
    if ((errno && !(errno == ERANGE && fabs(v) < 1)) || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int args_int(args_iter *it, long min, long max, long *out, tdm_err *e) {
    const char *v = NULL;
    if (args_value(it, &v, e)) return ERR_USAGE;
    long x = 0;
    if (args_parse_long(v, &x) || x < min || x > max)
        return err_set(e, ERR_USAGE, "%s: '%s' is not an integer in %ld..%ld", it->flag, v, min,
                       max);
    *out = x;
    return 0;
}

int args_u64(args_iter *it, uint64_t *out, tdm_err *e) {
    const char *v = NULL;
    if (args_value(it, &v, e)) return ERR_USAGE;
    if (args_parse_u64(v, out))
        return err_set(e, ERR_USAGE, "%s: '%s' is not a non-negative integer", it->flag, v);
    return 0;
}

int args_positional(args_iter *it, const char **slot, const char *what, tdm_err *e) {
    if (*slot) return err_set(e, ERR_USAGE, "unexpected argument '%s' (one %s only)", it->value, what);
    *slot = it->value;
    return 0;
}

int args_double(args_iter *it, double min, double max, double *out, tdm_err *e) {
    const char *v = NULL;
    if (args_value(it, &v, e)) return ERR_USAGE;
    double x = 0;
    if (args_parse_double(v, &x) || x < min || x > max)
        return err_set(e, ERR_USAGE, "%s: '%s' is not a number in [%g, %g]", it->flag, v, min,
                       max);
    *out = x;
    return 0;
}
