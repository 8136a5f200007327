/* kernels_hf.cu — the layers of the Llama / Qwen2 family (model/qwen2.c) on the GPU:
 * RMSNorm, RoPE, SwiGLU and causal grouped-query attention, forward and backward, fp32;
 * RMSNorm, RoPE and SwiGLU also with bf16 activations (the bf16 path runs the attention of
 * kernels_attention.cu or cuDNN). In bf16 every value is read into float, computed exactly
 * as in fp32, and rounded to bf16 once when stored.
 *
 * Same formulas, and where a thread does the CPU's loop, the same float operations in the
 * same order as qwen2.c: products and sums that the CPU rounds one by one go through
 * mul_rn / add_rn / sub_rn (no fused multiply-add, which nvcc would otherwise contract
 * them into), so the only differences from the CPU are the orders of the sums that are
 * spread over a warp (in double) and the last ulp of CUDA's expf / sinf / cosf.
 *
 *   RMSNorm    forward: one warp per row, sum of squares in double over the lanes'
 *              strided elements then a fixed butterfly. Backward: d(x) one warp per row
 *              (added onto dx); d(w) over rows in fixed chunks of GPU_ROW_CHUNK rows into
 *              double partials (one thread per (chunk, channel), rows in order), combined
 *              in chunk order — kernels_layernorm.cu's scheme.
 *   RoPE       one block per row (b, t): the row's cos / sin in shared memory, computed
 *              once for all its heads exactly as the CPU (inv_freq in float from a double
 *              pow, the angle t * inv_freq in float); then every (head, pair) rotated.
 *   SwiGLU     elementwise, grid-stride.
 *   attention  forward: one warp per query row (b, h, t): lanes over key positions for the
 *              scores (each score a D-long dot in i order, as the CPU), max and sum over
 *              the warp, the probabilities written to probs[B][H][T][T] (zeros past the
 *              diagonal); then lanes over the head's dimensions, summing over keys in
 *              order. Backward: one warp per query row for dP, the row's D = sum P dP (in
 *              double), dS = P (dP - D) / sqrt(D) into a scratch [B][H][T][T], and dQ
 *              (keys in order); then one thread per element of dK / dV, (b, s, kv head, i),
 *              summing over the group's query heads in order and, within each, over the
 *              query positions t >= s in order — the CPU's order, without atomics.
 *
 * Speed is secondary here: these are simple kernels (no tiling, no tensor cores; the
 * attention is O(T^2 D) with the probabilities in memory, as the CPU tape keeps them).
 * Every launch configuration depends only on the shapes, nothing on timing: the results
 * are the same bits on every run.
 */
#include <math.h>

#include "gpu/kernels.h"

#define HF_WARPS 8 /* warps per block of the per-row kernels */

/* Float operations rounded one at a time, as the CPU does them (nvcc would fuse a * b + c
 * into one FMA, which rounds once). The simulator is host C++ built without FMA
 * instructions, so plain operators round each step there. */
#ifdef TANDEM_GPU_SIM
__device__ __forceinline__ float mul_rn(float a, float b) { return a * b; }
__device__ __forceinline__ float add_rn(float a, float b) { return a + b; }
__device__ __forceinline__ float sub_rn(float a, float b) { return a - b; }
#else
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
#endif

static unsigned hf_grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 65536 * 4 ? (blocks ? blocks : 1) : 65536 * 4);
}

/* ------------------------------------------------------------ RMSNorm */

template <typename T>
__global__ void __launch_bounds__(HF_WARPS * 32)
    rmsnorm_forward_kernel(T *out, float *rstd, const float *inp, const float *w, int N, int C,
                           double eps) {
    int row = blockIdx.x * HF_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    double ss = 0;
    for (int c = lane; c < C; c += 32) ss += (double)x[c] * x[c];
    float r = (float)(1.0 / sqrt(warp_sum(ss) / C + eps));
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f<T>(mul_rn(mul_rn(x[c], r), w[c]));
    if (rstd && lane == 0) rstd[row] = r;
}

