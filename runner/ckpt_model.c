/* ckpt_model.c — a backend's model as the ledger sees it; see ckpt_model.h. */
#include "runner/ckpt_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_model_layout(const model_layout *lay, ckpt_layout *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    rec_view *v = calloc(lay->n > 0 ? (size_t)lay->n : 1, sizeof *v);
    if (!v) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int i = 0; i < lay->n; i++) {
        snprintf(v[i].name, REC_NAME_MAX, "%s", lay->t[i].name);
        v[i].rows = (uint64_t)lay->t[i].shape[0];
        v[i].cols = (uint64_t)lay->t[i].shape[1];
        v[i].offset = lay->t[i].offset;
    }
    out->numel = lay->numel;
    out->nviews = lay->n;
    out->views = v;
    return 0;
}

void ckpt_model_layout_free(ckpt_layout *l) {
    free((void *)l->views);
    memset(l, 0, sizeof *l);
}

static int io_download(void *arg, float *host, const float *src, size_t n, tdm_err *e) {
    const ckpt_model_io *b = arg;
    return b->ops->download(b->ctx, host, src, n, e);
}

static int io_upload(void *arg, float *dst, const float *host, size_t n, tdm_err *e) {
    const ckpt_model_io *b = arg;
    return b->ops->upload(b->ctx, dst, host, n, e);
}

void ckpt_model_io_init(ckpt_model_io *b, const model_ops *ops, model_ctx *ctx) {
    b->ops = ops;
    b->ctx = ctx;
    b->io = (ckpt_tensor_io){.ctx = b, .download = io_download, .upload = io_upload};
}

const ckpt_tensor_io *ckpt_io_of(ckpt_model_io *b, const model_ops *ops, model_ctx *ctx) {
    ckpt_model_io_init(b, ops, ctx);
    return &b->io;
}

/* Both opens: the views for the call's length, the stream's transfers when b is given. */
static ckpt *open_model(store *st, const model_layout *lay, uint64_t chunk_bytes, const ckpt_model_io *b,
                        float *const dev[CKPT_TENSORS], tdm_err *e) {
    ckpt_layout cl;
    if (ckpt_model_layout(lay, &cl, e)) return NULL;
    ckpt *c = b ? ckpt_open_stream(st, &cl, chunk_bytes, &b->io, dev, e) : ckpt_open(st, &cl, chunk_bytes, e);
    ckpt_model_layout_free(&cl);
    return c;
}

ckpt *ckpt_model_open(store *st, const model_layout *lay, uint64_t chunk_bytes, tdm_err *e) {
    return open_model(st, lay, chunk_bytes, NULL, NULL, e);
}

ckpt *ckpt_model_open_stream(store *st, const model_layout *lay, uint64_t chunk_bytes, const ckpt_model_io *b,
                             float *const dev[CKPT_TENSORS], tdm_err *e) {
    return open_model(st, lay, chunk_bytes, b, dev, e);
}
