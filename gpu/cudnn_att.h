/* cudnn_att.h — causal self-attention through cuDNN's fused scaled-dot-product attention
 * (forward and backward, bf16), the alternative to gpu/kernels_attention.cu that
 * model.attention selects (docs/gpu.md, "Attention: cuDNN or built-in").
 *
 * cuDNN is loaded at run time (dlopen of libcudnn.so.9, from $TANDEM_CUDNN_DIR first), so
 * tandem-cuda.so never needs it to load; only its backend graph API is used (no frontend
 * code): the graph of matmul, pointwise and reduction operations that cuDNN's fused
 * attention engines recognise (causal mask by row/column indices, softmax statistics
 * out for the backward; the backward writes dQ directly, no atomically accumulated
 * float copy, and every engine whose numerical notes say NONDETERMINISTIC is skipped).
 *
 * Same layout as the built-in kernels (gpu/kernels.h): H query heads over Hkv key/value
 * heads of hs dimensions, qkv[B, T, (H + 2 Hkv) hs] (q | k | v, query head h at h*hs),
 * out[B, T, H hs], lse[B, H, T] (natural log-sum-exp of each query row's scaled scores),
 * dqkv like qkv, overwritten, D[B, H, T] scratch (cuDNN's dO·O row sums). GPT-2: Hkv = H.
 *
 * In the simulator build (TANDEM_GPU_SIM) cuDNN is never loaded: cudnn_att_load says
 * why and the built-in kernels run. C++ only.
 */
#ifndef TANDEM_GPU_CUDNN_ATT_H
#define TANDEM_GPU_CUDNN_ATT_H

#include <stddef.h>

#include "gpu/kernels.h"

extern "C" {
#include "util/err.h"
}

/* Loads cuDNN once per process (later calls return the first answer). 0 and the library
 * version (e.g. 91900) in *version, or -1 with the reason in why. Thread-safe. */
int cudnn_att_load(int *version, char *why, size_t cap);

struct cudnn_att; /* one per workspace: a cuDNN handle on its stream and its plans */

/* A cuDNN handle bound to stream s for heads of hs dimensions; NULL with the reason in
 * why (cuDNN not loaded, no handle, head size unsupported). */
cudnn_att *cudnn_att_create(cudaStream_t s, int hs, char *why, size_t cap);
void cudnn_att_destroy(cudnn_att *a);

/* Builds (once per shape; the answer is remembered) the forward and backward plans for
 * (B, T, H, Hkv) with the handle's hs: 0 when both exist, else the error (the same message on every later call
 * for that shape). A caller in model.attention = auto runs the built-in kernels for a
 * shape that cuDNN cannot serve, both directions, so forward and backward always match. */
int cudnn_att_prepare(cudnn_att *a, int B, int T, int H, int Hkv, tdm_err *e);

/* Enqueue the forward / backward on the handle's stream (plans are built, and cached, per
 * (B, T) the first time: the first call of a shape takes longer). ERR_INTERNAL naming the
 * cuDNN call, file and line on failure. */
int cudnn_att_forward(cudnn_att *a, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H,
                      int Hkv, tdm_err *e);
int cudnn_att_backward(cudnn_att *a, bf16 *dqkv, float *D, const bf16 *dout, const bf16 *qkv,
                       const bf16 *out, const float *lse, int B, int T, int H, int Hkv, tdm_err *e);

/* The start-up self-check: on a small random input (B 2, T 128, the handle's head size;
 * 4 heads, or 2 key/value heads of `group` query heads each when group > 1) the cuDNN
 * forward and backward against the built-in kernels (tile `tile`), and the cuDNN pair run
 * twice for the same bits. 0 when the outputs agree within tolerance
 * (summary in msg: the largest errors), -1 with the reason in msg. Synchronous; uses its
 * own buffers and a's stream. */
int cudnn_att_selfcheck(cudnn_att *a, int group, int tile, char *msg, size_t cap);

/* Tolerances of the self-check, relative to the reference tensor's largest magnitude
 * (out, dq, dk, dv) and absolute for lse; test_gpu uses the same. */
#define CUDNN_ATT_TOL_OUT 2e-2
#define CUDNN_ATT_TOL_GRAD 5e-2
#define CUDNN_ATT_TOL_LSE 2e-2

#endif
