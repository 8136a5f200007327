/* kernels.h — the kernels of the CUDA backend, as host-side launchers (C++ only).
 *
 * Each gpu/kernels_*.cu file does one job and exports launchers that enqueue their
 * kernels on a stream and return cudaGetLastError(). Shapes follow model/cpu.c: N = B*T
 * rows, C channels, H heads, hs = C/H, V vocabulary. Activations of type `act` are float
 * in fp32 mode and bf16 in bf16 mode; the residual stream, LayerNorm statistics, logits,
 * gradients of parameters, parameters and optimiser state are always float.
 *
 * Determinism: no kernel uses atomics; every reduction has a fixed order (warp shuffles
 * in a fixed butterfly, fixed row chunks combined in chunk order, per-thread loops in
 * index order), and the launch configuration depends only on the shapes.
 */
#ifndef TANDEM_GPU_KERNELS_H
#define TANDEM_GPU_KERNELS_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

#define GPU_ROW_CHUNK 64     /* rows per partial sum of a reduction over rows (as cpu.c) */
#define GPU_NORM_CHUNK 65536 /* elements per partial sum of a norm (as cpu.c) */

/* Kernel launches and dynamic shared memory go through these macros so that the same
 * source also builds for gpu/sim/ (the host-side simulator the tests use where there is
 * no GPU; TANDEM_GPU_SIM). */
#ifdef TANDEM_GPU_SIM
#define GPU_LAUNCH(kernel, grid, block, smem, stream, ...)                                  \
    ((void)(stream), sim_launch(#kernel, kernel, dim3(grid), dim3(block), (size_t)(smem),     \
                                __VA_ARGS__))
#define GPU_DYNAMIC_SMEM(name) unsigned char *name = sim_dynamic_smem()
#else
#define GPU_LAUNCH(kernel, grid, block, smem, stream, ...)                                  \
    kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#define GPU_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

/* ---------------------------------------- device helpers */
#if defined(__CUDACC__) || defined(TANDEM_GPU_SIM)
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }

/* Butterfly reductions over a warp: every lane ends with the same bits (a + b == b + a),
 * and the order is fixed by the lane numbers. */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#endif

/* ---------------------------------------- encoder (kernels_encoder.cu) */
/* out[N, C] = wte[inp[i]] + wpe[i % T] */
cudaError_t gpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                                int B, int T, int C, cudaStream_t s);
/* dwpe[t, c] = sum over b (in order, in double) of dres[b, t, c]; rows T..ctx-1 zeroed */
cudaError_t gpu_encoder_backward_wpe(float *dwpe, const float *dres, int B, int T, int C, int ctx,
                                     cudaStream_t s);
/* dwte[tok] += dres[i] for the rows i of each distinct input token tok, in increasing i:
 * uniq[u] is the token, its rows are pos[start[u] .. start[u+1]-1] (increasing). One
 * writer per element of dwte, so no atomics. */
cudaError_t gpu_encoder_backward_wte(float *dwte, const float *dres, const int32_t *uniq,
                                     const int32_t *start, const int32_t *pos, int nuniq, int C,
                                     cudaStream_t s);

/* ---------------------------------------- LayerNorm (kernels_layernorm.cu) */
template <typename T>
cudaError_t gpu_layernorm_forward(T *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, int N, int C, cudaStream_t s);
/* dinp[N, C] += d(inp), and when copy is not NULL copy[N, C] = the new dinp (rounded to T);
 * dw, db overwritten, through part[nchunks][2C] (nchunks = ceil(N / GPU_ROW_CHUNK)). */
template <typename T>
cudaError_t gpu_layernorm_backward(float *dinp, T *copy, float *dw, float *db, double *part,
                                   const float *dout, const float *inp, const float *mean,
                                   const float *rstd, const float *w, int N, int C,
                                   cudaStream_t s);

/* ---------------------------------------- column sums (kernels_bias.cu) */
/* out[C] = sum over rows of inp[N, C] (bias gradients), through part[nchunks][C] */
template <typename T>
cudaError_t gpu_column_sum(float *out, double *part, const T *inp, int N, int C, cudaStream_t s);
/* out[c] = sum over k < nchunks of part[k * stride + c], in k order, for c < C */
cudaError_t gpu_combine_chunks(float *out, const double *part, int nchunks, size_t stride, int C,
                               cudaStream_t s);

/* ---------------------------------------- GELU (kernels_gelu.cu) */
template <typename T> cudaError_t gpu_gelu_forward(T *out, const T *inp, size_t n, cudaStream_t s);
/* dinout *= gelu'(inp), in place */
template <typename T>
cudaError_t gpu_gelu_backward(T *dinout, const T *inp, size_t n, cudaStream_t s);

/* ---------------------------------------- cross-entropy (kernels_crossentropy.cu) */
/* For each row i of logits[N, V] (leading dimension ld): row_max[i], row_inv[i] =
 * 1 / sum exp(x - max), row_loss[i] = log(sum) - (x[target] - max), in double. */
