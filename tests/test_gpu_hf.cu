/* test_gpu_hf.cu — the Llama / Qwen2 kernels of gpu/kernels_hf.cu against CPU references,
 * kernel by kernel: RMSNorm, RoPE, SwiGLU and grouped-query attention, forward and
 * backward, fp32, on random inputs of small shapes (T not a multiple of 32 and larger
 * than a warp, D not a power of two and larger than a warp, H = Hkv and H = 4 Hkv, more
 * than one GPU_ROW_CHUNK of rows); and the flash-style attention of kernels_attention.cu
 * with grouped-query heads (the family's bf16 path) on packed q | k | v rows against the
 * same reference, fp32 (tight) and bf16 (bf16's tolerances), tiles of 16 so that the
 * shapes span several.
 *
 * Built as C++ against the simulator (`make test-gpu-sim`, tests/gpu_sim.sh: every thread
 * order) and compilable by nvcc for a GPU. The references are model/qwen2.c's layer
 * functions (static there, so copied here without their OpenMP pragmas; keep them in step).
 *
 * Checks:
 *   values  per tensor, max |gpu - cpu| <= 1e-5 x max |cpu| (each case prints its largest
 *           relative difference; on the simulator, where expf / sinf / cosf are the host's,
 *           only the orders of sums spread over a warp differ from the CPU)
 *   bits    each launcher run twice on the same inputs gives the same bits; the digest of
 *           every output (printed as "test_gpu_hf: digest ...") is the same under every
 *           thread order of the simulator (gpu_sim.sh compares them)
 * Prints "test_gpu_hf: N passed, M failed" like the C tests.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpu/kernels.h"

typedef std::vector<float> vecf;

static int g_passed, g_failed, g_case_failed;
static uint64_t g_digest = 1469598103934665603ull; /* FNV-1a over every GPU output */
static double g_worst[16];                         /* largest relative difference per kernel */
static const char *const g_kernel[] = {"rmsnorm_forward", "rmsnorm_backward", "rope_rotate",
                                       "swiglu_forward",  "swiglu_backward",  "attention_forward",
                                       "attention_backward", "flash_forward", "flash_backward",
                                       "flash_bf16"};
enum { K_RMS_F, K_RMS_B, K_ROPE, K_SWI_F, K_SWI_B, K_ATT_F, K_ATT_B, K_FL_F, K_FL_B, K_FL16, K_COUNT };

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            g_case_failed = 1;                                                             \
            return;                                                                        \
        }                                                                                  \
    } while (0)
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s", #call)

/* ------------------------------------------------------------ CPU references (qwen2.c) */

static void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                            double eps) {
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        if (rstd) rstd[i] = r;
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = xi[c] * r * w[c];
    }
}

static void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *r,
                             const float *w, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *dyi = dy + (size_t)i * C;
        double dot = 0;
        for (int c = 0; c < C; c++) {
            dot += (double)dyi[c] * w[c] * xi[c];
            dw[c] += dyi[c] * xi[c] * r[i];
        }
        float coef = (float)(dot * r[i] * r[i] * r[i] / C);
        for (int c = 0; c < C; c++) dx[(size_t)i * C + c] += dyi[c] * w[c] * r[i] - xi[c] * coef;
    }
}

static void rope_rotate(float *x, int B, int T, int heads, int D, double theta, float sign) {
    int half = D / 2;
    vecf cs((size_t)D);
    for (int r = 0; r < B * T; r++) {
        int t = r % T;
        for (int i = 0; i < half; i++) {
            float inv = (float)(1.0 / pow(theta, (double)(2 * i) / D));
            float ang = (float)t * inv;
            cs[i] = cosf(ang);
            cs[half + i] = sign * sinf(ang);
        }
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)r * heads + h) * D;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half], c = cs[i], sn = cs[half + i];
                v[i] = a * c - b * sn;
                v[i + half] = b * c + a * sn;
            }
        }
    }
}