/* d(x) of one row per warp: coef = (sum dy w x) r^3 / C, dx += dy w r - x coef; copy (when
 * not NULL) = the new dx rounded to T */
template <typename T>
__global__ void __launch_bounds__(HF_WARPS * 32)
    rmsnorm_backward_dx_kernel(float *dx, T *copy, const float *dy, const float *inp, const float *rstd,
                               const float *w, int N, int C) {
    int row = blockIdx.x * HF_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    size_t o = (size_t)row * C;
    const float *g = dy + o, *x = inp + o;
    float r = rstd[row];
    double dot = 0;
    for (int c = lane; c < C; c += 32) dot += (double)g[c] * w[c] * x[c];
    float coef = (float)(warp_sum(dot) * r * r * r / C);
    float *d = dx + o;
    for (int c = lane; c < C; c += 32) {
        d[c] = add_rn(d[c], sub_rn(mul_rn(mul_rn(g[c], w[c]), r), mul_rn(x[c], coef)));
        if (copy) copy[o + c] = from_f<T>(d[c]);
    }
}

/* part[k][c] = sum over the rows i of chunk k, in order, of (float)(dy x r) */
__global__ void rmsnorm_backward_dw_kernel(double *part, const float *dy, const float *inp,
                                           const float *rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
    if (c >= C) return;
    int i0 = k * GPU_ROW_CHUNK, i1 = min(N, i0 + GPU_ROW_CHUNK);
    double p = 0;
    for (int i = i0; i < i1; i++) {
        size_t o = (size_t)i * C + c;
        p += mul_rn(mul_rn(dy[o], inp[o]), rstd[i]);
    }
    part[(size_t)k * C + c] = p;
}

/* dw[c] += the chunks' partials summed in chunk order */
__global__ void rmsnorm_backward_dw_combine_kernel(float *dw, const double *part, int nchunks,
                                                   int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = part[c];
    for (int k = 1; k < nchunks; k++) acc += part[(size_t)k * C + c];
    dw[c] = add_rn(dw[c], (float)acc);
}