cudaError_t gpu_crossentropy_forward(double *row_loss, float *row_max, float *row_inv,
                                     const float *logits, size_t ld, const int32_t *targets, int N,
                                     int V, cudaStream_t s);
/* dlogits[i, v] = g[i] * (softmax - onehot(target)); may be logits itself (T = float,
 * ldd = ld): each element is read and written by the same thread. */
template <typename T>
cudaError_t gpu_crossentropy_backward(T *dlogits, size_t ldd, const float *logits, size_t ld,
                                      const float *row_max, const float *row_inv,
                                      const float *row_g, const int32_t *targets, int N, int V,
                                      cudaStream_t s);

/* ---------------------------------------- attention (kernels_attention.cu) */
/* Fused causal attention, flash-style (online softmax), tiles of `tile` queries and keys
 * (64, 32 or 16) staged in shared memory, with grouped-query heads: H query heads of hs
 * dimensions over Hkv key/value heads (H a multiple of Hkv; GPT-2: Hkv = H, hs = C / H).
 * qkv[B, T, (H + 2 Hkv) hs] (each row q | k | v) → out[B, T, H hs] and lse[B, H, T]
 * (log-sum-exp of each query row's scaled scores, for the backward). */
template <typename Act>
cudaError_t gpu_attention_forward(Act *out, float *lse, const Act *qkv, int B, int T, int H, int Hkv,
                                  int hs, int tile, cudaStream_t s);
/* dqkv[B, T, (H + 2 Hkv) hs] (overwritten) from dout[B, T, H hs]; Dbuf[B, H, T] is scratch.
 * dK and dV come from one block per (b, key/value head, key tile) looping over the group's
 * query heads and their query tiles in order, dQ from one block per (b, h, query tile)
 * looping over key tiles: no atomics. */
template <typename Act>
cudaError_t gpu_attention_backward(Act *dqkv, float *Dbuf, const Act *dout, const Act *qkv,
                                   const Act *out, const float *lse, int B, int T, int H, int Hkv,
                                   int hs, int tile, cudaStream_t s);
/* The largest tile (64, 32, 16) whose kernels fit in smem_optin bytes of shared memory per
 * block for head size hs, or 0 when none does. */
int gpu_attention_pick_tile(int hs, int is_bf16, size_t smem_optin);
/* cudaSuccess when the current device can run this build's kernels (the build's
 * CUDA_ARCH covers it); the bf16 attention kernel (WMMA) is the most demanding. */
cudaError_t gpu_attention_probe(void);
/* Raises the dynamic shared-memory limit of the attention kernels to smem_optin (once per
 * process and device is enough; idempotent). */
cudaError_t gpu_attention_setup(size_t smem_optin);

/* ---------------------------------------- Llama / Qwen2 layers (kernels_hf.cu) */
/* The layers of model/qwen2.c. N = B*T rows, C channels, H query heads and Hkv key/value
 * heads (H a multiple of Hkv) of D dimensions, F the MLP width. Used by cuda_hf.cu (the
 * family's passes). Templates take float or bf16 activations (T); the residual stream,
 * RMSNorm's input, statistics and weights, and the gradients it adds into stay float. */

/* out[N, C] = x * rstd * w with rstd[N] = 1 / sqrt(mean(x^2) + eps) per row of inp[N, C]
 * (rstd may be NULL when the backward pass will not follow) */
template <typename T>
cudaError_t gpu_rmsnorm_forward(T *out, float *rstd, const float *inp, const float *w, int N,
                                int C, double eps, cudaStream_t s);
/* Backward of out = inp * rstd * w given dy[N, C]: dx[N, C] += d(inp) and
 * dw[C] += sum over rows of dy * inp * rstd, the rows summed in chunks of GPU_ROW_CHUNK
 * into part[nchunks][C] (double; nchunks = ceil(N / GPU_ROW_CHUNK)) combined in chunk
 * order: deterministic. Both add, as qwen2.c's rmsnorm_backward. */
cudaError_t gpu_rmsnorm_backward(float *dx, float *dw, double *part, const float *dy,
                                 const float *inp, const float *rstd, const float *w, int N,
                                 int C, cudaStream_t s);
/* The same, and copy[N, C] = the new dx rounded to T (the next matmuls' operand) */
template <typename T>
cudaError_t gpu_rmsnorm_backward(float *dx, T *copy, float *dw, double *part, const float *dy,
                                 const float *inp, const float *rstd, const float *w, int N,
                                 int C, cudaStream_t s);
/* x[B*T, heads*D] rotated in place by RoPE (HF's rotate_half: dims i and i + D/2 of each
 * head, position t = row % T, angle t * theta^(-2i/D) with inv_freq and the angle in
 * float, as qwen2.c's rope_rotate); sign +1 forward, -1 the transpose (backward). D even,
 * at most 12288. */
