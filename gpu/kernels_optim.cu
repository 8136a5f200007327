/* kernels_optim.cu — SGD, AdamW, the sum of squares for the global norm, scaling, and the
 * fp32 → bf16 cast of the parameters (bf16 precision).
 *
 * AdamW is torch.optim.AdamW's single-tensor update, operation for operation as cpu.c
 * writes it: p *= 1 - lr wd (2-D tensors only); m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). The tensors'
 * decay flags reach the kernel through a table of spans (≤ GPU_SPAN elements of one
 * tensor each, built once per workspace), one block per span.
 *
 * The norm's partial sums use cpu.c's fixed chunks of GPU_NORM_CHUNK elements, each
 * summed by one block in double in a fixed order; the chunks are added in order, by the
 * host (gpu_sumsq_chunks' callers) or by one device thread (gpu_clip_finish: a clip that
 * does not wait for the host). */
#include "gpu/kernels.h"

static unsigned grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 65536 * 4 ? (blocks ? blocks : 1) : 65536 * 4);
}

__global__ void sgd_kernel(float *p, const float *g, float lr, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}

cudaError_t gpu_sgd(float *p, const float *g, float lr, size_t n, cudaStream_t s) {
    GPU_LAUNCH(sgd_kernel, grid_for(n), 256, 0, s, p, g, lr, n);
    return cudaGetLastError();
}

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, const gpu_span *spans,
                             float decay_keep, float b1, float b2, float eps, float step_size,
                             float bc2_sqrt, const gpu_clip *gate) {
    if (gate && !gate->finite) return; /* a diverged step changes nothing (model.h's clip) */
    gpu_span sp = spans[blockIdx.x];
    float keep = sp.decay ? decay_keep : 1.0f;
    for (unsigned k = threadIdx.x; k < sp.n; k += blockDim.x) {
        size_t i = sp.off + k;
        float gi = g[i];
        float pi = p[i] * keep;
        float mi = m[i] * b1 + gi * (1.0f - b1);
        float vi = v[i] * b2 + gi * gi * (1.0f - b2);
        pi -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

cudaError_t gpu_adamw(float *p, const float *g, float *m, float *v, const gpu_span *spans,
                      int nspans, float decay_keep, float b1, float b2, float eps,
                      float step_size, float bc2_sqrt, const gpu_clip *gate, cudaStream_t s) {
    GPU_LAUNCH(adamw_kernel, (unsigned)nspans, 256, 0, s, p, g, m, v, spans, decay_keep, b1, b2,
               eps, step_size, bc2_sqrt, gate);
    return cudaGetLastError();
}

#define SUMSQ_THREADS 256
__global__ void __launch_bounds__(SUMSQ_THREADS)
    sumsq_chunks_kernel(double *part, const float *x, size_t n) {
    __shared__ double ws[SUMSQ_THREADS / 32];
    size_t i0 = (size_t)blockIdx.x * GPU_NORM_CHUNK;
    size_t i1 = i0 + GPU_NORM_CHUNK < n ? i0 + GPU_NORM_CHUNK : n;
    double acc = 0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += SUMSQ_THREADS) acc += (double)x[i] * x[i];
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0) ws[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = ws[0];
        for (int w = 1; w < SUMSQ_THREADS / 32; w++) t += ws[w];
        part[blockIdx.x] = t;
    }
}

cudaError_t gpu_sumsq_chunks(double *part, const float *x, size_t n, cudaStream_t s) {
    size_t nchunks = (n + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    GPU_LAUNCH(sumsq_chunks_kernel, (unsigned)nchunks, SUMSQ_THREADS, 0, s, part, x, n);
    return cudaGetLastError();
}

__global__ void scale_kernel(float *x, float a, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

cudaError_t gpu_scale(float *x, float a, size_t n, cudaStream_t s) {
    GPU_LAUNCH(scale_kernel, grid_for(n), 256, 0, s, x, a, n);
    return cudaGetLastError();
}

__global__ void clip_finish_kernel(gpu_clip *c, const double *part, size_t nchunks, double max_norm) {
    if (threadIdx.x != 0) return;
    double sum = 0;
    for (size_t k = 0; k < nchunks; k++) sum += part[k];
    double norm = sqrt(sum);
    c->norm = norm;
    c->scale = max_norm > 0 && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
    c->finite = isfinite(norm) ? 1 : 0;
}

cudaError_t gpu_clip_finish(gpu_clip *c, const double *part, size_t nchunks, double max_norm,
                            cudaStream_t s) {
    GPU_LAUNCH(clip_finish_kernel, 1, 32, 0, s, c, part, nchunks, max_norm);
    return cudaGetLastError();
}

__global__ void scale_clip_kernel(float *x, const gpu_clip *c, size_t n) {
    float a = c->scale;
    if (a == 1.0f) return; /* not clipped: x * 1 is x */
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

cudaError_t gpu_scale_clip(float *x, const gpu_clip *c, size_t n, cudaStream_t s) {
    GPU_LAUNCH(scale_clip_kernel, grid_for(n), 256, 0, s, x, c, n);
    return cudaGetLastError();
}

__global__ void cast_bf16_kernel(bf16 *out, const float *in, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

cudaError_t gpu_cast_bf16(bf16 *out, const float *in, size_t n, cudaStream_t s) {
    GPU_LAUNCH(cast_bf16_kernel, grid_for(n), 256, 0, s, out, in, n);
    return cudaGetLastError();
}
