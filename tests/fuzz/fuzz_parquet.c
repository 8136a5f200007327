/* fuzz_parquet.c — libFuzzer target for prep's Parquet reader (data/parquet.h): the input
 * is a whole file, its "text" column read to a sink that touches every byte it is given.
 * Every input must give a clean result: 0 with the column read through, or a PARQUET_*
 * code with a reason; ASan and UBSan report anything else. Built and run by `make fuzz`,
 * seeded with the files of tests/parquet_seeds.h (tests/fuzz/make_seeds.c writes them). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "data/parquet.h"

static int touch(void *ctx, const char *p, size_t n, uint64_t row, tdm_err *e) {
    (void)row, (void)e;
    unsigned *sum = ctx;
    for (size_t i = 0; i < n; i++) *sum += (unsigned char)p[i];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    unsigned sum = 0;
    parquet_sink sink = {&sum, touch, NULL};
    char why[256] = "";
    tdm_err e = {0};
    int rc = parquet_read(data, n, "text", &sink, why, sizeof why, &e);
    int clean = rc == 0 || ((rc == PARQUET_CORRUPT || rc == PARQUET_NO_COLUMN || rc == PARQUET_UNSUPPORTED) && why[0]);
    if (!clean) abort();
    return 0;
}
