/* kernels_gelu.cu — GELU (tanh approximation), forward and backward, elementwise.
 *
 * Same formulas as model/cpu.c: gelu(x) = x * sigmoid(2u) = x / (1 + e^(-2u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3), the exponent's argument clamped to [-87, 88];
 * gelu'(x) = s + 2 x s (1 - s) du/dx with s = sigmoid(2u). Arithmetic in float, inputs
 * and outputs in the activation type. */
#include "gpu/kernels.h"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

__device__ __forceinline__ float clamp_exp_arg(float x) { return fminf(fmaxf(x, -87.0f), 88.0f); }

template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = to_f(inp[i]);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        out[i] = from_f<T>(x / (1.0f + expf(clamp_exp_arg(-2.0f * u))));
    }
}

template <typename T> __global__ void gelu_backward_kernel(T *dinout, const T *inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = to_f(inp[i]);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float sg = 1.0f / (1.0f + expf(clamp_exp_arg(-2.0f * u)));
        float du = GELU_K * (1.0f + 0.134145f /* (float)(3 * 0.044715) */ * x * x);
        dinout[i] = from_f<T>(to_f(dinout[i]) * (sg + 2.0f * x * sg * (1.0f - sg) * du));
    }
}

static unsigned grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 65536 * 4 ? (blocks ? blocks : 1) : 65536 * 4);
}

template <typename T> cudaError_t gpu_gelu_forward(T *out, const T *inp, size_t n, cudaStream_t s) {
    GPU_LAUNCH(gelu_forward_kernel<T>, grid_for(n), 256, 0, s, out, inp, n);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_gelu_backward(T *dinout, const T *inp, size_t n, cudaStream_t s) {
    GPU_LAUNCH(gelu_backward_kernel<T>, grid_for(n), 256, 0, s, dinout, inp, n);
    return cudaGetLastError();
}

template cudaError_t gpu_gelu_forward<float>(float *, const float *, size_t, cudaStream_t);
template cudaError_t gpu_gelu_forward<bf16>(bf16 *, const bf16 *, size_t, cudaStream_t);
template cudaError_t gpu_gelu_backward<float>(float *, const float *, size_t, cudaStream_t);
template cudaError_t gpu_gelu_backward<bf16>(bf16 *, const bf16 *, size_t, cudaStream_t);
