/* kernels_bias.cu — sums over rows (bias gradients) in a fixed order.
 *
 * Rows are summed in fixed chunks of GPU_ROW_CHUNK rows, one thread per (chunk, column)
 * walking its rows in order into a double partial; the partials are then combined in
 * chunk order by one thread per column. This is cpu.c's column_sum order, and no
 * partition depends on anything but N and C. */
#include "gpu/kernels.h"

template <typename T>
__global__ void column_sum_chunks_kernel(double *part, const T *inp, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
    if (c >= C) return;
    int i0 = k * GPU_ROW_CHUNK, i1 = min(N, i0 + GPU_ROW_CHUNK);
    double acc = 0;
    for (int i = i0; i < i1; i++) acc += to_f(inp[(size_t)i * C + c]);
    part[(size_t)k * C + c] = acc;
}

__global__ void combine_chunks_kernel(float *out, const double *part, int nchunks, size_t stride,
                                      int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = part[c];
    for (int k = 1; k < nchunks; k++) acc += part[(size_t)k * stride + c];
    out[c] = (float)acc;
}

cudaError_t gpu_combine_chunks(float *out, const double *part, int nchunks, size_t stride, int C,
                               cudaStream_t s) {
    GPU_LAUNCH(combine_chunks_kernel, (unsigned)((C + 255) / 256), 256, 0, s, out, part, nchunks,
               stride, C);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_column_sum(float *out, double *part, const T *inp, int N, int C, cudaStream_t s) {
    int nchunks = (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK;
    dim3 grid((unsigned)((C + 255) / 256), (unsigned)nchunks);
    GPU_LAUNCH(column_sum_chunks_kernel<T>, grid, 256, 0, s, part, inp, N, C);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    return gpu_combine_chunks(out, part, nchunks, (size_t)C, C, s);
}

template cudaError_t gpu_column_sum<float>(float *, double *, const float *, int, int, cudaStream_t);
template cudaError_t gpu_column_sum<bf16>(float *, double *, const bf16 *, int, int, cudaStream_t);
