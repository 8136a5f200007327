/* fuzz_records.c — libFuzzer target for one msgpack record decoder, chosen at build time
 * with -DFUZZ_RECORD=<head|run|state|alpha|lease|change|mixture|sweep>. Every input must give
 * a clean result: 0 (then the record is freed) or an error with a message; ASan and
 * UBSan report anything else. Built and run by `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/records.h"

#define STR2(x) #x
#define STR(x) STR2(x)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    tdm_err e = {0};
    int rc;
#if FUZZ_RECORD_head
    rec_head r;
    rc = rec_head_decode(data, n, "HEAD", &r, &e);
#elif FUZZ_RECORD_run
    rec_run r;
    rc = rec_run_decode(data, n, "RUN", &r, &e);
    if (!rc) rec_run_free(&r);
#elif FUZZ_RECORD_state
    rec_state r;
    rc = rec_state_decode(data, n, "states/1.mp", &r, &e);
    if (!rc) rec_state_free(&r);
#elif FUZZ_RECORD_alpha
    rec_alpha r;
    rc = rec_alpha_decode(data, n, "alpha/1.mp", &r, &e);
    if (!rc) {
        sha256_digest d;
        rec_alpha_hash(&r, &d);
    }
#elif FUZZ_RECORD_lease
    rec_lease r;
    rc = rec_lease_decode(data, n, "lease", &r, &e);
#elif FUZZ_RECORD_change
    rec_change r;
    rc = rec_change_decode(data, n, "configs/0.mp", &r, &e);
    if (!rc) rec_change_free(&r);
#elif FUZZ_RECORD_mixture
    rec_mixture r;
    rc = rec_mixture_decode(data, n, "mixture.mp", &r, &e);
#elif FUZZ_RECORD_sweep
    static rec_sweep r;
    rc = rec_sweep_decode(data, n, "SWEEP", &r, &e);
#else
#error "define FUZZ_RECORD_<name>"
#endif
    if (rc != 0 && (rc != ERR_STORE || e.msg[0] == '\0')) abort(); /* an unclean failure */
    return 0;
}
