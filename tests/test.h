/* test.h — the minimal assertion harness shared by tandem's C tests.
 *
 * A test file defines `static void test_x(void)` functions and a main() that calls
 * RUN(test_x) for each and ends with `return test_summary("file");`. CHECK fails the
 * current test case (and returns from it), TEST_SKIP ends it as not tried here; every case
 * is reported as a PASS, FAIL or SKIP line, and the summary line "NAME: N passed, M
 * failed" (skips said on a line before it, never counted as passes) is what tests/run.sh
 * adds up.
 */
#ifndef TANDEM_TESTS_TEST_H
#define TANDEM_TESTS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int test_passed_, test_failed_, test_case_failed_;
/* cases that could not be tried here (TEST_SKIP): said, counted neither passed nor failed */
static int test_skipped_ __attribute__((unused)), test_case_skipped_ __attribute__((unused));

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            test_case_failed_ = 1;                                                         \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* Ends the current case as skipped, with the reason: what it checks cannot be tried here
 * (a sanitizer's memory layout, a kernel feature). RUN prints "SKIP name" and counts it
 * neither passed nor failed: a skip is never a pass. */
#define TEST_SKIP(...)                                                                     \
    do {                                                                                   \
        printf("  skipped: ");                                                             \
        printf(__VA_ARGS__);                                                               \
        putchar('\n');                                                                     \
        test_case_skipped_ = 1;                                                            \
        return;                                                                            \
    } while (0)

/* For helpers that return int: fails the case and returns -1 from the helper. */
#define CHECK_OR_RET(cond, ...)                                                            \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            test_case_failed_ = 1;                                                         \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)

/* TEST_ONLY=name[,name...] runs only the cases named (while working on one; the suite
 * always runs them all) */
static inline int test_selected_(const char *name) {
    const char *only = getenv("TEST_ONLY");
    if (!only || !*only) return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Set by a file whose cases leave children to clean up (test_ledger: writers frozen at a
 * hook by a case that gave up); called after each case. */
static void (*test_after_case_)(void) __attribute__((unused));

#define RUN(fn)                                                                            \
    do {                                                                                   \
        if (!test_selected_(#fn)) break;                                                   \
        test_case_failed_ = 0;                                                             \
        test_case_skipped_ = 0;                                                            \
        fn();                                                                              \
        if (test_after_case_) test_after_case_();                                          \
        if (test_case_failed_) {                                                           \
            test_failed_++;                                                                \
            printf("FAIL %s\n", #fn);                                                      \
        } else if (test_case_skipped_) {                                                   \
            test_skipped_++;                                                               \
            printf("SKIP %s\n", #fn);                                                      \
        } else {                                                                           \
            test_passed_++;                                                                \
            printf("PASS %s\n", #fn);                                                      \
        }                                                                                  \
        fflush(stdout);                                                                    \
    } while (0)

static inline int test_summary(const char *name) {
    if (test_skipped_) printf("%s: %d skipped (not counted)\n", name, test_skipped_);
    printf("%s: %d passed, %d failed\n", name, test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

/* A fresh empty directory under $TMPDIR (or /tmp) for one test; caller frees. */
static inline char *test_tmpdir(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t len = strlen(base) + strlen(tag) + 32;
    char *path = malloc(len);
    if (!path) abort();
    snprintf(path, len, "%s/tandem-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

/* rm -rf of a test's scratch directory (its path comes from test_tmpdir). */
static inline void test_rmtree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%.4096s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  cleanup of %s failed\n", dir);
}

/* Runs shell command `cmd`, its output (at most cap - 1 bytes) into out; its exit status,
 * -1 when it could not run or did not exit. */
static inline int test_sh(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
