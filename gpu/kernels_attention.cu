/* kernels_attention.cu — fused causal self-attention, flash-style, forward and backward,
 * with grouped-query heads.
 *
 * Layout: each row of qkv[B, T, (H + 2 Hkv) hs] holds q (H heads) | k (Hkv heads) | v (Hkv
 * heads), head h of q at columns h*hs.., head g of k at H*hs + g*hs, of v at
 * (H + Hkv)*hs + g*hs; query head h reads key/value head h / (H / Hkv). GPT-2 (model/cpu.c)
 * is the case Hkv = H: qkv[B, T, 3C]. The output is [B, T, H hs] with head h at h*hs.
 * Scores s = (q·k) / sqrt(hs), causal (key j visible to query i iff j <= i).
 *
 * All three kernels work on square tiles of `tile` (64, 32 or 16) rows, staged in shared
 * memory with the head dimension zero-padded to a multiple of 16 (hsp); the products of
 * two tiles go through block_mm, which runs on the tensor cores (WMMA, bf16 in, fp32
 * accumulate) in bf16 precision and as fp32 FMAs in fp32 precision. Everything else — the
 * online softmax, masking, rescaling — is shared by both precisions, in float.
 *
 *   forward   one block per (b, h, query tile): keys tile by tile up to the diagonal with
 *             the online softmax (running max m, running sum l, O rescaled by e^(m_old -
 *             m_new)); writes O / l and lse = m + log l per row.
 *   backward  D_i = dO_i · O_i (one warp per row); then
 *             dK, dV: one block per (b, key/value head, key tile): for each query head of
 *                     its group in order, query tiles from the diagonal down in order:
 *                     P = exp(s - lse), dV += P^T dO, dP = dO V^T,
 *                     dS = P (dP - D) / sqrt(hs), dK += dS^T Q;
 *             dQ:     one block per (b, h, query tile), key tiles up to the diagonal in
 *                     order: the same P and dS (same inputs, same code, same bits),
 *                     dQ += dS K.
 *             Every output element has one writer and a fixed summation order: no
 *             atomics, so the backward is deterministic.
 *
 * Rows past T (the last tile's padding) are loaded as zeros and masked (P = 0 for queries
 * i >= T), so they contribute nothing and are never written.
 */
#include <math.h>
#include <mma.h>

#include <type_traits>

#include "gpu/kernels.h"

using namespace nvcuda;

#define ATT_THREADS 256
#define ATT_WARPS (ATT_THREADS / 32)

/* Leading dimensions in shared memory, padded by 16 bytes against bank conflicts; they
 * keep WMMA's requirements (ldm a multiple of 8 for bf16, 4 for float; every 16x16
 * sub-tile 32-byte aligned, since rows are 16 apart and columns 16 apart). */
template <typename T> __host__ __device__ inline int ld_act(int cols) {
    return sizeof(T) == 2 ? cols + 8 : cols + 4;
}
__host__ __device__ inline int ld_f32(int cols) { return cols + 4; }
__host__ __device__ inline size_t round128(size_t b) { return (b + 127) / 128 * 128; }

/* ------------------------------------------------------------ tile products */

/* C[M x N] (float, ldc) = (ACC ? C : 0) + A[M x K] B[K x N], where
 * A(i, k) = A_ROW ? A[i*lda + k] : A[k*lda + i] and B(k, j) = B_ROW ? B[k*ldb + j] : B[j*ldb + k].
 * M, N, K are multiples of 16. Called by all threads of the block; no barrier at the end.
 * fp32: each thread owns 4x4 outputs and sums over k in order with fmaf. */
