/* read.c — every record kind's decoder in one table; see read.h. */
#include "ledger/read.h"

#include <stdlib.h>

/* Each decoder takes its own struct; a wrapper per kind gives them one signature (a call
 * through a cast function pointer would be undefined). */
typedef int (*decode_fn)(const void *data, size_t n, const char *what, void *out, tdm_err *e);

#define DECODER(kind, T)                                                                     \
    static int decode_##kind(const void *data, size_t n, const char *what, void *out, tdm_err *e) { \
        return rec_##kind##_decode(data, n, what, (T *)out, e);                             \
    }
DECODER(head, rec_head)
DECODER(run, rec_run)
DECODER(change, rec_change)
DECODER(state, rec_state)
DECODER(alpha, rec_alpha)
DECODER(lease, rec_lease)
DECODER(mixture, rec_mixture)
DECODER(model, rec_model)
DECODER(metrics, rec_metrics)
DECODER(sweep, rec_sweep)
DECODER(data, rec_data)
DECODER(diverged, rec_diverged)

static const decode_fn DECODERS[REC_KIND_COUNT] = {
    [REC_KIND_HEAD] = decode_head,       [REC_KIND_RUN] = decode_run,
    [REC_KIND_CHANGE] = decode_change,   [REC_KIND_STATE] = decode_state,
    [REC_KIND_ALPHA] = decode_alpha,     [REC_KIND_LEASE] = decode_lease,
    [REC_KIND_MIXTURE] = decode_mixture, [REC_KIND_MODEL] = decode_model,
    [REC_KIND_METRICS] = decode_metrics, [REC_KIND_SWEEP] = decode_sweep,
    [REC_KIND_DATA] = decode_data,       [REC_KIND_DIVERGED] = decode_diverged,
};

int ledger_decode(rec_kind kind, const void *data, size_t n, const char *what, void *out, tdm_err *e) {
    if ((unsigned)kind >= REC_KIND_COUNT) return err_set(e, ERR_INTERNAL, "%s: no record kind %d", what, (int)kind);
    int rc = DECODERS[kind](data, n, what, out, e);
    return rc == ERR_STORE ? STORE_CORRUPT : rc; /* else 0, or out of memory */
}

int ledger_read(store *st, rec_kind kind, const char *key, const char *what, void *out, tdm_err *e) {
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, key, &data, &n, NULL, e);
    if (!rc) rc = ledger_decode(kind, data, n, what ? what : key, out, e);
    free(data);
    return rc;
}