template <typename T>
cudaError_t gpu_rmsnorm_forward(T *out, float *rstd, const float *inp, const float *w, int N,
                                int C, double eps, cudaStream_t s) {
    if (N < 1 || C < 1) return N < 0 || C < 0 ? cudaErrorInvalidValue : cudaSuccess;
    unsigned blocks = (unsigned)((N + HF_WARPS - 1) / HF_WARPS);
    GPU_LAUNCH(rmsnorm_forward_kernel<T>, blocks, HF_WARPS * 32, 0, s, out, rstd, inp, w, N, C, eps);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_rmsnorm_backward(float *dx, T *copy, float *dw, double *part, const float *dy,
                                 const float *inp, const float *rstd, const float *w, int N,
                                 int C, cudaStream_t s) {
    if (N < 1 || C < 1) return N < 0 || C < 0 ? cudaErrorInvalidValue : cudaSuccess;
    unsigned blocks = (unsigned)((N + HF_WARPS - 1) / HF_WARPS);
    GPU_LAUNCH(rmsnorm_backward_dx_kernel<T>, blocks, HF_WARPS * 32, 0, s, dx, copy, dy, inp, rstd, w, N,
               C);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    int nchunks = (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK;
    dim3 grid((unsigned)((C + 255) / 256), (unsigned)nchunks);
    GPU_LAUNCH(rmsnorm_backward_dw_kernel, grid, 256, 0, s, part, dy, inp, rstd, N, C);
    if ((rc = cudaGetLastError()) != cudaSuccess) return rc;
    GPU_LAUNCH(rmsnorm_backward_dw_combine_kernel, (unsigned)((C + 255) / 256), 256, 0, s, dw,
               part, nchunks, C);
    return cudaGetLastError();
}

cudaError_t gpu_rmsnorm_backward(float *dx, float *dw, double *part, const float *dy,
                                 const float *inp, const float *rstd, const float *w, int N,
                                 int C, cudaStream_t s) {
    return gpu_rmsnorm_backward<float>(dx, (float *)nullptr, dw, part, dy, inp, rstd, w, N, C, s);
}

template cudaError_t gpu_rmsnorm_forward<float>(float *, float *, const float *, const float *, int, int,
                                                double, cudaStream_t);
template cudaError_t gpu_rmsnorm_forward<bf16>(bf16 *, float *, const float *, const float *, int, int,
                                               double, cudaStream_t);
template cudaError_t gpu_rmsnorm_backward<bf16>(float *, bf16 *, float *, double *, const float *,
                                                const float *, const float *, const float *, int, int,
                                                cudaStream_t);

/* ------------------------------------------------------------ RoPE */

/* Block per row r of x[B*T, heads*D] (rows ld elements apart); dynamic shared memory: D
 * floats, cos in [0, half), sign * sin in [half, D) (as the CPU's cs). */
template <typename T>
__global__ void rope_rotate_kernel(T *x, size_t ld, int T_, int heads, int D, double theta, float sign) {
    GPU_DYNAMIC_SMEM(smem);
    float *cs = (float *)smem;
    int r = blockIdx.x, t = r % T_, half = D / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        /* as HF computes it: inv_freq in float32, the angle t * inv_freq in float32 */
        float inv = (float)(1.0 / pow(theta, (double)(2 * i) / D));
        float ang = mul_rn((float)t, inv);
        cs[i] = cosf(ang);
        cs[half + i] = mul_rn(sign, sinf(ang));
    }
    __syncthreads();
    T *row = x + (size_t)r * ld;
    for (int j = threadIdx.x; j < heads * half; j += blockDim.x) {
        int h = j / half, i = j % half;
        T *v = row + (size_t)h * D;
        float a = to_f(v[i]), b = to_f(v[i + half]), c = cs[i], sn = cs[half + i];
        v[i] = from_f<T>(sub_rn(mul_rn(a, c), mul_rn(b, sn)));
        v[i + half] = from_f<T>(add_rn(mul_rn(b, c), mul_rn(a, sn)));
    }
}

template <typename T>
cudaError_t gpu_rope_rotate_rows(T *x, size_t ld, int B, int T_, int heads, int D, double theta, float sign,
                                 cudaStream_t s) {
    if (B < 0 || T_ < 0 || heads < 0 || D < 0 || D % 2 || (size_t)D * sizeof(float) > 48 * 1024 ||
        ld < (size_t)heads * D)
        return cudaErrorInvalidValue;
    if (!B || !T_ || !heads || !D) return cudaSuccess;
    int pairs = heads * (D / 2);
    int threads = pairs >= 256 ? 256 : (pairs + 31) / 32 * 32;
    GPU_LAUNCH(rope_rotate_kernel<T>, (unsigned)(B * T_), threads, (size_t)D * sizeof(float), s, x, ld, T_,
               heads, D, theta, sign);
    return cudaGetLastError();
}

cudaError_t gpu_rope_rotate(float *x, int B, int T, int heads, int D, double theta, float sign,
                            cudaStream_t s) {
    if (heads < 0 || D < 0) return cudaErrorInvalidValue;
    return gpu_rope_rotate_rows<float>(x, (size_t)heads * D, B, T, heads, D, theta, sign, s);
}

template cudaError_t gpu_rope_rotate_rows<bf16>(bf16 *, size_t, int, int, int, int, double, float, cudaStream_t);

/* ------------------------------------------------------------ SwiGLU */

template <typename T>
__global__ void swiglu_forward_kernel(T *act, const T *g, const T *u, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = to_f(g[i]);
        act[i] = from_f<T>(mul_rn(gi / add_rn(1.0f, expf(-gi)), to_f(u[i])));
    }
}

/* sg = sigmoid(g): du = dact g sg, dg = dact u sg (1 + g (1 - sg)) */
template <typename T>
__global__ void swiglu_backward_kernel(T *dg, T *du, const T *dact, const T *g, const T *u, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = to_f(g[i]), sg = 1.0f / add_rn(1.0f, expf(-gi)), d = to_f(dact[i]), ui = to_f(u[i]);
        du[i] = from_f<T>(mul_rn(mul_rn(d, gi), sg));
        dg[i] = from_f<T>(mul_rn(mul_rn(mul_rn(d, ui), sg), add_rn(1.0f, mul_rn(gi, sub_rn(1.0f, sg)))));
    }
}