template <bool A_ROW, bool B_ROW, bool ACC>
__device__ void block_mm(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M,
                         int N, int K) {
    int mcols = N / 4, count = (M / 4) * mcols;
    for (int t = threadIdx.x; t < count; t += blockDim.x) {
        int i0 = (t / mcols) * 4, j0 = (t % mcols) * 4;
        float acc[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[r][c] = ACC ? C[(i0 + r) * ldc + j0 + c] : 0.0f;
        for (int k = 0; k < K; k++) {
            float a[4], b[4];
#pragma unroll
            for (int r = 0; r < 4; r++) a[r] = A_ROW ? A[(i0 + r) * lda + k] : A[k * lda + i0 + r];
#pragma unroll
            for (int c = 0; c < 4; c++) b[c] = B_ROW ? B[k * ldb + j0 + c] : B[(j0 + c) * ldb + k];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) C[(i0 + r) * ldc + j0 + c] = acc[r][c];
    }
}

/* bf16: each warp owns 16x16 output sub-tiles; WMMA m16n16k16, fp32 accumulate. */
template <bool A_ROW, bool B_ROW, bool ACC>
__device__ void block_mm(float *C, int ldc, const bf16 *A, int lda, const bf16 *B, int ldb, int M,
                         int N, int K) {
    typedef typename std::conditional<A_ROW, wmma::row_major, wmma::col_major>::type LA;
    typedef typename std::conditional<B_ROW, wmma::row_major, wmma::col_major>::type LB;
    int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    int tn = N / 16, count = (M / 16) * tn;
    for (int t = warp; t < count; t += nwarps) {
        int i0 = (t / tn) * 16, j0 = (t % tn) * 16;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
        if (ACC)
            wmma::load_matrix_sync(c, C + i0 * ldc + j0, ldc, wmma::mem_row_major);
        else
            wmma::fill_fragment(c, 0.0f);
        for (int k = 0; k < K; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LB> b;
            wmma::load_matrix_sync(a, A_ROW ? A + i0 * lda + k : A + k * lda + i0, lda);
            wmma::load_matrix_sync(b, B_ROW ? B + k * ldb + j0 : B + j0 * ldb + k, ldb);
            wmma::mma_sync(c, a, b, c);
        }
        wmma::store_matrix_sync(C + i0 * ldc + j0, c, ldc, wmma::mem_row_major);
    }
}

/* ------------------------------------------------------------ tiles */

/* rs: a row of qkv (elements); oc: a row of the output; koff, voff: where k and v start
 * in a row of qkv; G: query heads per key/value head */
struct AttShape {
    int B, T, H, Hkv, G, hs, hsp, tile, ntiles, rs, oc, koff, voff;
    float scale;
};

static AttShape make_shape(int B, int T, int H, int Hkv, int hs, int tile) {
    AttShape d;
    d.B = B, d.T = T, d.H = H, d.Hkv = Hkv, d.G = H / Hkv, d.hs = hs;
    d.rs = (H + 2 * Hkv) * hs, d.oc = H * hs, d.koff = H * hs, d.voff = (H + Hkv) * hs;
    d.hsp = (d.hs + 15) / 16 * 16;
    d.tile = tile;
    d.ntiles = (T + tile - 1) / tile;
    d.scale = (float)(1.0 / sqrt((double)d.hs));
    return d;
}

/* dst[r][c] (ld) = src row t0 + r, column c of a [T, stride] matrix, zero outside
 * t < T, c < hs; r < tile, c < hsp. With hs and the stride multiples of 16 bytes' worth
 * of elements (GPT-2's and Qwen2's shapes), in 16-byte loads: src rows start at multiples
 * of the stride from a 256-byte aligned buffer plus a multiple of hs, dst rows at
 * multiples of ld (a multiple of 8 bf16 or 4 floats) from a 128-byte aligned region. */
template <typename T>
__device__ void load_tile(T *dst, int ld, const T *src, int stride, int t0, const AttShape &d) {
    const int VEC = 16 / (int)sizeof(T);
    if (d.hs == d.hsp && stride % VEC == 0) {
        const int nv = d.hsp / VEC; /* vectors per row */
        for (int idx = threadIdx.x; idx < d.tile * nv; idx += blockDim.x) {
            int r = idx / nv, c = (idx % nv) * VEC, t = t0 + r;
            uint4 v = make_uint4(0, 0, 0, 0); /* zero bits: 0.0 in float and bf16 */
            const T *from = src + (size_t)t * stride + c;
            T *to = dst + r * ld + c;
#ifdef TANDEM_GPU_SIM
            sim_check_align(from, 16, "load_tile source");
            sim_check_align(to, 16, "load_tile destination");
#endif
            if (t < d.T) v = *(const uint4 *)from;
            *(uint4 *)to = v;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < d.tile * d.hsp; idx += blockDim.x) {
        int r = idx / d.hsp, c = idx % d.hsp, t = t0 + r;
        dst[r * ld + c] = (t < d.T && c < d.hs) ? src[(size_t)t * stride + c] : from_f<T>(0.0f);
    }
}

__device__ void zero_f32(float *dst, int ld, int rows, int cols) {
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x)
        dst[(idx / cols) * ld + idx % cols] = 0.0f;
}

/* Shared-memory carving: a bump allocator over the dynamic shared memory, 128-byte
 * aligned regions. The same function sizes the regions on the host. */
struct Carve {
    unsigned char *base;
    size_t off;
    __host__ __device__ void *take(size_t bytes) {
        void *p = base ? base + off : nullptr;
        off += round128(bytes);
        return p;
    }
};

template <typename T> struct FwdSmem {
    T *Q, *K, *V, *P;
    float *S, *O, *m, *l, *alpha;
    __host__ __device__ size_t carve(unsigned char *base, const AttShape &d) {
        Carve c{base, 0};
        int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile);
        Q = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        K = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        V = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        P = (T *)c.take((size_t)d.tile * ldp * sizeof(T));
        S = (float *)c.take((size_t)d.tile * ld_f32(d.tile) * sizeof(float));
        O = (float *)c.take((size_t)d.tile * ld_f32(d.hsp) * sizeof(float));
        m = (float *)c.take((size_t)d.tile * sizeof(float));
        l = (float *)c.take((size_t)d.tile * sizeof(float));
        alpha = (float *)c.take((size_t)d.tile * sizeof(float));
        return c.off;
    }
};

