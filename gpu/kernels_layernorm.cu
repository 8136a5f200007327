/* kernels_layernorm.cu — LayerNorm forward and backward (eps 1e-5), as model/cpu.c.
 *
 * Forward: one warp per row; mean and variance summed in double over the lanes' strided
 * elements, then a fixed butterfly. The row's output is rounded to the activation type.
 * Backward: one warp per row for d(inp) (added onto the residual gradient, which is
 * float in both precisions, optionally copied out rounded to bf16 for the next matmul);
 * the weight and bias gradients are sums over rows, done in fixed chunks of
 * GPU_ROW_CHUNK rows into double partials (one thread per (chunk, channel), rows in
 * order) that are then combined in chunk order: cpu.c's order, no atomics. */
#include "gpu/kernels.h"

#define LN_EPS 1e-5
#define LN_WARPS 8

template <typename T>
__global__ void __launch_bounds__(LN_WARPS * 32)
    layernorm_forward_kernel(T *out, float *mean, float *rstd, const float *inp, const float *w,
                             const float *b, int N, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    double s = 0;
    for (int c = lane; c < C; c += 32) s += x[c];
    double m = warp_sum(s) / C;
    double v = 0;
    for (int c = lane; c < C; c += 32) {
        double d = x[c] - m;
        v += d * d;
    }
    float r = (float)(1.0 / sqrt(warp_sum(v) / C + LN_EPS));
    float mr = (float)m;
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f<T>((x[c] - mr) * r * w[c] + b[c]);
    if (lane == 0) {
        mean[row] = mr;
        rstd[row] = r;
    }
}

template <typename T>
cudaError_t gpu_layernorm_forward(T *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, int N, int C, cudaStream_t s) {
    unsigned blocks = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    GPU_LAUNCH(layernorm_forward_kernel<T>, blocks, LN_WARPS * 32, 0, s, out, mean, rstd, inp, w, b,
               N, C);
    return cudaGetLastError();
}

/* d(inp) of one row per warp: with n = (x - mean) rstd and dn = w g,
 * dx = rstd (dn - mean(dn) - n mean(dn n)), added onto dinp */
template <typename T>
__global__ void __launch_bounds__(LN_WARPS * 32)
    layernorm_backward_dx_kernel(float *dinp, T *copy, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, const float *w, int N,
                                 int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    size_t o = (size_t)row * C;
    const float *g = dout + o, *x = inp + o;
    float m = mean[row], r = rstd[row];
    double s_dn = 0, s_dn_n = 0;
    for (int c = lane; c < C; c += 32) {
        double dn = (double)w[c] * g[c];
        s_dn += dn;
        s_dn_n += dn * ((x[c] - m) * r);
    }
    float a = (float)(warp_sum(s_dn) / C), bc = (float)(warp_sum(s_dn_n) / C);
    float *d = dinp + o;
    for (int c = lane; c < C; c += 32) {
        float n = (x[c] - m) * r;
        float v = d[c] + r * (w[c] * g[c] - a - n * bc);
        d[c] = v;
        if (copy) copy[o + c] = from_f<T>(v);
    }
}

/* part[k][0..C) = sum over the chunk's rows of g * n, part[k][C..2C) = sum of g */
__global__ void layernorm_backward_dwdb_kernel(double *part, const float *dout, const float *inp,
                                               const float *mean, const float *rstd, int N,
                                               int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
    if (c >= C) return;
    int i0 = k * GPU_ROW_CHUNK, i1 = min(N, i0 + GPU_ROW_CHUNK);
    double pw = 0, pb = 0;
    for (int i = i0; i < i1; i++) {
        size_t o = (size_t)i * C + c;
        float g = dout[o];
        float n = (inp[o] - mean[i]) * rstd[i];
        pw += (double)g * n;
        pb += g;
    }
    part[(size_t)k * 2 * C + c] = pw;
    part[(size_t)k * 2 * C + C + c] = pb;
}

template <typename T>
cudaError_t gpu_layernorm_backward(float *dinp, T *copy, float *dw, float *db, double *part,
                                   const float *dout, const float *inp, const float *mean,
                                   const float *rstd, const float *w, int N, int C,
                                   cudaStream_t s) {
    unsigned blocks = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    GPU_LAUNCH(layernorm_backward_dx_kernel<T>, blocks, LN_WARPS * 32, 0, s, dinp, copy, dout, inp,
               mean, rstd, w, N, C);
    int nchunks = (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK;
    dim3 grid((unsigned)((C + 255) / 256), (unsigned)nchunks);
    GPU_LAUNCH(layernorm_backward_dwdb_kernel, grid, 256, 0, s, part, dout, inp, mean, rstd, N, C);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    if ((rc = gpu_combine_chunks(dw, part, nchunks, 2 * (size_t)C, C, s)) != cudaSuccess) return rc;
    return gpu_combine_chunks(db, part + C, nchunks, 2 * (size_t)C, C, s);
}

template cudaError_t gpu_layernorm_forward<float>(float *, float *, float *, const float *,
                                                  const float *, const float *, int, int,
                                                  cudaStream_t);
template cudaError_t gpu_layernorm_forward<bf16>(bf16 *, float *, float *, const float *,
                                                 const float *, const float *, int, int,
                                                 cudaStream_t);
template cudaError_t gpu_layernorm_backward<float>(float *, float *, float *, float *, double *,
                                                   const float *, const float *, const float *,
                                                   const float *, const float *, int, int,
                                                   cudaStream_t);
template cudaError_t gpu_layernorm_backward<bf16>(float *, bf16 *, float *, float *, double *,
                                                  const float *, const float *, const float *,
                                                  const float *, const float *, int, int,
                                                  cudaStream_t);