cudaError_t gpu_rope_rotate(float *x, int B, int T, int heads, int D, double theta, float sign,
                            cudaStream_t s);
/* The same on rows ld elements apart (the q or k part of a packed qkv row), T float or bf16 */
template <typename T>
cudaError_t gpu_rope_rotate_rows(T *x, size_t ld, int B, int T_, int heads, int D, double theta,
                                 float sign, cudaStream_t s);
/* act[n] = silu(g) * u, elementwise (act may be g or u) */
template <typename T>
cudaError_t gpu_swiglu_forward(T *act, const T *g, const T *u, size_t n, cudaStream_t s);
/* From dact[n]: du = dact g sigmoid(g), dg = dact u sigmoid(g) (1 + g (1 - sigmoid(g)));
 * dg may be dact (in place), du may not alias g or u */
template <typename T>
cudaError_t gpu_swiglu_backward(T *dg, T *du, const T *dact, const T *g, const T *u, size_t n,
                                cudaStream_t s);
/* The same on packed rows: gu[N, 2F] holds g | u per row (one matmul over gate_proj's and
 * up_proj's adjacent weights), act and dact are [N, F], dgu[N, 2F] gets dg | du */
template <typename T>
cudaError_t gpu_swiglu_forward_packed(T *act, const T *gu, int N, int F, cudaStream_t s);
template <typename T>
cudaError_t gpu_swiglu_backward_packed(T *dgu, const T *dact, const T *gu, int N, int F, cudaStream_t s);
/* Causal attention, query head h over key/value head h / (H / Hkv): q[B*T, H*D],
 * k and v [B*T, Hkv*D] → out[B*T, H*D], and the softmax probabilities
 * probs[B][H][T][T] (required; zeros past the diagonal) for the backward pass. */
cudaError_t gpu_gqa_attention_forward(float *out, float *probs, const float *q, const float *k,
                                      const float *v, int B, int T, int H, int Hkv, int D,
                                      cudaStream_t s);
/* From datt[B*T, H*D] (d out) and the forward's inputs and probs: dq[B*T, H*D], dk and
 * dv [B*T, Hkv*D], all overwritten; ds[B][H][T][T] is scratch (d scores). dk and dv sum
 * the group's query heads and positions in a fixed order, one writer per element. */
cudaError_t gpu_gqa_attention_backward(float *dq, float *dk, float *dv, float *ds,
                                       const float *datt, const float *q, const float *k,
                                       const float *v, const float *probs, int B, int T, int H,
                                       int Hkv, int D, cudaStream_t s);

/* ---------------------------------------- optimisers, norms (kernels_optim.cu) */
typedef struct gpu_span {
    unsigned long long off; /* first element */
    unsigned int n;         /* elements (≤ GPU_SPAN) */
    unsigned int decay;     /* AdamW weight decay applies */
} gpu_span;
#define GPU_SPAN 4096

/* A gradient clip's outcome, in device memory: written by gpu_clip_finish, read by
 * gpu_scale_clip, gpu_adamw and (copied) the host, so that nothing waits for the host. */
typedef struct gpu_clip {
    double norm;  /* the global L2 norm before clipping */
    float scale;  /* what the gradient is multiplied by: 1 when not clipped */
    int finite;   /* norm is finite: AdamW may step */
} gpu_clip;

cudaError_t gpu_sgd(float *p, const float *g, float lr, size_t n, cudaStream_t s);
/* gate (NULL: none): when !gate->finite the kernel changes nothing */
cudaError_t gpu_adamw(float *p, const float *g, float *m, float *v, const gpu_span *spans,
                      int nspans, float decay_keep, float b1, float b2, float eps,
                      float step_size, float bc2_sqrt, const gpu_clip *gate, cudaStream_t s);
/* part[k] = sum of squares of x[k*GPU_NORM_CHUNK ..] (one chunk), in double */
cudaError_t gpu_sumsq_chunks(double *part, const float *x, size_t n, cudaStream_t s);
cudaError_t gpu_scale(float *x, float a, size_t n, cudaStream_t s);
/* *c from the nchunks partial sums, added in chunk order by one thread (cpu.c's order):
 * norm = sqrt(sum); scale = max_norm / (norm + 1e-6) as float when max_norm > 0 and
 * norm > max_norm, else 1 (model_clip_grads' rule, in the same double operations) */
cudaError_t gpu_clip_finish(gpu_clip *c, const double *part, size_t nchunks, double max_norm,
                            cudaStream_t s);
/* x *= c->scale, nothing when it is 1 */
cudaError_t gpu_scale_clip(float *x, const gpu_clip *c, size_t n, cudaStream_t s);
/* out[i] = bf16(in[i]), round to nearest even */
cudaError_t gpu_cast_bf16(bf16 *out, const float *in, size_t n, cudaStream_t s);

#endif