/* Shared by both backward kernels: Q, dO, K, V tiles; S (then dP) in float; P (then dS)
 * in the activation type; one float accumulator (dQ), or two (dK, dV); lse and D rows. */
template <typename T> struct BwdSmem {
    T *Q, *dO, *K, *V, *P;
    float *S, *acc1, *acc2, *lse, *D;
    __host__ __device__ size_t carve(unsigned char *base, const AttShape &d, int naccs) {
        Carve c{base, 0};
        int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile);
        Q = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        dO = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        K = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        V = (T *)c.take((size_t)d.tile * ldx * sizeof(T));
        P = (T *)c.take((size_t)d.tile * ldp * sizeof(T));
        S = (float *)c.take((size_t)d.tile * ld_f32(d.tile) * sizeof(float));
        acc1 = (float *)c.take((size_t)d.tile * ld_f32(d.hsp) * sizeof(float));
        acc2 = naccs > 1 ? (float *)c.take((size_t)d.tile * ld_f32(d.hsp) * sizeof(float)) : nullptr;
        lse = (float *)c.take((size_t)d.tile * sizeof(float));
        D = (float *)c.take((size_t)d.tile * sizeof(float));
        return c.off;
    }
};

/* ------------------------------------------------------------ forward */

template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_kernel(T *out, float *lse, const T *qkv, AttShape d) {
    GPU_DYNAMIC_SMEM(smem);
    FwdSmem<T> sm;
    sm.carve(smem, d);
    const int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile), lds = ld_f32(d.tile),
              ldo = ld_f32(d.hsp);
    const int qt = d.ntiles - 1 - (int)blockIdx.y; /* longest rows first */
    const int b = blockIdx.x / d.H, h = blockIdx.x % d.H, g = h / d.G;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const T *row0 = qkv + (size_t)b * d.T * d.rs;
    const T *qbase = row0 + (size_t)h * d.hs;
    const T *kbase = row0 + d.koff + (size_t)g * d.hs, *vbase = row0 + d.voff + (size_t)g * d.hs;

    load_tile(sm.Q, ldx, qbase, d.rs, qt * d.tile, d);
    zero_f32(sm.O, ldo, d.tile, d.hsp);
    for (int r = threadIdx.x; r < d.tile; r += blockDim.x) {
        sm.m[r] = -INFINITY;
        sm.l[r] = 0.0f;
    }
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* the previous tile's K, V, P are no longer read */
        load_tile(sm.K, ldx, kbase, d.rs, kt * d.tile, d);
        load_tile(sm.V, ldx, vbase, d.rs, kt * d.tile, d);
        __syncthreads();
        block_mm<true, false, false>(sm.S, lds, sm.Q, ldx, sm.K, ldx, d.tile, d.tile, d.hsp);
        __syncthreads();
        /* online softmax, one warp per row */
        for (int r = warp; r < d.tile; r += ATT_WARPS) {
            int i = qt * d.tile + r;
            float mx = -INFINITY;
            for (int j = lane; j < d.tile; j += 32) {
                int key = kt * d.tile + j;
                if (key <= i) mx = fmaxf(mx, sm.S[r * lds + j] * d.scale);
            }
            mx = warp_max(mx); /* finite: key kt*tile <= qt*tile <= i is always visible */
            float m_old = sm.m[r], m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int j = lane; j < d.tile; j += 32) {
                int key = kt * d.tile + j;
                float p = key <= i ? expf(sm.S[r * lds + j] * d.scale - m_new) : 0.0f;
                sm.P[r * ldp + j] = from_f<T>(p);
                sum += p;
            }
            sum = warp_sum(sum);
            __syncwarp(); /* every lane has read m[r] and l[r] before lane 0 updates them */
            if (lane == 0) {
                float alpha = expf(m_old - m_new); /* 0 on the first tile (m_old = -inf) */
                sm.alpha[r] = alpha;
                sm.l[r] = sm.l[r] * alpha + sum;
                sm.m[r] = m_new;
            }
        }
        __syncthreads();
        for (int idx = threadIdx.x; idx < d.tile * d.hsp; idx += blockDim.x) {
            int r = idx / d.hsp, c = idx % d.hsp;
            sm.O[r * ldo + c] *= sm.alpha[r];
        }
        __syncthreads();
        /* O += P V */
        block_mm<true, true, true>(sm.O, ldo, sm.P, ldp, sm.V, ldx, d.tile, d.hsp, d.tile);
    }
    __syncthreads();
    T *obase = out + (size_t)b * d.T * d.oc + (size_t)h * d.hs;
    for (int idx = threadIdx.x; idx < d.tile * d.hs; idx += blockDim.x) {
        int r = idx / d.hs, c = idx % d.hs, t = qt * d.tile + r;
        if (t < d.T) obase[(size_t)t * d.oc + c] = from_f<T>(sm.O[r * ldo + c] / sm.l[r]);
    }
    for (int r = threadIdx.x; r < d.tile; r += blockDim.x) {
        int t = qt * d.tile + r;
        if (t < d.T) lse[((size_t)b * d.H + h) * d.T + t] = sm.m[r] + logf(sm.l[r]);
    }
}