template <typename T>
cudaError_t gpu_swiglu_forward(T *act, const T *g, const T *u, size_t n, cudaStream_t s) {
    if (!n) return cudaSuccess;
    GPU_LAUNCH(swiglu_forward_kernel<T>, hf_grid_for(n), 256, 0, s, act, g, u, n);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_swiglu_backward(T *dg, T *du, const T *dact, const T *g, const T *u, size_t n, cudaStream_t s) {
    if (!n) return cudaSuccess;
    GPU_LAUNCH(swiglu_backward_kernel<T>, hf_grid_for(n), 256, 0, s, dg, du, dact, g, u, n);
    return cudaGetLastError();
}

/* The packed layout: row r of gu[N, 2F] is g | u (gate_proj's and up_proj's outputs from
 * one matmul over their adjacent weights); act and dact are [N, F], dgu like gu. The same
 * arithmetic as the kernels above, element by element. */
template <typename T>
__global__ void swiglu_forward_packed_kernel(T *act, const T *gu, size_t N, size_t F) {
    size_t n = N * F;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / F, c = i % F;
        float gi = to_f(gu[r * 2 * F + c]);
        act[i] = from_f<T>(mul_rn(gi / add_rn(1.0f, expf(-gi)), to_f(gu[r * 2 * F + F + c])));
    }
}

template <typename T>
__global__ void swiglu_backward_packed_kernel(T *dgu, const T *dact, const T *gu, size_t N, size_t F) {
    size_t n = N * F;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / F, c = i % F, og = r * 2 * F + c, ou = og + F;
        float gi = to_f(gu[og]), sg = 1.0f / add_rn(1.0f, expf(-gi)), d = to_f(dact[i]), ui = to_f(gu[ou]);
        dgu[ou] = from_f<T>(mul_rn(mul_rn(d, gi), sg));
        dgu[og] = from_f<T>(mul_rn(mul_rn(mul_rn(d, ui), sg), add_rn(1.0f, mul_rn(gi, sub_rn(1.0f, sg)))));
    }
}

