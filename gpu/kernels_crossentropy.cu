/* kernels_crossentropy.cu — softmax cross-entropy over the vocabulary, per row.
 *
 * Forward: one block per row of logits: the row's max, then the sum of e^(x - max) in
 * double (each thread's strided elements in order, then a fixed tree over warps), and
 * the row's loss log(sum) - (x[target] - max). The probabilities are not stored; the
 * backward recomputes them from (max, 1/sum) as cpu.c computes them: e^(x - max) * inv.
 * Backward: dlogits = g_row * (p - onehot(target)), with g_row = coef[m] / ntok[m] of the
 * row's domain (computed on the host), written in the activation type. */
#include <math.h>

#include "gpu/kernels.h"

#define CE_THREADS 512
#define CE_WARPS (CE_THREADS / 32)

__global__ void __launch_bounds__(CE_THREADS)
    crossentropy_forward_kernel(double *row_loss, float *row_max, float *row_inv,
                                const float *logits, size_t ld, const int32_t *targets, int V) {
    __shared__ float smax[CE_WARPS];
    __shared__ double ssum[CE_WARPS];
    int row = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float *x = logits + (size_t)row * ld;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += CE_THREADS) mx = fmaxf(mx, x[v]);
    mx = warp_max(mx);
    if (lane == 0) smax[warp] = mx;
    __syncthreads();
    mx = smax[0];
    for (int w = 1; w < CE_WARPS; w++) mx = fmaxf(mx, smax[w]);
    double sum = 0;
    for (int v = threadIdx.x; v < V; v += CE_THREADS) sum += (double)expf(x[v] - mx);
    sum = warp_sum(sum);
    if (lane == 0) ssum[warp] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = ssum[0];
        for (int w = 1; w < CE_WARPS; w++) total += ssum[w];
        row_max[row] = mx;
        row_inv[row] = (float)(1.0 / total);
        row_loss[row] = log(total) - (double)(x[targets[row]] - mx);
    }
}

cudaError_t gpu_crossentropy_forward(double *row_loss, float *row_max, float *row_inv,
                                     const float *logits, size_t ld, const int32_t *targets, int N,
                                     int V, cudaStream_t s) {
    GPU_LAUNCH(crossentropy_forward_kernel, (unsigned)N, CE_THREADS, 0, s, row_loss, row_max,
               row_inv, logits, ld, targets, V);
    return cudaGetLastError();
}

/* grid (rows, column blocks): rows can exceed gridDim.y's 65535, so they go on x; the
 * columns (up to MODEL_VOCAB_MAX padded to 64, more than 65535 blocks of 256) are strided
 * over at most CE_BACK_BLOCKS_Y blocks */
#define CE_BACK_BLOCKS_Y 65535u
template <typename T>
__global__ void crossentropy_backward_kernel(T *dlogits, size_t ldd, const float *logits, size_t ld,
                                             const float *row_max, const float *row_inv,
                                             const float *row_g, const int32_t *targets, int V) {
    int row = blockIdx.x;
    for (size_t v = (size_t)blockIdx.y * blockDim.x + threadIdx.x; v < ldd;
         v += (size_t)gridDim.y * blockDim.x) {
        if (v >= (size_t)V) {
            /* the padding columns up to ldd: zero, so that a head matmul over ldd rows of
             * weights adds nothing for them */
            dlogits[(size_t)row * ldd + v] = from_f<T>(0.0f);
            continue;
        }
        float p = expf(logits[(size_t)row * ld + v] - row_max[row]) * row_inv[row];
        float g = row_g[row];
        float d = p * g;
        if ((int)v == targets[row]) d -= g;
        dlogits[(size_t)row * ldd + v] = from_f<T>(d);
    }
}

template <typename T>
cudaError_t gpu_crossentropy_backward(T *dlogits, size_t ldd, const float *logits, size_t ld,
                                      const float *row_max, const float *row_inv,
                                      const float *row_g, const int32_t *targets, int N, int V,
                                      cudaStream_t s) {
    size_t cols = (ldd + 255) / 256; /* every column of the ldd, padding too */
    dim3 grid((unsigned)N, (unsigned)(cols < CE_BACK_BLOCKS_Y ? cols : CE_BACK_BLOCKS_Y));
    GPU_LAUNCH(crossentropy_backward_kernel<T>, grid, 256, 0, s, dlogits, ldd, logits, ld, row_max,
               row_inv, row_g, targets, V);
    return cudaGetLastError();
}

template cudaError_t gpu_crossentropy_backward<float>(float *, size_t, const float *, size_t,
                                                      const float *, const float *, const float *,
                                                      const int32_t *, int, int, cudaStream_t);
template cudaError_t gpu_crossentropy_backward<bf16>(bf16 *, size_t, const float *, size_t,
                                                     const float *, const float *, const float *,
                                                     const int32_t *, int, int, cudaStream_t);