/* ------------------------------------------------------------ backward */

/* D[b, h, t] = sum_d dO[b, t, h, d] O[b, t, h, d], one warp per row */
template <typename T>
__global__ void attention_backward_d_kernel(float *D, const T *dout, const T *out, int B, int T_,
                                            int H, int hs) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= B * H * T_) return;
    int t = row % T_, bh = row / T_, h = bh % H, b = bh / H;
    size_t o = ((size_t)b * T_ + t) * H * hs + (size_t)h * hs;
    float s = 0.0f;
    for (int c = lane; c < hs; c += 32) s += to_f(dout[o + c]) * to_f(out[o + c]);
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

/* For the (query tile qt, key tile kt) pair staged in sm.Q, sm.dO, sm.K, sm.V (and lse,
 * D rows): P into sm.P (activation type, needed by dV), then dP into sm.S, then
 * dS = P (dP - D) scale into sm.P. If DV is not null, dV += P^T dO between the two (it
 * needs P). Ends after a barrier with dS in sm.P. */
template <typename T>
__device__ void backward_scores(BwdSmem<T> &sm, const AttShape &d, int qt, int kt, float *dV) {
    const int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile), lds = ld_f32(d.tile),
              ldo = ld_f32(d.hsp);
    /* S = Q K^T */
    block_mm<true, false, false>(sm.S, lds, sm.Q, ldx, sm.K, ldx, d.tile, d.tile, d.hsp);
    __syncthreads();
    for (int idx = threadIdx.x; idx < d.tile * d.tile; idx += blockDim.x) {
        int r = idx / d.tile, j = idx % d.tile;
        int i = qt * d.tile + r, key = kt * d.tile + j;
        float p = (key <= i && i < d.T) ? expf(sm.S[r * lds + j] * d.scale - sm.lse[r]) : 0.0f;
        sm.P[r * ldp + j] = from_f<T>(p);
    }
    __syncthreads();
    /* dP = dO V^T (into S), and dV += P^T dO: independent, one phase */
    block_mm<true, false, false>(sm.S, lds, sm.dO, ldx, sm.V, ldx, d.tile, d.tile, d.hsp);
    if (dV) block_mm<false, true, true>(dV, ldo, sm.P, ldp, sm.dO, ldx, d.tile, d.hsp, d.tile);
    __syncthreads();
    for (int idx = threadIdx.x; idx < d.tile * d.tile; idx += blockDim.x) {
        int r = idx / d.tile, j = idx % d.tile;
        float p = to_f(sm.P[r * ldp + j]);
        sm.P[r * ldp + j] = from_f<T>(p * (sm.S[r * lds + j] - sm.D[r]) * d.scale);
    }
    __syncthreads();
}

