/* cuda_runtime.h — the CUDA runtime as gpu/sim/ simulates it on the host (C++ only).
 *
 * Only what the .cu files of gpu/ use. Kernels are plain functions; a launch (GPU_LAUNCH in
 * gpu/kernels.h) runs every block in turn and every thread of a block as a fiber, so
 * __syncthreads, warp shuffles and WMMA's warp-wide operations are real rendezvous
 * points; shared memory is per block; device memory is host memory (so AddressSanitizer
 * sees every kernel's out-of-bounds access). See gpu/sim/sim.cpp.
 */
#ifndef TANDEM_GPU_SIM_CUDA_RUNTIME_H
#define TANDEM_GPU_SIM_CUDA_RUNTIME_H

#ifndef TANDEM_GPU_SIM
#error "gpu/sim/include holds the simulator's CUDA headers: build with -DTANDEM_GPU_SIM"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static /* blocks run one at a time: a static is the block's */
#define __align__(n) alignas(n)

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719,
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

#define cudaStreamNonBlocking 0x01
typedef struct CUstream_st *cudaStream_t;
#define cudaEventDisableTiming 0x02
typedef struct CUevent_st *cudaEvent_t;

struct uint3 {
    unsigned x, y, z;
};
struct uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem, sharedMemPerBlockOptin;
};
struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    int maxThreadsPerBlock;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
/* The simulator's own: how many times the host waited for the device since the start
 * (stream syncs, synchronous copies, copies into pageable memory), and how many times it
 * waited on an event. Tests count a step's waits with it (sim.cpp). */
extern "C" void gpu_sim_waits(long *device_waits, long *event_waits);
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *func);

/* ---------------------------------------------------------------- device side */

uint3 sim_thread_idx(void);
uint3 sim_block_idx(void);
dim3 sim_block_dim(void);
dim3 sim_grid_dim(void);
#define threadIdx (sim_thread_idx())
#define blockIdx (sim_block_idx())
#define blockDim (sim_block_dim())
#define gridDim (sim_grid_dim())

void __syncthreads(void);
void sim_warp_barrier(void);
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    sim_warp_barrier();
}
/* each lane posts `bytes` from in, then reads lane src's post into out */
void sim_warp_exchange(const void *in, void *out, unsigned src, size_t bytes);
unsigned sim_lane(void);
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    (void)mask;
    T r;
    sim_warp_exchange(&v, &r, sim_lane() ^ (unsigned)lane_mask, sizeof(T));
    return r;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
unsigned char *sim_dynamic_smem(void);
/* stops the run when p is not aligned to `bytes` (a vector access that would fault on the
 * GPU) */
void sim_check_align(const void *p, size_t bytes, const char *what);

/* ---------------------------------------------------------------- launches */

typedef void (*sim_body)(void *);
cudaError_t sim_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem,
                    sim_body body, void *arg);

/* Runs kernel k over the grid with the arguments converted to its parameter types, as a
 * CUDA launch does; the result is what cudaGetLastError() reports after a launch. */
template <typename... P, typename... A>
cudaError_t sim_launch(const char *name, void (*k)(P...), dim3 grid, dim3 block, size_t smem,
                       A &&...a) {
    struct Call {
        void (*k)(P...);
        std::tuple<P...> args;
    };
    Call call{k, std::tuple<P...>(std::forward<A>(a)...)};
    return sim_run(
        name, (const void *)k, grid, block, smem,
        [](void *c) {
            Call *cc = (Call *)c;
            std::apply(cc->k, cc->args);
        },
        &call);
}

#endif