template <typename T>
cudaError_t gpu_swiglu_forward_packed(T *act, const T *gu, int N, int F, cudaStream_t s) {
    if (N < 0 || F < 0) return cudaErrorInvalidValue;
    size_t n = (size_t)N * F;
    if (!n) return cudaSuccess;
    GPU_LAUNCH(swiglu_forward_packed_kernel<T>, hf_grid_for(n), 256, 0, s, act, gu, (size_t)N, (size_t)F);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_swiglu_backward_packed(T *dgu, const T *dact, const T *gu, int N, int F, cudaStream_t s) {
    if (N < 0 || F < 0) return cudaErrorInvalidValue;
    size_t n = (size_t)N * F;
    if (!n) return cudaSuccess;
    GPU_LAUNCH(swiglu_backward_packed_kernel<T>, hf_grid_for(n), 256, 0, s, dgu, dact, gu, (size_t)N, (size_t)F);
    return cudaGetLastError();
}

template cudaError_t gpu_swiglu_forward_packed<float>(float *, const float *, int, int, cudaStream_t);
template cudaError_t gpu_swiglu_forward_packed<bf16>(bf16 *, const bf16 *, int, int, cudaStream_t);
template cudaError_t gpu_swiglu_backward_packed<float>(float *, const float *, const float *, int, int, cudaStream_t);
template cudaError_t gpu_swiglu_backward_packed<bf16>(bf16 *, const bf16 *, const bf16 *, int, int, cudaStream_t);

template cudaError_t gpu_swiglu_forward<float>(float *, const float *, const float *, size_t, cudaStream_t);
template cudaError_t gpu_swiglu_forward<bf16>(bf16 *, const bf16 *, const bf16 *, size_t, cudaStream_t);
template cudaError_t gpu_swiglu_backward<float>(float *, float *, const float *, const float *, const float *,
                                                size_t, cudaStream_t);
template cudaError_t gpu_swiglu_backward<bf16>(bf16 *, bf16 *, const bf16 *, const bf16 *, const bf16 *, size_t,
                                               cudaStream_t);

/* ------------------------------------------------------------ grouped-query attention */

struct gqa_dims {
    int B, T, H, Hkv, D, group;
    float scale; /* (float)(1 / sqrt(D)), as the CPU */
};

/* D-long dot product in i order, each product and sum rounded (the CPU's loop) */
__device__ __forceinline__ float dot_rn(const float *a, const float *b, int D) {
    float acc = 0;
    for (int i = 0; i < D; i++) acc = add_rn(acc, mul_rn(a[i], b[i]));
    return acc;
}

/* Warp per query row ((b * H + h) * T + t). The row of probs doubles as the scratch of the
 * exponentials until the sum is known; each lane rewrites only its own entries, and the
 * warp meets at __syncwarp (which orders memory within the warp) before reading them all. */
__global__ void __launch_bounds__(HF_WARPS * 32)
    gqa_forward_kernel(float *out, float *probs, const float *q, const float *k, const float *v,
                       gqa_dims d) {
    int row = blockIdx.x * HF_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= d.B * d.H * d.T) return;
    int t = row % d.T, h = (row / d.T) % d.H, b = row / (d.T * d.H), g = h / d.group;
    const float *qt = q + ((size_t)(b * d.T + t) * d.H + h) * d.D;
    float *pr = probs + (size_t)row * d.T;
    float mx = -INFINITY;
    for (int s = lane; s <= t; s += 32) {
        const float *ks = k + ((size_t)(b * d.T + s) * d.Hkv + g) * d.D;
        float sc = mul_rn(dot_rn(qt, ks, d.D), d.scale);
        pr[s] = sc;
        mx = fmaxf(mx, sc);
    }
    mx = warp_max(mx);
    double sum = 0;
    for (int s = lane; s <= t; s += 32) {
        float e = expf(pr[s] - mx);
        pr[s] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    for (int s = lane; s < d.T; s += 32) pr[s] = s <= t ? (float)(pr[s] / sum) : 0.0f;
    __syncwarp();
    float *ot = out + ((size_t)(b * d.T + t) * d.H + h) * d.D;
    for (int i = lane; i < d.D; i += 32) {
        float acc = 0;
        for (int s = 0; s <= t; s++)
            acc = add_rn(acc, mul_rn(pr[s], v[((size_t)(b * d.T + s) * d.Hkv + g) * d.D + i]));
        ot[i] = acc;
    }
}

/* Warp per query row: dP[s] = dO_t . V_s, Dsum = sum P dP (double), dS = P (dP - Dsum)
 * scale into ds (row of [B][H][T][T], zeros past the diagonal), then dQ_t = sum_s dS K_s
 * (keys in order). Each lane writes dP of its own keys and overwrites them with dS. */
__global__ void __launch_bounds__(HF_WARPS * 32)
    gqa_backward_dq_kernel(float *dq, float *ds, const float *datt, const float *k,
                           const float *v, const float *probs, gqa_dims d) {
    int row = blockIdx.x * HF_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= d.B * d.H * d.T) return;
    int t = row % d.T, h = (row / d.T) % d.H, b = row / (d.T * d.H), g = h / d.group;
    const float *dot = datt + ((size_t)(b * d.T + t) * d.H + h) * d.D;
    const float *pr = probs + (size_t)row * d.T;
    float *dsr = ds + (size_t)row * d.T;
    double sum = 0;
    for (int s = lane; s <= t; s += 32) {
        float dp = dot_rn(dot, v + ((size_t)(b * d.T + s) * d.Hkv + g) * d.D, d.D);
        dsr[s] = dp;
        sum += (double)pr[s] * dp;
    }
    float sumf = (float)warp_sum(sum);
    for (int s = lane; s < d.T; s += 32)
        dsr[s] = s <= t ? mul_rn(mul_rn(pr[s], sub_rn(dsr[s], sumf)), d.scale) : 0.0f;
    __syncwarp();
    float *dqt = dq + ((size_t)(b * d.T + t) * d.H + h) * d.D;
    for (int i = lane; i < d.D; i += 32) {
        float acc = 0;
        for (int s = 0; s <= t; s++)
            acc = add_rn(acc, mul_rn(dsr[s], k[((size_t)(b * d.T + s) * d.Hkv + g) * d.D + i]));
        dqt[i] = acc;
    }
}