/* lse and D of the rows of query tile qt (0 past T; those rows are masked anyway) */
template <typename T>
__device__ void load_rows(BwdSmem<T> &sm, const float *lse, const float *D, size_t bh, int qt,
                          const AttShape &d) {
    for (int r = threadIdx.x; r < d.tile; r += blockDim.x) {
        int t = qt * d.tile + r;
        sm.lse[r] = t < d.T ? lse[bh * d.T + t] : 0.0f;
        sm.D[r] = t < d.T ? D[bh * d.T + t] : 0.0f;
    }
}

template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dkv_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse,
                                  const float *D, AttShape d) {
    GPU_DYNAMIC_SMEM(smem);
    BwdSmem<T> sm;
    sm.carve(smem, d, 2);
    const int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile), ldo = ld_f32(d.hsp);
    const int kt = (int)blockIdx.y; /* the first key tiles see the most queries */
    const int b = blockIdx.x / d.Hkv, g = blockIdx.x % d.Hkv;
    const T *row0 = qkv + (size_t)b * d.T * d.rs;
    float *dK = sm.acc1, *dV = sm.acc2;

    load_tile(sm.K, ldx, row0 + d.koff + (size_t)g * d.hs, d.rs, kt * d.tile, d);
    load_tile(sm.V, ldx, row0 + d.voff + (size_t)g * d.hs, d.rs, kt * d.tile, d);
    zero_f32(dK, ldo, d.tile, d.hsp);
    zero_f32(dV, ldo, d.tile, d.hsp);
    /* the group's query heads in order, each over its query tiles in order */
    for (int h = g * d.G; h < (g + 1) * d.G; h++) {
        const size_t bh = (size_t)b * d.H + h;
        const T *qbase = row0 + (size_t)h * d.hs;
        const T *obase = dout + (size_t)b * d.T * d.oc + (size_t)h * d.hs;
        for (int qt = kt; qt < d.ntiles; qt++) {
            __syncthreads(); /* the previous query tile's Q, dO, dS are no longer read */
            load_tile(sm.Q, ldx, qbase, d.rs, qt * d.tile, d);
            load_tile(sm.dO, ldx, obase, d.oc, qt * d.tile, d);
            load_rows(sm, lse, D, bh, qt, d);
            __syncthreads();
            backward_scores(sm, d, qt, kt, dV);
            /* dK += dS^T Q */
            block_mm<false, true, true>(dK, ldo, sm.P, ldp, sm.Q, ldx, d.tile, d.hsp, d.tile);
        }
    }
    __syncthreads();
    T *gbase = dqkv + (size_t)b * d.T * d.rs + (size_t)g * d.hs;
    for (int idx = threadIdx.x; idx < d.tile * d.hs; idx += blockDim.x) {
        int r = idx / d.hs, c = idx % d.hs, t = kt * d.tile + r;
        if (t < d.T) {
            gbase[(size_t)t * d.rs + d.koff + c] = from_f<T>(dK[r * ldo + c]);
            gbase[(size_t)t * d.rs + d.voff + c] = from_f<T>(dV[r * ldo + c]);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse,
                                 const float *D, AttShape d) {
    GPU_DYNAMIC_SMEM(smem);
    BwdSmem<T> sm;
    sm.carve(smem, d, 1);
    const int ldx = ld_act<T>(d.hsp), ldp = ld_act<T>(d.tile), ldo = ld_f32(d.hsp);
    const int qt = d.ntiles - 1 - (int)blockIdx.y; /* longest rows first */
    const int b = blockIdx.x / d.H, h = blockIdx.x % d.H, g = h / d.G;
    const size_t bh = blockIdx.x;
    const T *row0 = qkv + (size_t)b * d.T * d.rs;
    const T *kbase = row0 + d.koff + (size_t)g * d.hs, *vbase = row0 + d.voff + (size_t)g * d.hs;
    const T *obase = dout + (size_t)b * d.T * d.oc + (size_t)h * d.hs;
    float *dQ = sm.acc1;

    load_tile(sm.Q, ldx, row0 + (size_t)h * d.hs, d.rs, qt * d.tile, d);
    load_tile(sm.dO, ldx, obase, d.oc, qt * d.tile, d);
    load_rows(sm, lse, D, bh, qt, d);
    zero_f32(dQ, ldo, d.tile, d.hsp);
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* the previous key tile's K, V, dS are no longer read */
        load_tile(sm.K, ldx, kbase, d.rs, kt * d.tile, d);
        load_tile(sm.V, ldx, vbase, d.rs, kt * d.tile, d);
        __syncthreads();
        backward_scores(sm, d, qt, kt, (float *)nullptr);
        /* dQ += dS K */
        block_mm<true, true, true>(dQ, ldo, sm.P, ldp, sm.K, ldx, d.tile, d.hsp, d.tile);
    }
    __syncthreads();
    T *gbase = dqkv + (size_t)b * d.T * d.rs + (size_t)h * d.hs;
    for (int idx = threadIdx.x; idx < d.tile * d.hs; idx += blockDim.x) {
        int r = idx / d.hs, c = idx % d.hs, t = qt * d.tile + r;
        if (t < d.T) gbase[(size_t)t * d.rs + c] = from_f<T>(dQ[r * ldo + c]);
    }
}