static void attention_forward(float *out, float *probs, const float *q, const float *k,
                              const float *v, int B, int T, int H, int Hkv, int D) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
    vecf p((size_t)T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = q + ((size_t)(b * T + t) * H + h) * D;
                int g = h / group;
                float mx = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *ks = k + ((size_t)(b * T + s) * Hkv + g) * D;
                    float dot = 0;
                    for (int i = 0; i < D; i++) dot += qt[i] * ks[i];
                    p[s] = dot * scale;
                    if (p[s] > mx) mx = p[s];
                }
                double sum = 0;
                for (int s = 0; s <= t; s++) sum += p[s] = expf(p[s] - mx);
                float *ot = out + ((size_t)(b * T + t) * H + h) * D;
                float *pr = probs + (((size_t)b * H + h) * T + t) * T;
                for (int s = 0; s < T; s++) pr[s] = s <= t ? (float)(p[s] / sum) : 0.0f;
                for (int i = 0; i < D; i++) ot[i] = 0;
                for (int s = 0; s <= t; s++) {
                    const float *vs = v + ((size_t)(b * T + s) * Hkv + g) * D;
                    float w = (float)(p[s] / sum);
                    for (int i = 0; i < D; i++) ot[i] += w * vs[i];
                }
            }
}

static void attention_backward(float *dq, float *dk, float *dv, const float *datt, const float *q,
                               const float *k, const float *v, const float *probs, int B, int T,
                               int H, int Hkv, int D) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
    memset(dk, 0, (size_t)B * T * Hkv * D * sizeof *dk);
    memset(dv, 0, (size_t)B * T * Hkv * D * sizeof *dv);
    vecf dp((size_t)T);
    for (int b = 0; b < B; b++)
        for (int g = 0; g < Hkv; g++)
            for (int h = g * group; h < (g + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    const float *pr = probs + (((size_t)b * H + h) * T + t) * T;
                    const float *dot = datt + ((size_t)(b * T + t) * H + h) * D;
                    const float *qt = q + ((size_t)(b * T + t) * H + h) * D;
                    float *dqt = dq + ((size_t)(b * T + t) * H + h) * D;
                    double sum = 0;
                    for (int s = 0; s <= t; s++) {
                        const float *vs = v + ((size_t)(b * T + s) * Hkv + g) * D;
                        float acc = 0;
                        for (int i = 0; i < D; i++) acc += dot[i] * vs[i];
                        dp[s] = acc;
                        sum += (double)pr[s] * acc;
                        float *dvs = dv + ((size_t)(b * T + s) * Hkv + g) * D;
                        for (int i = 0; i < D; i++) dvs[i] += pr[s] * dot[i];
                    }
                    for (int i = 0; i < D; i++) dqt[i] = 0;
                    for (int s = 0; s <= t; s++) {
                        float ds = pr[s] * (dp[s] - (float)sum) * scale;
                        const float *ks = k + ((size_t)(b * T + s) * Hkv + g) * D;
                        float *dks = dk + ((size_t)(b * T + s) * Hkv + g) * D;
                        for (int i = 0; i < D; i++) {
                            dqt[i] += ds * ks[i];
                            dks[i] += ds * qt[i];
                        }
                    }
                }
}

/* ------------------------------------------------------------ helpers */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static vecf rand_vec(size_t n, float lo, float hi) {
    vecf v(n);
    for (size_t i = 0; i < n; i++) {
        g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
        v[i] = lo + (hi - lo) * (float)((g_rng >> 40) * (1.0 / 16777216.0));
    }
    return v;
}

