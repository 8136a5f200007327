/* check.h — error checks of the CUDA backend: every CUDA runtime and cuBLASLt call and
 * every kernel launch is checked, and a failure becomes ERR_INTERNAL in the caller's
 * tdm_err naming the call, the file and the line (never an abort).
 *
 *   CUDA_TRY(cudaMemcpy(...), e);          returns from the enclosing int function
 *   CUBLAS_TRY(cublasLtMatmul(...), e);
 *   LAUNCH_TRY(kernel<<<...>>>(...), e);   checks cudaGetLastError() after the launch
 *
 * C++ only (included by the .cu files of gpu/).
 */
#ifndef TANDEM_GPU_CHECK_H
#define TANDEM_GPU_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime.h>

extern "C" {
#include "util/err.h"
}

/* Sets e to ERR_INTERNAL "CUDA error in CALL at FILE:LINE: message" and returns its code. */
int gpu_cuda_error(tdm_err *e, cudaError_t rc, const char *call, const char *file, int line);
int gpu_cublas_error(tdm_err *e, cublasStatus_t rc, const char *call, const char *file, int line);

#define CUDA_TRY(call, e)                                                                   \
    do {                                                                                    \
        cudaError_t rc_ = (call);                                                           \
        if (rc_ != cudaSuccess) return gpu_cuda_error((e), rc_, #call, __FILE__, __LINE__); \
    } while (0)

#define CUBLAS_TRY(call, e)                                                                    \
    do {                                                                                       \
        cublasStatus_t rc_ = (call);                                                           \
        if (rc_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return gpu_cublas_error((e), rc_, #call, __FILE__, __LINE__);                      \
    } while (0)

/* A launcher (gpu/kernels.h) returns cudaGetLastError() after its launches. */
#define LAUNCH_TRY(launch, e) CUDA_TRY(launch, e)

#endif