/* ------------------------------------------------------------ host side */

template <typename T> static size_t fwd_smem(const AttShape &d) {
    FwdSmem<T> sm;
    return sm.carve(nullptr, d);
}
template <typename T> static size_t bwd_smem(const AttShape &d, int naccs) {
    BwdSmem<T> sm;
    return sm.carve(nullptr, d, naccs);
}

template <typename T> static size_t max_smem(int hs, int tile) {
    AttShape d = make_shape(1, tile, 1, 1, hs, tile);
    size_t a = fwd_smem<T>(d), b = bwd_smem<T>(d, 2), c = bwd_smem<T>(d, 1);
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

int gpu_attention_pick_tile(int hs, int is_bf16, size_t smem_optin) {
    static const int tiles[] = {64, 32, 16};
    for (int k = 0; k < 3; k++) {
        size_t need = is_bf16 ? max_smem<bf16>(hs, tiles[k]) : max_smem<float>(hs, tiles[k]);
        if (need <= smem_optin) return tiles[k];
    }
    return 0;
}

cudaError_t gpu_attention_probe(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, (const void *)attention_forward_kernel<bf16>);
}

cudaError_t gpu_attention_setup(size_t smem_optin) {
    const void *kernels[] = {
        (const void *)attention_forward_kernel<float>, (const void *)attention_forward_kernel<bf16>,
        (const void *)attention_backward_dkv_kernel<float>,
        (const void *)attention_backward_dkv_kernel<bf16>,
        (const void *)attention_backward_dq_kernel<float>,
        (const void *)attention_backward_dq_kernel<bf16>,
    };
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        cudaError_t rc = cudaFuncSetAttribute(kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)smem_optin);
        if (rc != cudaSuccess) return rc;
    }
    return cudaSuccess;
}

