/* kernels_encoder.cu — token + position embeddings, forward and backward.
 *
 * The backward's scatter into dwte is where tokens collide (a token appears at many
 * positions). cpu.c gives each thread a block of channels and walks the rows in order;
 * here the host sorts the batch's rows by token once per forward (a counting sort, stable,
 * so rows stay in increasing order within a token), and one thread per (distinct token,
 * channel) adds that token's rows in increasing row order onto the head's contribution:
 * exactly cpu.c's order of additions, with one writer per element and no atomics. */
#include "gpu/kernels.h"

__global__ void encoder_forward_kernel(float *out, const int32_t *inp, const float *wte,
                                       const float *wpe, int T, int C, size_t total) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    size_t i = idx / C;
    int c = (int)(idx % C), t = (int)(i % T);
    out[idx] = wte[(size_t)inp[i] * C + c] + wpe[(size_t)t * C + c];
}

cudaError_t gpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                                int B, int T, int C, cudaStream_t s) {
    size_t total = (size_t)B * T * C;
    unsigned blocks = (unsigned)((total + 255) / 256);
    GPU_LAUNCH(encoder_forward_kernel, blocks, 256, 0, s, out, inp, wte, wpe, T, C, total);
    return cudaGetLastError();
}

/* one thread per (t, c) of dwpe: the batch summed in b order, in double (as cpu.c) */
__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dres, int B, int T, int C,
                                            int ctx) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)ctx * C) return;
    int t = (int)(idx / C), c = (int)(idx % C);
    if (t >= T) {
        dwpe[idx] = 0.0f;
        return;
    }
    double acc = 0;
    for (int b = 0; b < B; b++) acc += dres[((size_t)b * T + t) * C + c];
    dwpe[idx] = (float)acc;
}

cudaError_t gpu_encoder_backward_wpe(float *dwpe, const float *dres, int B, int T, int C, int ctx,
                                     cudaStream_t s) {
    size_t total = (size_t)ctx * C;
    unsigned blocks = (unsigned)((total + 255) / 256);
    GPU_LAUNCH(encoder_backward_wpe_kernel, blocks, 256, 0, s, dwpe, dres, B, T, C, ctx);
    return cudaGetLastError();
}

/* grid (distinct tokens, channel blocks): one thread per (token, channel) */
__global__ void encoder_backward_wte_kernel(float *dwte, const float *dres, const int32_t *uniq,
                                            const int32_t *start, const int32_t *pos, int C) {
    int u = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float *w = dwte + (size_t)uniq[u] * C + c;
    float acc = *w;
    for (int p = start[u]; p < start[u + 1]; p++) acc += dres[(size_t)pos[p] * C + c];
    *w = acc;
}

cudaError_t gpu_encoder_backward_wte(float *dwte, const float *dres, const int32_t *uniq,
                                     const int32_t *start, const int32_t *pos, int nuniq, int C,
                                     cudaStream_t s) {
    if (nuniq <= 0) return cudaGetLastError();
    int threads = C < 256 ? ((C + 31) / 32) * 32 : 256;
    dim3 grid((unsigned)nuniq, (unsigned)((C + threads - 1) / threads));
    GPU_LAUNCH(encoder_backward_wte_kernel, grid, threads, 0, s, dwte, dres, uniq, start, pos, C);
    return cudaGetLastError();
}
