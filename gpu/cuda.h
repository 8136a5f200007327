/* cuda.h — what the CUDA backend offers beyond the model_ops table (C API).
 *
 * The backend itself is `model_cuda_ops` (declared in model/model.h when the build has
 * CUDA, i.e. TANDEM_HAVE_CUDA is defined), reached through gpu_plugin_load() (plugin.h). Its
 * buffers are device pointers; only upload/download cross to the host.
 *
 * Precision. fp32 (the default) computes everything in float, matmuls in true fp32
 * (cuBLASLt CUBLAS_COMPUTE_32F: no TF32). bf16 rounds the matmul and attention inputs
 * (activations and a bf16 copy of the weights made at each forward) to bfloat16 and
 * accumulates in float; parameters, gradients, AdamW moments, the residual stream,
 * LayerNorm statistics, logits and losses stay float. The precision of a workspace is
 * fixed when it is created: model_cuda_set_precision() (the runner's run.precision)
 * wins; without it, the environment variable TANDEM_PRECISION=fp32|bf16 is read at
 * create; without either, fp32.
 */
#ifndef TANDEM_GPU_CUDA_H
#define TANDEM_GPU_CUDA_H

#include <stddef.h>

#include "model/model.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "fp32" or "bf16" for workspaces created from now on; NULL restores the default (the
 * environment's TANDEM_PRECISION, else fp32). ERR_USAGE naming run.precision for any
 * other name. */
int model_cuda_set_precision(const char *name, tdm_err *e);

/* The precision the next create will use ("fp32" or "bf16"), after the setter and the
 * environment; ERR_USAGE when TANDEM_PRECISION holds something else. */
int model_cuda_next_precision(const char **name, tdm_err *e);

/* The precision of a CUDA workspace ("fp32" or "bf16"). */
const char *model_cuda_precision(const model_ctx *ctx);

/* Number of CUDA devices usable by this process (0 when there is no device or no
 * driver: then `why` gets the reason, if not NULL). */
int model_cuda_device_count(char *why, size_t cap);

/* One line describing the current device and libraries, e.g. "NVIDIA H100 80GB HBM3
 * (sm_90, 132 SMs, 79.1 GiB), CUDA runtime 13.0, driver 13.0, cuBLASLt 130000". */
int model_cuda_describe(char *buf, size_t cap, tdm_err *e);

/* The current device's free and total bytes (cudaMemGetInfo), before any workspace
 * exists: what the memory estimate printed at a run's start is checked against. */
int model_cuda_free_memory(size_t *free_bytes, size_t *total, tdm_err *e);

/* Memory of a CUDA workspace: bytes allocated through it now (workspace, activations and
 * every buffer from ops->alloc) and the most ever at once, and the device's used and
 * total bytes (cudaMemGetInfo: every process and context on the device). */
typedef struct model_cuda_mem {
    size_t backend_now, backend_peak;
    size_t device_used, device_total;
} model_cuda_mem;
int model_cuda_memory(model_ctx *ctx, model_cuda_mem *out, tdm_err *e);

/* Waits until every operation queued on the workspace's stream has finished (ops may
 * return before the device is done: backward, sgd, adamw, scale, copy), and returns an
 * error any of them raised. For timing and tests. */
int model_cuda_sync(model_ctx *ctx, tdm_err *e);

/* The attention of workspaces created from now on (model.attention): "auto" (cuDNN's
 * fused attention when the precision is bf16, cuDNN 9 loads and a start-up self-check
 * against the built-in kernels passes; else the built-in kernels, the reason said once on
 * stderr), "cudnn" (the same, but create fails with ERR_USAGE instead of falling back),
 * "builtin" (gpu/kernels_attention.cu, never loads cuDNN). NULL restores the default
 * (the environment's TANDEM_ATTENTION, else auto). ERR_USAGE naming model.attention for
 * any other name. docs/gpu.md, "Attention: cuDNN or built-in". */
int model_cuda_set_attention(const char *name, tdm_err *e);

/* The attention a workspace runs: "cudnn" or "builtin". */
const char *model_cuda_attention(const model_ctx *ctx);

/* Where the MLP's GELU ran in the workspace's last forward and backward (GPT-2):
 * "fused" (both in cuBLASLt's matmul epilogues), "forward-only", "backward-only",
 * "kernels" (this cuBLASLt has no algorithm for them), "off" (TANDEM_GELU_EPILOGUE=off), or
 * "none" (the Llama / Qwen2 family, which has no GELU).
 * docs/gpu.md, "Fewer kernels". */
const char *model_cuda_gelu_epilogue(const model_ctx *ctx);

/* The attention tile (64, 32 or 16) the workspace uses; 0 for a NULL ctx. */
int model_cuda_attention_tile(const model_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