template <typename T>
cudaError_t gpu_attention_forward(T *out, float *lse, const T *qkv, int B, int T_, int H, int Hkv,
                                  int hs, int tile, cudaStream_t s) {
    if (H < 1 || Hkv < 1 || H % Hkv || hs < 1) return cudaErrorInvalidValue;
    AttShape d = make_shape(B, T_, H, Hkv, hs, tile);
    /* x: (sequence, head), up to 2^31 - 1; y: tiles (T / 16 <= 4096 <= 65535), heaviest
     * first since blocks start in linear order */
    dim3 grid((unsigned)(B * H), (unsigned)d.ntiles);
    GPU_LAUNCH(attention_forward_kernel<T>, grid, ATT_THREADS, fwd_smem<T>(d), s, out, lse, qkv, d);
    return cudaGetLastError();
}

template <typename T>
cudaError_t gpu_attention_backward(T *dqkv, float *Dbuf, const T *dout, const T *qkv, const T *out,
                                   const float *lse, int B, int T_, int H, int Hkv, int hs, int tile,
                                   cudaStream_t s) {
    if (H < 1 || Hkv < 1 || H % Hkv || hs < 1) return cudaErrorInvalidValue;
    AttShape d = make_shape(B, T_, H, Hkv, hs, tile);
    int rows = B * H * T_, warps = 8;
    GPU_LAUNCH(attention_backward_d_kernel<T>, (unsigned)((rows + warps - 1) / warps), warps * 32,
               0, s, Dbuf, dout, out, B, T_, H, hs);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    /* x: (sequence, head), up to 2^31 - 1 (dK, dV: key/value heads); y: tiles (T / 16 <=
     * 4096 <= 65535), heaviest first since blocks start in linear order */
    dim3 grid_kv((unsigned)(B * Hkv), (unsigned)d.ntiles), grid((unsigned)(B * H), (unsigned)d.ntiles);
    GPU_LAUNCH(attention_backward_dkv_kernel<T>, grid_kv, ATT_THREADS, bwd_smem<T>(d, 2), s, dqkv, dout,
               qkv, lse, Dbuf, d);
    if ((rc = cudaGetLastError()) != cudaSuccess) return rc;
    GPU_LAUNCH(attention_backward_dq_kernel<T>, grid, ATT_THREADS, bwd_smem<T>(d, 1), s, dqkv, dout,
               qkv, lse, Dbuf, d);
    return cudaGetLastError();
}

template cudaError_t gpu_attention_forward<float>(float *, float *, const float *, int, int, int,
                                                  int, int, int, cudaStream_t);
template cudaError_t gpu_attention_forward<bf16>(bf16 *, float *, const bf16 *, int, int, int, int,
                                                 int, int, cudaStream_t);
template cudaError_t gpu_attention_backward<float>(float *, float *, const float *, const float *,
                                                   const float *, const float *, int, int, int,
                                                   int, int, int, cudaStream_t);
template cudaError_t gpu_attention_backward<bf16>(bf16 *, float *, const bf16 *, const bf16 *,
                                                  const bf16 *, const float *, int, int, int, int,
                                                  int, int, cudaStream_t);
