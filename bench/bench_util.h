/* bench_util.h — timing and summary helpers shared by the benchmarks. */
#ifndef TANDEM_BENCH_UTIL_H
#define TANDEM_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "util/err.h"

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints "NAME: WHAT: message" and exits 1. */
static inline void bench_die(const char *name, const char *what, const tdm_err *e) {
    fprintf(stderr, "%s: %s: %s\n", name, what, e ? e->msg : "failed");
    exit(1);
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
