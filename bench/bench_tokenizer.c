/* bench_tokenizer.c — encoding throughput of data/tokenizer.h on one text file.
 *
 *   bench_tokenizer TOKENIZER PATTERN|- TEXT [THREADS]
 *
 * Prints "load S s", then for 1 thread (tokenizer_encode) and THREADS threads
 * (tokenizer_encode_parallel; default: all cores) the median of 3 runs as
 * "threads N MBps X tokens T"; the token counts must agree (the program fails if not). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "data/tokenizer.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* MB/s of the median of 3 encodings with `threads` (0: tokenizer_encode); *ntok the ids. */
static double run(const tokenizer *t, const char *text, size_t n, int threads, size_t *ntok) {
    double s[3];
    for (int r = 0; r < 3; r++) {
        tok_ids ids = {0};
        tdm_err e = {0};
        double t0 = bench_now();
        int rc = threads ? tokenizer_encode_parallel(t, text, n, threads, &ids, &e)
                         : tokenizer_encode(t, text, n, &ids, &e);
        s[r] = bench_now() - t0;
        if (rc) bench_die("bench_tokenizer", "encode", &e);
        *ntok = ids.n;
        tok_ids_free(&ids);
    }
    return (double)n / 1e6 / bench_median(s, 3);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER PATTERN|- TEXT [THREADS]\n");
        return 2;
    }
    tdm_err e = {0};
    tokenizer *t;
    double t0 = bench_now();
    if (tokenizer_load(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, &t, &e))
        bench_die("bench_tokenizer", "load", &e);
    printf("load %.3f s\n", bench_now() - t0);
    size_t n;
    char *text = slurp(argv[3], &n);
    if (!text) bench_die("bench_tokenizer", argv[3], NULL);
    int threads = argc > 4 ? atoi(argv[4]) : omp_get_max_threads();
    size_t tok1, tokn;
    double one = run(t, text, n, 0, &tok1);
    printf("threads 1 MBps %.2f tokens %zu\n", one, tok1);
    double many = run(t, text, n, threads, &tokn);
    printf("threads %d MBps %.2f tokens %zu\n", threads, many, tokn);
    free(text);
    tokenizer_free(t);
    if (tok1 != tokn) {
        fprintf(stderr, "bench_tokenizer: %zu tokens on 1 thread, %zu on %d\n", tok1, tokn,
                threads);
        return 1;
    }
    return 0;
}