/* Thread per element (b, s, kv head g, i) of dK and dV: over the group's query heads in
 * order and, within each, the query positions t = s .. T-1 in order,
 * dV += P[t][s] dO_t[i], dK += dS[t][s] Q_t[i] — the CPU's order of additions. */
__global__ void gqa_backward_dkv_kernel(float *dk, float *dv, const float *ds, const float *datt,
                                        const float *q, const float *probs, gqa_dims d) {
    size_t n = (size_t)d.B * d.T * d.Hkv * d.D;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(e % d.D), g = (int)(e / d.D % d.Hkv), s = (int)(e / ((size_t)d.D * d.Hkv) % d.T);
        int b = (int)(e / ((size_t)d.D * d.Hkv * d.T));
        float accv = 0, acck = 0;
        for (int h = g * d.group; h < (g + 1) * d.group; h++) {
            size_t prow = ((size_t)b * d.H + h) * d.T; /* row index of (b, h, t = 0) */
            for (int t = s; t < d.T; t++) {
                size_t o = ((size_t)(b * d.T + t) * d.H + h) * d.D + i;
                size_t ps = (prow + t) * d.T + s;
                accv = add_rn(accv, mul_rn(probs[ps], datt[o]));
                acck = add_rn(acck, mul_rn(ds[ps], q[o]));
            }
        }
        dv[e] = accv;
        dk[e] = acck;
    }
}

static cudaError_t gqa_check(int B, int T, int H, int Hkv, int D, gqa_dims *d) {
    if (B < 0 || T < 0 || H < 1 || Hkv < 1 || D < 1 || H % Hkv) return cudaErrorInvalidValue;
    *d = gqa_dims{B, T, H, Hkv, D, H / Hkv, (float)(1.0 / sqrt((double)D))};
    return cudaSuccess;
}

cudaError_t gpu_gqa_attention_forward(float *out, float *probs, const float *q, const float *k,
                                      const float *v, int B, int T, int H, int Hkv, int D,
                                      cudaStream_t s) {
    gqa_dims d;
    cudaError_t rc = gqa_check(B, T, H, Hkv, D, &d);
    if (rc != cudaSuccess || !B || !T) return rc;
    size_t rows = (size_t)B * H * T;
    GPU_LAUNCH(gqa_forward_kernel, (unsigned)((rows + HF_WARPS - 1) / HF_WARPS), HF_WARPS * 32, 0,
               s, out, probs, q, k, v, d);
    return cudaGetLastError();
}

cudaError_t gpu_gqa_attention_backward(float *dq, float *dk, float *dv, float *ds,
                                       const float *datt, const float *q, const float *k,
                                       const float *v, const float *probs, int B, int T, int H,
                                       int Hkv, int D, cudaStream_t s) {
    gqa_dims d;
    cudaError_t rc = gqa_check(B, T, H, Hkv, D, &d);
    if (rc != cudaSuccess || !B || !T) return rc;
    size_t rows = (size_t)B * H * T;
    GPU_LAUNCH(gqa_backward_dq_kernel, (unsigned)((rows + HF_WARPS - 1) / HF_WARPS),
               HF_WARPS * 32, 0, s, dq, ds, datt, k, v, probs, d);
    if ((rc = cudaGetLastError()) != cudaSuccess) return rc;
    GPU_LAUNCH(gqa_backward_dkv_kernel, hf_grid_for((size_t)B * T * Hkv * D), 256, 0, s, dk, dv,
               ds, datt, q, probs, d);
    return cudaGetLastError();
}
