/* testhook.h — fault-injection points for the test suite.
 *
 * An environment variable holds "label:n"; testhook_hit(var, label) returns 1 exactly at
 * the n-th call with that label in this process (counting only matching labels), so a
 * test can kill or signal a run at a chosen point. Unset: always 0. Thread-safe. */
#ifndef TANDEM_UTIL_TESTHOOK_H
#define TANDEM_UTIL_TESTHOOK_H

/* At most TESTHOOK_VARS distinct variables per process. */
#define TESTHOOK_VARS 8
int testhook_hit(const char *var, const char *label);

/* TANDEM_TEST_KILL_AT=label:n: SIGKILLs this process at the n-th passage of `label` (a
 * crash at a chosen point of a commit, a retention pass, a step). */
void testhook_kill_at(const char *label);

/* `var` (an environment variable) = milliseconds: sleeps that long at every call (a
 * throttled store, a slowed step); unset or 0: returns at once. */
void testhook_sleep(const char *var);

/* TANDEM_TEST_STOP_AT=label:n: SIGSTOPs this process at the n-th passage of `label` (an
 * audit frozen between two of its reads until a live run has committed: the race made
 * certain, the retry after it left alone). TANDEM_TEST_STOP2_AT the same, for a second
 * point in the same process (frozen twice). */
void testhook_stop_at(const char *label);

#endif