/* A device buffer (freed with the object) */
struct dbuf {
    void *p = nullptr;
    size_t bytes = 0;
    explicit dbuf(size_t b) : bytes(b) {
        if (cudaMalloc(&p, b ? b : 1) != cudaSuccess) p = nullptr;
    }
    ~dbuf() { cudaFree(p); }
    dbuf(const dbuf &) = delete;
    dbuf &operator=(const dbuf &) = delete;
    float *f() { return (float *)p; }
    double *d() { return (double *)p; }
};
static bool put(dbuf &d, const vecf &h) {
    return d.p && cudaMemcpy(d.p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                      cudaSuccess;
}
static bool get(vecf &h, dbuf &d) {
    return d.p && cudaMemcpy(h.data(), d.p, h.size() * sizeof(float), cudaMemcpyDeviceToHost) ==
                      cudaSuccess;
}
static void digest(const vecf &v) {
    const unsigned char *b = (const unsigned char *)v.data();
    for (size_t i = 0; i < v.size() * sizeof(float); i++) g_digest = (g_digest ^ b[i]) * 1099511628211ull;
}

/* max |a - ref| / max |ref| (the largest difference relative to the tensor's scale) */
static double rel_diff(const vecf &a, const vecf &ref) {
    double dmax = 0, rmax = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= dmax)) dmax = d; /* NaN propagates */
        if (fabs(ref[i]) > rmax) rmax = fabs(ref[i]);
    }
    return dmax / (rmax > 0 ? rmax : 1);
}

#define TOL 1e-5
/* compares one tensor and records the kernel's worst difference */
#define COMPARE(kernel, what, gpu, cpu)                                                    \
    do {                                                                                   \
        double rd_ = rel_diff(gpu, cpu);                                                   \
        if (!(rd_ <= g_worst[kernel])) g_worst[kernel] = rd_;                              \
        CHECK(rd_ <= TOL, "%s: %s differs from the CPU by %.3g (relative)", g_kernel[kernel], \
              what, rd_);                                                                  \
        digest(gpu);                                                                       \
    } while (0)
#define SAME_BITS(kernel, what, a, b)                                                      \
    CHECK(!memcmp((a).data(), (b).data(), (a).size() * sizeof(float)),                    \
          "%s: %s differs between two runs", g_kernel[kernel], what)

struct shape {
    int B, T, H, Hkv, D, C, F;
};

/* ------------------------------------------------------------ cases */

