/* ckpt_model.h — a backend's model as the ledger sees it: the layout's tensors as named
 * views (ckpt_layout) and the backend's upload/download as chunk transfers
 * (ckpt_tensor_io). The one place where the checkpoint and the model meet, so that
 * ledger/ never includes model/.
 */
#ifndef TANDEM_RUNNER_CKPT_MODEL_H
#define TANDEM_RUNNER_CKPT_MODEL_H

#include "ledger/ckpt.h"
#include "model/model.h"
#include "util/err.h"

/* The views of lay's tensors (name, rows, cols, offset) and numel; free with
 * ckpt_model_layout_free. ERR_INTERNAL when out of memory. */
int ckpt_model_layout(const model_layout *lay, ckpt_layout *out, tdm_err *e);
void ckpt_model_layout_free(ckpt_layout *l);

/* The backend's transfers behind a ckpt_tensor_io: b->io moves chunks through ops with
 * ctx. b must outlive every ckpt that was given &b->io. */
typedef struct ckpt_model_io {
    const model_ops *ops;
    model_ctx *ctx;
    ckpt_tensor_io io;
} ckpt_model_io;
void ckpt_model_io_init(ckpt_model_io *b, const model_ops *ops, model_ctx *ctx);
/* ckpt_model_io_init, then &b->io: for a ckpt_snapshot call. */
const ckpt_tensor_io *ckpt_io_of(ckpt_model_io *b, const model_ops *ops, model_ctx *ctx);

/* ckpt_open and ckpt_open_stream for a model's layout (its views built here and copied by
 * the ledger). NULL with e set on failure. */
ckpt *ckpt_model_open(store *st, const model_layout *lay, uint64_t chunk_bytes, tdm_err *e);
ckpt *ckpt_model_open_stream(store *st, const model_layout *lay, uint64_t chunk_bytes, const ckpt_model_io *b,
                             float *const dev[CKPT_TENSORS], tdm_err *e);

#endif
