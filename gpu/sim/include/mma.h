/* mma.h — nvcuda::wmma as gpu/sim/ simulates it: m16n16k16 with bf16 (or float) inputs
 * and float accumulators. Every lane holds the whole 16x16 tile (the real fragments are
 * spread over the warp; their contents are opaque to the kernels, so this is
 * indistinguishable to code that only loads, multiplies and stores them), but, as on the
 * hardware, each lane owns 8 of an accumulator's 256 elements: it alone loads, computes
 * and stores them. A store starts at a warp rendezvous, like the real warp-wide one. The
 * product is exact float arithmetic in k order: the simulator checks indexing and
 * layouts, not the tensor cores' rounding. */
#ifndef TANDEM_GPU_SIM_MMA_H
#define TANDEM_GPU_SIM_MMA_H

#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    float v[16][16];
};

/* WMMA's rules for a tile's pointer and leading dimension: 256-bit aligned, ldm a
 * multiple of 16 bytes. A violation is undefined on the GPU; here it stops the run. */
template <typename T> inline void sim_check_tile(const T *p, unsigned ldm, const char *what) {
    if ((uintptr_t)p % 32 != 0 || (ldm * sizeof(T)) % 16 != 0) {
        fprintf(stderr, "gpu sim: WMMA %s at %p with ldm %u (%zu-byte elements): the pointer must "
                "be 32-byte aligned and ldm a multiple of 16 bytes\n", what, (const void *)p, ldm,
                sizeof(T));
        abort();
    }
}

inline float sim_elem(float x) { return x; }
inline float sim_elem(__nv_bfloat16 x) { return __bfloat162float(x); }

template <int M, int N, int K, typename T, typename L>
void load_matrix_sync(fragment<matrix_a, M, N, K, T, L> &f, const T *p, unsigned ldm) {
    static_assert(M == 16 && N == 16 && K == 16, "the simulator has m16n16k16 only");
    sim_check_tile(p, ldm, "load (matrix_a)");
    const bool row = std::is_same<L, row_major>::value;
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) f.v[i][k] = sim_elem(row ? p[i * ldm + k] : p[i + k * ldm]);
}

template <int M, int N, int K, typename T, typename L>
void load_matrix_sync(fragment<matrix_b, M, N, K, T, L> &f, const T *p, unsigned ldm) {
    static_assert(M == 16 && N == 16 && K == 16, "the simulator has m16n16k16 only");
    sim_check_tile(p, ldm, "load (matrix_b)");
    const bool row = std::is_same<L, row_major>::value;
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 16; j++) f.v[k][j] = sim_elem(row ? p[k * ldm + j] : p[k + j * ldm]);
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p, unsigned ldm,
                      layout_t layout) {
    sim_check_tile(p, ldm, "load (accumulator)");
    for (int e = (int)sim_lane(); e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        f.v[i][j] = layout == mem_row_major ? p[i * ldm + j] : p[i + j * ldm];
    }
}

template <int M, int N, int K>
void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f, unsigned ldm,
                       layout_t layout) {
    sim_check_tile(p, ldm, "store");
    sim_warp_barrier();
    for (int e = (int)sim_lane(); e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        if (layout == mem_row_major) p[i * ldm + j] = f.v[i][j];
        else p[i + j * ldm] = f.v[i][j];
    }
}

template <int M, int N, int K>
void fill_fragment(fragment<accumulator, M, N, K, float> &f, float x) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.v[i][j] = x;
}

template <int M, int N, int K, typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, T, LA> &a,
              const fragment<matrix_b, M, N, K, T, LB> &b,
              const fragment<accumulator, M, N, K, float> &c) {
    /* each lane computes (and later stores) its own 8 of the 256 outputs, as the real
     * fragments are spread over the warp; d may be c */
    for (int e = (int)sim_lane(); e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        float s = c.v[i][j];
        for (int k = 0; k < 16; k++) s = fmaf(a.v[i][k], b.v[k][j], s);
        d.v[i][j] = s;
    }
}

} // namespace wmma
} // namespace nvcuda

#endif