static void check_rmsnorm(const shape &sh) {
    int N = sh.B * sh.T, C = sh.C;
    size_t nc = (size_t)N * C;
    int nchunks = (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK;
    double eps = 1e-6;
    vecf x = rand_vec(nc, -2, 2), w = rand_vec(C, 0.5f, 1.5f), dy = rand_vec(nc, -1, 1);
    vecf dx0 = rand_vec(nc, -1, 1), dw0 = rand_vec(C, -1, 1);
    vecf out(nc), rstd(N), cout(nc), crstd(N);
    rmsnorm_forward(cout.data(), crstd.data(), x.data(), w.data(), N, C, eps);
    dbuf dx_(nc * 4), dw_((size_t)C * 4), dy_(nc * 4), dout(nc * 4), drstd((size_t)N * 4),
        ddx(nc * 4), ddw((size_t)C * 4), dpart((size_t)nchunks * C * 8);
    CHECK(put(dx_, x) && put(dw_, w) && put(dy_, dy), "upload");
    vecf prev_out, prev_rstd, prev_dx, prev_dw;
    for (int run = 0; run < 2; run++) {
        CUDA_OK(gpu_rmsnorm_forward(dout.f(), drstd.f(), dx_.f(), dw_.f(), N, C, eps, 0));
        CHECK(get(out, dout) && get(rstd, drstd), "download");
        if (run) {
            SAME_BITS(K_RMS_F, "out", out, prev_out);
            SAME_BITS(K_RMS_F, "rstd", rstd, prev_rstd);
        }
        prev_out = out, prev_rstd = rstd;
    }
    COMPARE(K_RMS_F, "out", out, cout);
    COMPARE(K_RMS_F, "rstd", rstd, crstd);
    /* without rstd: the same output */
    CUDA_OK(gpu_rmsnorm_forward(dout.f(), nullptr, dx_.f(), dw_.f(), N, C, eps, 0));
    CHECK(get(out, dout), "download");
    SAME_BITS(K_RMS_F, "out (no rstd)", out, prev_out);

    /* backward from the CPU's rstd (the same inputs for both), onto nonzero dx and dw */
    vecf cdx = dx0, cdw = dw0, gdx(nc), gdw(C);
    rmsnorm_backward(cdx.data(), cdw.data(), dy.data(), x.data(), crstd.data(), w.data(), N, C);
    CHECK(put(drstd, crstd), "upload");
    for (int run = 0; run < 2; run++) {
        CHECK(put(ddx, dx0) && put(ddw, dw0), "upload");
        CUDA_OK(gpu_rmsnorm_backward(ddx.f(), ddw.f(), dpart.d(), dy_.f(), dx_.f(), drstd.f(),
                                     dw_.f(), N, C, 0));
        CHECK(get(gdx, ddx) && get(gdw, ddw), "download");
        if (run) {
            SAME_BITS(K_RMS_B, "dx", gdx, prev_dx);
            SAME_BITS(K_RMS_B, "dw", gdw, prev_dw);
        }
        prev_dx = gdx, prev_dw = gdw;
    }
    COMPARE(K_RMS_B, "dx", gdx, cdx);
    COMPARE(K_RMS_B, "dw", gdw, cdw);
}

static void check_rope(const shape &sh) {
    double theta = 1000000.0; /* Qwen2's */
    for (int pass = 0; pass < 2; pass++) { /* queries (H heads), keys (Hkv heads) */
        int heads = pass ? sh.Hkv : sh.H;
        size_t n = (size_t)sh.B * sh.T * heads * sh.D;
        vecf x = rand_vec(n, -1, 1);
        dbuf dx(n * 4);
        for (float sign = 1.0f; sign >= -1.0f; sign -= 2.0f) {
            vecf cpu = x, g1(n), g2(n);
            rope_rotate(cpu.data(), sh.B, sh.T, heads, sh.D, theta, sign);
            for (int run = 0; run < 2; run++) {
                CHECK(put(dx, x), "upload");
                CUDA_OK(gpu_rope_rotate(dx.f(), sh.B, sh.T, heads, sh.D, theta, sign, 0));
                CHECK(get(run ? g2 : g1, dx), "download");
            }
            SAME_BITS(K_ROPE, sign > 0 ? "forward" : "backward", g1, g2);
            COMPARE(K_ROPE, sign > 0 ? "forward" : "backward", g1, cpu);
        }
        /* the transpose undoes the rotation (an orthogonal map) */
        vecf back(n);
        CHECK(put(dx, x), "upload");
        CUDA_OK(gpu_rope_rotate(dx.f(), sh.B, sh.T, heads, sh.D, theta, 1.0f, 0));
        CUDA_OK(gpu_rope_rotate(dx.f(), sh.B, sh.T, heads, sh.D, theta, -1.0f, 0));
        CHECK(get(back, dx), "download");
        CHECK(rel_diff(back, x) <= 1e-6, "rotating back: %.3g", rel_diff(back, x));
    }
    CHECK(gpu_rope_rotate(nullptr, 1, 1, 1, 7, theta, 1.0f, 0) == cudaErrorInvalidValue,
          "odd D is refused");
}

static void check_swiglu(const shape &sh) {
    size_t n = (size_t)sh.B * sh.T * sh.F;
    vecf g = rand_vec(n, -6, 6), u = rand_vec(n, -2, 2), dact = rand_vec(n, -1, 1);
    g[0] = -100.0f, g[1] = 100.0f; /* exp's overflow: silu -> -0 and g */
    vecf cact(n), cdg(n), cdu(n);
    for (size_t i = 0; i < n; i++) { /* qwen2.c's swiglu_forward and the loop of its backward */
        cact[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        float sg = 1.0f / (1.0f + expf(-g[i]));
        cdu[i] = dact[i] * g[i] * sg;
        cdg[i] = dact[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
    }
    dbuf dg(n * 4), du(n * 4), dact_(n * 4), ddu(n * 4), dout(n * 4);
    CHECK(put(dg, g) && put(du, u) && put(dact_, dact), "upload");
    vecf a1(n), a2(n), g1(n), g2(n), u1(n), u2(n);
    for (int run = 0; run < 2; run++) {
        CUDA_OK(gpu_swiglu_forward(dout.f(), dg.f(), du.f(), n, 0));
        CHECK(get(run ? a2 : a1, dout), "download");
        /* backward in place (dg = dact's buffer), as qwen2.c does */
        CHECK(put(dact_, dact), "upload");
        CUDA_OK(gpu_swiglu_backward(dact_.f(), ddu.f(), dact_.f(), dg.f(), du.f(), n, 0));
        CHECK(get(run ? g2 : g1, dact_) && get(run ? u2 : u1, ddu), "download");
    }
    SAME_BITS(K_SWI_F, "act", a1, a2);
    SAME_BITS(K_SWI_B, "dg", g1, g2);
    SAME_BITS(K_SWI_B, "du", u1, u2);
    COMPARE(K_SWI_F, "act", a1, cact);
    COMPARE(K_SWI_B, "dg", g1, cdg);
    COMPARE(K_SWI_B, "du", u1, cdu);
    /* the packed layout (rows g | u, the bf16 path's): the same bits as the separate one */
    size_t rows = (size_t)sh.B * sh.T, F = (size_t)sh.F;
    vecf gu(2 * n), pa(n), pg(n), pu(n), pgu(2 * n);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < F; c++) gu[r * 2 * F + c] = g[r * F + c], gu[r * 2 * F + F + c] = u[r * F + c];
    dbuf dgu(2 * n * 4), ddgu(2 * n * 4);
    CHECK(put(dgu, gu) && put(dact_, dact), "upload");
    CUDA_OK(gpu_swiglu_forward_packed<float>(dout.f(), dgu.f(), (int)rows, (int)F, 0));
    CUDA_OK(gpu_swiglu_backward_packed<float>(ddgu.f(), dact_.f(), dgu.f(), (int)rows, (int)F, 0));
    CHECK(get(pa, dout) && get(pgu, ddgu), "download");
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < F; c++) pg[r * F + c] = pgu[r * 2 * F + c], pu[r * F + c] = pgu[r * 2 * F + F + c];
    SAME_BITS(K_SWI_F, "act (packed)", a1, pa);
    SAME_BITS(K_SWI_B, "dg (packed)", g1, pg);
    SAME_BITS(K_SWI_B, "du (packed)", u1, pu);
    /* in place: act over g */
    CUDA_OK(gpu_swiglu_forward(dg.f(), dg.f(), du.f(), n, 0));
    CHECK(get(a2, dg), "download");
    SAME_BITS(K_SWI_F, "act (in place)", a1, a2);
}

static void check_attention(const shape &sh) {
    int B = sh.B, T = sh.T, H = sh.H, Hkv = sh.Hkv, D = sh.D;
    size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * Hkv * D, np = (size_t)B * H * T * T;
    vecf q = rand_vec(nq, -2, 2), k = rand_vec(nk, -2, 2), v = rand_vec(nk, -1, 1);
    vecf datt = rand_vec(nq, -1, 1);
    vecf cout(nq), cprobs(np), cdq(nq), cdk(nk), cdv(nk);
    attention_forward(cout.data(), cprobs.data(), q.data(), k.data(), v.data(), B, T, H, Hkv, D);
    attention_backward(cdq.data(), cdk.data(), cdv.data(), datt.data(), q.data(), k.data(),
                       v.data(), cprobs.data(), B, T, H, Hkv, D);
    dbuf dq_(nq * 4), dk_(nk * 4), dv_(nk * 4), ddatt(nq * 4), dout(nq * 4), dprobs(np * 4),
        dds(np * 4), ddq(nq * 4), ddk(nk * 4), ddv(nk * 4);
    CHECK(put(dq_, q) && put(dk_, k) && put(dv_, v) && put(ddatt, datt), "upload");
    vecf o[2] = {vecf(nq), vecf(nq)}, p[2] = {vecf(np), vecf(np)};
    vecf gq[2] = {vecf(nq), vecf(nq)}, gk[2] = {vecf(nk), vecf(nk)}, gv[2] = {vecf(nk), vecf(nk)};
    for (int run = 0; run < 2; run++) {
        CUDA_OK(gpu_gqa_attention_forward(dout.f(), dprobs.f(), dq_.f(), dk_.f(), dv_.f(), B, T, H,
                                          Hkv, D, 0));
        CHECK(get(o[run], dout) && get(p[run], dprobs), "download");
        CUDA_OK(gpu_gqa_attention_backward(ddq.f(), ddk.f(), ddv.f(), dds.f(), ddatt.f(), dq_.f(),
                                           dk_.f(), dv_.f(), dprobs.f(), B, T, H, Hkv, D, 0));
        CHECK(get(gq[run], ddq) && get(gk[run], ddk) && get(gv[run], ddv), "download");
    }
    SAME_BITS(K_ATT_F, "out", o[0], o[1]);
    SAME_BITS(K_ATT_F, "probs", p[0], p[1]);
    SAME_BITS(K_ATT_B, "dq", gq[0], gq[1]);
    SAME_BITS(K_ATT_B, "dk", gk[0], gk[1]);
    SAME_BITS(K_ATT_B, "dv", gv[0], gv[1]);
    COMPARE(K_ATT_F, "out", o[0], cout);
    COMPARE(K_ATT_F, "probs", p[0], cprobs);
    /* the backward from the GPU's probs against the CPU's from its own: both close */
    COMPARE(K_ATT_B, "dq", gq[0], cdq);
    COMPARE(K_ATT_B, "dk", gk[0], cdk);
    COMPARE(K_ATT_B, "dv", gv[0], cdv);
    CHECK(gpu_gqa_attention_forward(dout.f(), dprobs.f(), dq_.f(), dk_.f(), dv_.f(), B, T, 3, 2, D,
                                    0) == cudaErrorInvalidValue,
          "H not a multiple of Hkv is refused");
}

/* Packs q[B*T, H*D], k, v [B*T, Hkv*D] into rows q | k | v of (H + 2 Hkv) D, and back. */
static vecf pack_qkv(const vecf &q, const vecf &k, const vecf &v, size_t rows, int QD, int KD) {
    size_t rs = (size_t)QD + 2 * KD;
    vecf x(rows * rs);
    for (size_t r = 0; r < rows; r++) {
        memcpy(&x[r * rs], &q[r * QD], QD * sizeof(float));
        memcpy(&x[r * rs + QD], &k[r * KD], KD * sizeof(float));
        memcpy(&x[r * rs + QD + KD], &v[r * KD], KD * sizeof(float));
    }
    return x;
}
static void unpack_part(vecf &out, const vecf &x, size_t rows, size_t rs, size_t from, size_t width) {
    for (size_t r = 0; r < rows; r++) memcpy(&out[r * width], &x[r * rs + from], width * sizeof(float));
}
static std::vector<bf16> to_bf16(const vecf &x) {
    std::vector<bf16> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = __float2bfloat16_rn(x[i]);
    return y;
}
static vecf from_bf16(const std::vector<bf16> &y) {
    vecf x(y.size());
    for (size_t i = 0; i < y.size(); i++) x[i] = __bfloat162float(y[i]);
    return x;
}

/* kernels_attention.cu's flash-style kernels with grouped-query heads on packed rows:
 * fp32 against the reference within 1e-5 (and the same bits twice), bf16 (inputs rounded
 * to bf16, the reference computed from the rounded values) within 2e-2 of out's scale and
 * 5e-2 of each gradient's (cudnn_att.h's self-check tolerances). */
static void check_flash(const shape &sh) {
    const int B = sh.B, T = sh.T, H = sh.H, Hkv = sh.Hkv, D = sh.D, QD = H * D, KD = Hkv * D, tile = 16;
    const size_t rows = (size_t)B * T, rs = (size_t)QD + 2 * KD, nq = rows * QD, nk = rows * KD;
    const size_t np = (size_t)B * H * T * T, nl = (size_t)B * H * T;
    vecf q = rand_vec(nq, -2, 2), k = rand_vec(nk, -2, 2), v = rand_vec(nk, -1, 1), datt = rand_vec(nq, -1, 1);
    for (int bf = 0; bf < 2; bf++) {
        if (bf) { /* the reference on the values bf16 can hold */
            q = from_bf16(to_bf16(q)), k = from_bf16(to_bf16(k)), v = from_bf16(to_bf16(v));
            datt = from_bf16(to_bf16(datt));
        }
        vecf cout(nq), cprobs(np), cdq(nq), cdk(nk), cdv(nk);
        attention_forward(cout.data(), cprobs.data(), q.data(), k.data(), v.data(), B, T, H, Hkv, D);
        attention_backward(cdq.data(), cdk.data(), cdv.data(), datt.data(), q.data(), k.data(), v.data(),
                           cprobs.data(), B, T, H, Hkv, D);
        vecf qkv = pack_qkv(q, k, v, rows, QD, KD);
        size_t es = bf ? 2 : 4; /* element bytes */
        dbuf dqkv_in(rows * rs * es), ddo(nq * es), dout(nq * es), dlse(nl * 4), dD(nl * 4), dgrad(rows * rs * es);
        bool up;
        if (bf) {
            std::vector<bf16> a = to_bf16(qkv), b = to_bf16(datt);
            up = dqkv_in.p && ddo.p &&
                 cudaMemcpy(dqkv_in.p, a.data(), a.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
                 cudaMemcpy(ddo.p, b.data(), b.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess;
        } else {
            up = put(dqkv_in, qkv) && put(ddo, datt);
        }
        CHECK(up, "upload");
        vecf o[2] = {vecf(nq), vecf(nq)}, g[2] = {vecf(rows * rs), vecf(rows * rs)};
        for (int run = 0; run < 2; run++) {
            if (bf) {
                CUDA_OK(gpu_attention_forward<bf16>((bf16 *)dout.p, dlse.f(), (const bf16 *)dqkv_in.p, B, T, H, Hkv,
                                                    D, tile, 0));
                CUDA_OK(gpu_attention_backward<bf16>((bf16 *)dgrad.p, dD.f(), (const bf16 *)ddo.p,
                                                     (const bf16 *)dqkv_in.p, (const bf16 *)dout.p, dlse.f(), B, T, H,
                                                     Hkv, D, tile, 0));
                std::vector<bf16> ho(nq), hg(rows * rs);
                CHECK(cudaMemcpy(ho.data(), dout.p, nq * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
                          cudaMemcpy(hg.data(), dgrad.p, rows * rs * 2, cudaMemcpyDeviceToHost) == cudaSuccess,
                      "download");
                o[run] = from_bf16(ho), g[run] = from_bf16(hg);
            } else {
                CUDA_OK(gpu_attention_forward<float>(dout.f(), dlse.f(), dqkv_in.f(), B, T, H, Hkv, D, tile, 0));
                CUDA_OK(gpu_attention_backward<float>(dgrad.f(), dD.f(), ddo.f(), dqkv_in.f(), dout.f(), dlse.f(), B, T,
                                                      H, Hkv, D, tile, 0));
                CHECK(get(o[run], dout) && get(g[run], dgrad), "download");
            }
        }
        SAME_BITS(bf ? K_FL16 : K_FL_F, "out", o[0], o[1]);
        SAME_BITS(bf ? K_FL16 : K_FL_B, "dqkv", g[0], g[1]);
        vecf gq(nq), gk(nk), gv(nk);
        unpack_part(gq, g[0], rows, rs, 0, QD);
        unpack_part(gk, g[0], rows, rs, QD, KD);
        unpack_part(gv, g[0], rows, rs, QD + KD, KD);
        if (!bf) {
            COMPARE(K_FL_F, "out", o[0], cout);
            COMPARE(K_FL_B, "dq", gq, cdq);
            COMPARE(K_FL_B, "dk", gk, cdk);
            COMPARE(K_FL_B, "dv", gv, cdv);
        } else {
            const vecf *got[4] = {&o[0], &gq, &gk, &gv}, *ref[4] = {&cout, &cdq, &cdk, &cdv};
            const char *name[4] = {"out", "dq", "dk", "dv"};
            for (int t = 0; t < 4; t++) {
                double rd = rel_diff(*got[t], *ref[t]), tol = t ? 5e-2 : 2e-2;
                if (!(rd <= g_worst[K_FL16])) g_worst[K_FL16] = rd;
                CHECK(rd <= tol, "flash bf16: %s differs from the CPU by %.3g (relative; tolerance %.0e)", name[t], rd,
                      tol);
                digest(*got[t]);
            }
        }
    }
    CHECK(gpu_attention_forward<float>(nullptr, nullptr, nullptr, B, T, 3, 2, D, tile, 0) == cudaErrorInvalidValue,
          "H not a multiple of Hkv is refused");
}

/* B, T, H, Hkv, D, C, F: the brief's shape; D = 6 (not a power of two); T = 37 and D = 40
 * past a warp, with one key/value head for four query heads and 74 rows (two row
 * chunks); plain multi-head attention (H = Hkv) with T = 33 */
static const shape g_shapes[] = {
    {2, 5, 4, 2, 8, 32, 48}, {2, 9, 4, 2, 6, 32, 48}, {2, 37, 4, 1, 40, 70, 48},
    {1, 33, 2, 2, 12, 32, 20}};

#define RUN(fn)                                                                            \
    do {                                                                                   \
        for (const shape &sh : g_shapes) {                                                 \
            g_case_failed = 0;                                                             \
            fn(sh);                                                                        \
            printf("%s %s B=%d T=%d H=%d Hkv=%d D=%d C=%d F=%d\n",                         \
                   g_case_failed ? "FAIL" : "PASS", #fn, sh.B, sh.T, sh.H, sh.Hkv, sh.D, sh.C, \
                   sh.F);                                                                  \
            if (g_case_failed) g_failed++;                                                 \
            else g_passed++;                                                               \
        }                                                                                  \
    } while (0)

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP: no CUDA device\ntest_gpu_hf: 0 passed, 0 failed\n");
        return 0;
    }
    RUN(check_rmsnorm);
    RUN(check_rope);
    RUN(check_swiglu);
    RUN(check_attention);
    {
        /* the flash kernels' shared memory beyond the default 48 KiB (a GPU; no-op on the
         * simulator) */
        cudaDeviceProp prop;
        int dev = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            (void)gpu_attention_setup(prop.sharedMemPerBlockOptin);
    }
    RUN(check_flash);
    for (int k = 0; k < K_COUNT; k++)
        printf("  %-18s largest |gpu - cpu| / max |cpu|: %.3g\n", g_kernel[k], g_worst[k]);
    printf("test_gpu_hf: digest %016llx\n", (unsigned long long)g_digest);
    printf("test_gpu_hf: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
