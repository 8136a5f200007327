/* cudnn_att.cu — causal attention through cuDNN's backend graph API (gpu/cudnn_att.h).
 *
 * The graphs (tensors [B, H, T, D] seen through strides into qkv, out and their
 * gradients, K and V with Hkv heads — grouped-query attention where Hkv < H, which
 * cuDNN's engines broadcast over the group; S = [B, H, T, T] virtual, float):
 *
 *   forward   S = Q K^T; S *= scale; mask = row >= col (GEN_INDEX, CMP_GE);
 *             S = mask ? S : -inf; m = max_row S; E = exp(S - m); l = sum_row E;
 *             lse = m + log l (out, float); P = E / l (bf16); O = P V
 *   backward  D = sum_row dO * O (out, float: the scratch buffer); S = Q K^T * scale - lse;
 *             S = mask ? S : -inf; P = exp S; dV = P^T dO; dP = dO V^T;
 *             dS = (dP - D) P scale; dK = dS^T Q; dQ = dS K
 *
 * which is the shape cuDNN's fused flash-attention engines match (the one its own
 * frontend lowers scaled_dot_product_flash_attention to for these cuDNN versions, with
 * the deterministic backward: dQ straight from its matmul). Plans: heuristics mode A,
 * then fallback; engines whose numerical notes include NONDETERMINISTIC are skipped; the
 * first configuration that finalises is kept for the shape.
 *
 * Nothing of this has run on a GPU yet (docs/gpu.md says what was measured and what was
 * only compiled); the start-up self-check (cudnn_att_selfcheck) stands between it and a
 * run.
 */
#include "gpu/cudnn_att.h"

#include <stdio.h>
#include <string.h>

#if defined(TANDEM_GPU_SIM) || !defined(TANDEM_HAVE_CUDNN_H)

#ifdef TANDEM_GPU_SIM
#define NO_CUDNN "the simulator has no cuDNN"
#else
#define NO_CUDNN "this build had no cudnn_graph.h (cuDNN 9's headers) beside nvcc's"
#endif

int cudnn_att_load(int *version, char *why, size_t cap) {
    *version = 0;
    snprintf(why, cap, NO_CUDNN);
    return -1;
}
cudnn_att *cudnn_att_create(cudaStream_t, int, char *why, size_t cap) {
    snprintf(why, cap, NO_CUDNN);
    return nullptr;
}
void cudnn_att_destroy(cudnn_att *) {}
int cudnn_att_forward(cudnn_att *, bf16 *, float *, const bf16 *, int, int, int, int, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "cuDNN attention: " NO_CUDNN);
}
int cudnn_att_backward(cudnn_att *, bf16 *, float *, const bf16 *, const bf16 *, const bf16 *,
                       const float *, int, int, int, int, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "cuDNN attention: " NO_CUDNN);
}
int cudnn_att_prepare(cudnn_att *, int, int, int, int, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "cuDNN attention: " NO_CUDNN);
}
int cudnn_att_selfcheck(cudnn_att *, int, int, char *msg, size_t cap) {
    snprintf(msg, cap, NO_CUDNN);
    return -1;
}

#else /* a real CUDA build */

#include "gpu/check.h"

#include <cudnn_graph.h> /* types and enums only: every function comes through dlopen */
#include <dlfcn.h>
#include <new>
#include <string>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

/* ------------------------------------------------------------ loading */

static struct {
    pthread_once_t once;
    int rc, version;
    char why[512];
    size_t (*getVersion)(void);
    const char *(*getErrorString)(cudnnStatus_t);
    void (*getLastErrorString)(char *, size_t); /* may be NULL */
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*destroy)(cudnnHandle_t);
    cudnnStatus_t (*setStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*bCreate)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*bDestroy)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*bFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*bSet)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                          cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*bGet)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                          cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*bExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} D = {PTHREAD_ONCE_INIT, -1, 0, "", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
       nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

/* Appends "; path (reason)" to the why buffer of the loader. */
static void tried(const char *path, const char *reason) {
    size_t n = strlen(D.why);
    snprintf(D.why + n, sizeof D.why - n, "%s%s (%s)", n ? "; " : "", path, reason);
}

/* dlopen of cuDNN: $TANDEM_CUDNN_DIR's libcudnn.so.9 (its sub-libraries loaded from the
 * same folder first, so the shim's loads by name find them), then the loader's search
 * path, then the CUDA toolkit's folder; then the symbols. Sets D.rc. */
static void load_once(void) {
    const char *dir = getenv("TANDEM_CUDNN_DIR");
    std::vector<std::string> cands;
    if (dir && *dir) {
        static const char *subs[] = {"libcudnn_graph.so.9", "libcudnn_ops.so.9",
                                     "libcudnn_engines_runtime_compiled.so.9",
                                     "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"};
        for (const char *s : subs) {
            std::string p = std::string(dir) + "/" + s;
            (void)dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL); /* best effort; kept loaded */
        }
        cands.push_back(std::string(dir) + "/libcudnn.so.9");
    }
    cands.push_back("libcudnn.so.9");
    cands.push_back("/usr/local/cuda/lib64/libcudnn.so.9");
    void *h = nullptr;
    for (const std::string &c : cands) {
        h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h) break;
        const char *r = dlerror();
        tried(c.c_str(), r ? r : "dlopen failed");
    }
    if (!h) return;
    D.why[0] = '\0';
#define SYM(field, name)                                                                  \
    do {                                                                                  \
        *(void **)&D.field = dlsym(h, name);                                              \
        if (!D.field) {                                                                   \
            snprintf(D.why, sizeof D.why, "libcudnn.so.9 has no %s", name);               \
            return;                                                               \
        }                                                                                 \
    } while (0)
    SYM(getVersion, "cudnnGetVersion");
    SYM(getErrorString, "cudnnGetErrorString");
    SYM(create, "cudnnCreate");
    SYM(destroy, "cudnnDestroy");
    SYM(setStream, "cudnnSetStream");
    SYM(bCreate, "cudnnBackendCreateDescriptor");
    SYM(bDestroy, "cudnnBackendDestroyDescriptor");
    SYM(bFinalize, "cudnnBackendFinalize");
    SYM(bSet, "cudnnBackendSetAttribute");
    SYM(bGet, "cudnnBackendGetAttribute");
    SYM(bExecute, "cudnnBackendExecute");
#undef SYM
    *(void **)&D.getLastErrorString = dlsym(h, "cudnnGetLastErrorString");
    D.version = (int)D.getVersion();
    if (D.version < 90000) {
        snprintf(D.why, sizeof D.why, "libcudnn.so.9 reports version %d, need 9.x", D.version);
        return;
    }
    D.rc = 0;
}

int cudnn_att_load(int *version, char *why, size_t cap) {
    pthread_once(&D.once, load_once);
    *version = D.version;
    if (D.rc) snprintf(why, cap, "cuDNN not found: %s", D.why[0] ? D.why : "no library");
    return D.rc;
}

/* ERR_INTERNAL "cuDNN error NAME (last error) at FILE:LINE in WHAT". */
static int dnn_error(tdm_err *e, cudnnStatus_t st, const char *what, const char *file, int line) {
    char last[256] = "";
    if (D.getLastErrorString) D.getLastErrorString(last, sizeof last);
    return err_set(e, ERR_INTERNAL, "cuDNN error %s%s%.200s%s at %s:%d in %.200s",
                   D.getErrorString ? D.getErrorString(st) : "?", last[0] ? " (" : "", last,
                   last[0] ? ")" : "", file, line, what);
}

#define DNN_TRY(call, e)                                                                  \
    do {                                                                                  \
        cudnnStatus_t st_ = (call);                                                       \
        if (st_ != CUDNN_STATUS_SUCCESS) return dnn_error((e), st_, #call, __FILE__, __LINE__); \
    } while (0)

/* ------------------------------------------------------------ graph building */

/* The descriptors of one graph under construction; the first failure is kept (status
 * and what failed) and every later call is a no-op, so a builder reads straight through
 * and checks once at the end. Destroys what it made. */
struct Builder {
    std::vector<cudnnBackendDescriptor_t> owned, ops;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    char what[160] = "";
    int line = 0;
    int64_t next_virtual = 1000;
    cudnnDataType_t idx_prec = CUDNN_DATA_INT32; /* math precision of GEN_INDEX */

    ~Builder() {
        for (size_t i = owned.size(); i-- > 0;) D.bDestroy(owned[i]);
    }
    bool fail(cudnnStatus_t s, const char *w, int ln) {
        if (s == CUDNN_STATUS_SUCCESS || st != CUDNN_STATUS_SUCCESS) return s != CUDNN_STATUS_SUCCESS;
        st = s;
        snprintf(what, sizeof what, "%s", w);
        line = ln;
        return true;
    }
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t, const char *w) {
        if (st) return nullptr;
        cudnnBackendDescriptor_t d = nullptr;
        if (fail(D.bCreate(t, &d), w, __LINE__)) return nullptr;
        owned.push_back(d);
        return d;
    }
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t,
             int64_t count, const void *v, const char *w) {
        if (st || !d) return;
        fail(D.bSet(d, n, t, count, v), w, __LINE__);
    }
    void finalize(cudnnBackendDescriptor_t d, const char *w) {
        if (st || !d) return;
        fail(D.bFinalize(d), w, __LINE__);
    }
    void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n,
                  cudnnBackendDescriptor_t v, const char *w) {
        set(d, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, w);
    }

    /* A 4-d tensor: uid (0 = a new virtual one), type, dims and strides. */
    cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                    const int64_t stride[4], bool by_value = false) {
        bool virt = uid == 0;
        if (virt) uid = next_virtual++;
        cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
        int64_t align = 16;
        set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor type");
        set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dims");
        set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
        set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
        set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
        set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
        if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
        finalize(t, "tensor");
        return t;
    }
    /* A float scalar passed by value (uid given: the variant pack points at host memory). */
    cudnnBackendDescriptor_t scalar(int64_t uid) {
        static const int64_t one[4] = {1, 1, 1, 1};
        return tensor(uid, CUDNN_DATA_FLOAT, one, one, true);
    }
    /* y = mode(x[, b][, t]) computed in `prec`; axis >= 0 for GEN_INDEX. */
    void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t = nullptr,
                   cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
        cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
        set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
        set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
        if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
        finalize(pw, "pointwise");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op descriptor");
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise op x");
        if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pointwise op b");
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise op y");
        if (t) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pointwise op t");
        finalize(op, "pointwise op");
        if (!st) ops.push_back(op);
    }
    /* c = a b (batched over the first two dimensions), float accumulate */
    void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
        cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
        set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "matmul compute type");
        finalize(mm, "matmul");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul op a");
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul op b");
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul op c");
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, "matmul op descriptor");
        finalize(op, "matmul op");
        if (!st) ops.push_back(op);
    }
    /* y = reduce(x) over the dimensions where y has extent 1 */
    void reduce(cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
        cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
        set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, "reduction operator");
        set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "reduction compute type");
        finalize(r, "reduction");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction op x");
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction op y");
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r, "reduction op descriptor");
        finalize(op, "reduction op");
        if (!st) ops.push_back(op);
    }
    /* y = x seen with y's dims and strides (a transpose of the last two dimensions) */
    void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape op");
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, "reshape op x");
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, "reshape op y");
        finalize(op, "reshape op");
        if (!st) ops.push_back(op);
    }
    /* The causal mask of scores s: a new virtual tensor, s where row >= col, else the
     * -inf scalar ninf. */
    cudnnBackendDescriptor_t causal(cudnnBackendDescriptor_t s, cudnnBackendDescriptor_t ninf,
                                    const int64_t dim[4], const int64_t stride[4]) {
        cudnnBackendDescriptor_t row = tensor(0, CUDNN_DATA_INT32, dim, stride);
        cudnnBackendDescriptor_t col = tensor(0, CUDNN_DATA_INT32, dim, stride);
        cudnnBackendDescriptor_t keep = tensor(0, CUDNN_DATA_BOOLEAN, dim, stride);
        cudnnBackendDescriptor_t out = tensor(0, CUDNN_DATA_FLOAT, dim, stride);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, row, nullptr, idx_prec, 2);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, col, nullptr, idx_prec, 3);
        pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, nullptr, CUDNN_DATA_BOOLEAN);
        pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, out, keep);
        return out;
    }
};

/* uids of the tensors the caller binds */
enum {
    U_Q = 1, U_K, U_V, U_O, U_LSE, U_DO, U_DQ, U_DK, U_DV, U_D, U_SCALE, U_NINF, U_ONE
};

/* One finalised plan for one (direction, B, T, H, Hkv) (hs is the handle's). */
struct Plan {
    cudnnBackendDescriptor_t plan = nullptr;
    /* the graph's descriptors and the chosen engine configuration, kept for the plan's
     * life (cuDNN's frontend keeps them too: the plan may refer to them) */
    std::vector<cudnnBackendDescriptor_t> keep;
    int64_t ws = 0;
    int64_t engine = -1;
};

struct cudnn_att {
    cudnnHandle_t h = nullptr;
    cudaStream_t s = nullptr;
    void *ws = nullptr;
    size_t ws_bytes = 0;
    std::map<std::vector<int64_t>, Plan> plans;
    std::map<std::vector<int64_t>, std::string> refused; /* shapes without plans: why */
    int hs = 0;
    float scale = 0, ninf = -INFINITY, one = 1.0f;
};

/* Picks a deterministic engine configuration for the finalised operation graph g and
 * finalises its plan into p; heuristics mode A first, then the fallback list. */
static int pick_plan(cudnn_att *a, cudnnBackendDescriptor_t g, Plan *p, const char *name, tdm_err *e) {
    char skipped[256] = "";
    size_t nsk = 0;
    cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (cudnnBackendHeurMode_t mode : modes) {
        Builder b;
        cudnnBackendDescriptor_t heur = b.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
        b.set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g, "heuristics graph");
        b.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
        b.finalize(heur, "heuristics");
        int64_t count = 0;
        if (!b.st) b.fail(D.bGet(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &count, nullptr), "heuristics count", __LINE__);
        if (b.st) continue; /* this mode has nothing for the graph */
        std::vector<cudnnBackendDescriptor_t> cfgs;
        for (int64_t i = 0; i < count; i++) cfgs.push_back(b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "config"));
        int64_t got = 0;
        if (count && !b.st)
            b.fail(D.bGet(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                          cfgs.data()), "heuristics results", __LINE__);
        if (b.st) continue;
        for (int64_t i = 0; i < got; i++) {
            cudnnBackendDescriptor_t eng = nullptr;
            if (D.bCreate(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) continue;
            int64_t n = 0, gidx = -1;
            bool nondet = false;
            if (D.bGet(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
                CUDNN_STATUS_SUCCESS) {
                cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
                int64_t nn = 0;
                if (D.bGet(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                           CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn, notes) == CUDNN_STATUS_SUCCESS)
                    for (int64_t k = 0; k < nn; k++) nondet |= notes[k] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
                D.bGet(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &gidx);
            }
            D.bDestroy(eng);
            if (nondet) {
                nsk += (size_t)snprintf(skipped + nsk, nsk < sizeof skipped ? sizeof skipped - nsk : 0,
                                        " %lld", (long long)gidx);
                if (nsk >= sizeof skipped) nsk = sizeof skipped - 1;
                continue;
            }
            cudnnBackendDescriptor_t plan = nullptr;
            if (D.bCreate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) continue;
            cudnnBackendDescriptor_t cfg = cfgs[i];
            if (D.bSet(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->h) != CUDNN_STATUS_SUCCESS ||
                D.bSet(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) !=
                    CUDNN_STATUS_SUCCESS ||
                D.bFinalize(plan) != CUDNN_STATUS_SUCCESS) {
                D.bDestroy(plan);
                continue;
            }
            int64_t ws = 0;
            D.bGet(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
            p->plan = plan;
            p->ws = ws;
            p->engine = gidx;
            auto pos = std::find(b.owned.begin(), b.owned.end(), cfg); /* kept, not destroyed */
            if (pos != b.owned.end()) b.owned.erase(pos);
            p->keep.push_back(cfg);
            return 0;
        }
    }
    return err_set(e, ERR_INTERNAL, "cuDNN has no deterministic engine for the %s attention graph%s%s",
                   name, nsk ? " (skipped as nondeterministic: engines" : "", nsk ? skipped : "");
}

/* Builds (or finds) the plan of one direction for (B, T, H, Hkv). */
static int get_plan(cudnn_att *a, bool fwd, int B, int T, int H, int Hkv, Plan **out, tdm_err *e) {
    std::vector<int64_t> key = {fwd ? 1 : 0, B, T, H, Hkv};
    auto it = a->plans.find(key);
    if (it != a->plans.end()) {
        *out = &it->second;
        return 0;
    }
    const int64_t b = B, h = H, hk = Hkv, t = T, d = a->hs, rs = (h + 2 * hk) * d, c = h * d;
    /* q, k, v in qkv[B, T, (H + 2 Hkv) D]; o, do in [B, T, H D]; S [B, H, T, T]; rows
     * [B, H, T, 1]; K and V (and their gradients) of Hkv heads */
    const int64_t dQKV[4] = {b, h, t, d}, sQKV[4] = {t * rs, d, rs, 1};
    const int64_t dKV[4] = {b, hk, t, d};
    const int64_t dKT[4] = {b, hk, d, t}, sKT[4] = {t * rs, d, 1, rs};
    const int64_t sO[4] = {t * c, d, c, 1};
    const int64_t dS[4] = {b, h, t, t}, sS[4] = {h * t * t, t * t, t, 1};
    const int64_t sST[4] = {h * t * t, t * t, 1, t};
    const int64_t dR[4] = {b, h, t, 1}, sR[4] = {h * t, t, 1, 1};
    const int64_t sX[4] = {h * t * d, t * d, d, 1};
    /* the index precision of the causal mask: INT32 as cuDNN's frontend sets it for its
     * padding masks, then FLOAT (its default) when the first graph finds no engine */
    Plan p;
    for (int variant = 0;; variant++) {
        Builder g;
        g.idx_prec = variant ? CUDNN_DATA_FLOAT : CUDNN_DATA_INT32;
        if (fwd) {
            auto Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, dQKV, sQKV);
            auto KT = g.tensor(U_K, CUDNN_DATA_BFLOAT16, dKT, sKT);
            auto V = g.tensor(U_V, CUDNN_DATA_BFLOAT16, dKV, sQKV);
            auto O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, dQKV, sO);
            auto LSE = g.tensor(U_LSE, CUDNN_DATA_FLOAT, dR, sR);
            auto scale = g.scalar(U_SCALE), ninf = g.scalar(U_NINF);
            auto S = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.matmul(Q, KT, S);
            auto S2 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_MUL, S, scale, S2);
            auto S3 = g.causal(S2, ninf, dS, sS);
            auto M = g.tensor(0, CUDNN_DATA_FLOAT, dR, sR);
            g.reduce(CUDNN_REDUCE_TENSOR_MAX, S3, M);
            auto S4 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_SUB, S3, M, S4);
            auto E = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_EXP, S4, nullptr, E);
            auto L = g.tensor(0, CUDNN_DATA_FLOAT, dR, sR);
            g.reduce(CUDNN_REDUCE_TENSOR_ADD, E, L);
            auto logL = g.tensor(0, CUDNN_DATA_FLOAT, dR, sR);
            g.pointwise(CUDNN_POINTWISE_LOG, L, nullptr, logL);
            g.pointwise(CUDNN_POINTWISE_ADD, M, logL, LSE);
            auto P = g.tensor(0, CUDNN_DATA_BFLOAT16, dS, sS);
            g.pointwise(CUDNN_POINTWISE_DIV, E, L, P);
            g.matmul(P, V, O);
        } else {
            auto Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, dQKV, sQKV);
            auto KT = g.tensor(U_K, CUDNN_DATA_BFLOAT16, dKT, sKT);
            auto VT = g.tensor(U_V, CUDNN_DATA_BFLOAT16, dKT, sKT);
            auto O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, dQKV, sO);
            auto dO = g.tensor(U_DO, CUDNN_DATA_BFLOAT16, dQKV, sO);
            auto LSE = g.tensor(U_LSE, CUDNN_DATA_FLOAT, dR, sR);
            auto dQ = g.tensor(U_DQ, CUDNN_DATA_BFLOAT16, dQKV, sQKV);
            auto dK = g.tensor(U_DK, CUDNN_DATA_BFLOAT16, dKV, sQKV);
            auto dV = g.tensor(U_DV, CUDNN_DATA_BFLOAT16, dKV, sQKV);
            auto Dsum = g.tensor(U_D, CUDNN_DATA_FLOAT, dR, sR);
            auto scale = g.scalar(U_SCALE), ninf = g.scalar(U_NINF), one = g.scalar(U_ONE);
            /* D = sum_row dO * O */
            auto dOO = g.tensor(0, CUDNN_DATA_FLOAT, dQKV, sX);
            g.pointwise(CUDNN_POINTWISE_MUL, dO, O, dOO);
            auto Dv = g.tensor(0, CUDNN_DATA_FLOAT, dR, sR);
            g.reduce(CUDNN_REDUCE_TENSOR_ADD, dOO, Dv);
            g.pointwise(CUDNN_POINTWISE_MUL, Dv, one, Dsum);
            /* P = exp(mask(Q K^T scale - lse)) */
            auto S = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.matmul(Q, KT, S);
            auto S2 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_MUL, S, scale, S2);
            auto S3 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_SUB, S2, LSE, S3);
            auto S4 = g.causal(S3, ninf, dS, sS);
            auto P = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_EXP, S4, nullptr, P);
            /* dV = P^T dO */
            auto PT = g.tensor(0, CUDNN_DATA_BFLOAT16, dS, sST);
            g.reshape(P, PT);
            g.matmul(PT, dO, dV);
            /* dS = (dO V^T - D) P scale */
            auto dP = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.matmul(dO, VT, dP);
            auto t1 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_SUB, dP, Dsum, t1);
            auto t2 = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_MUL, t1, P, t2);
            auto dSc = g.tensor(0, CUDNN_DATA_FLOAT, dS, sS);
            g.pointwise(CUDNN_POINTWISE_MUL, t2, scale, dSc);
            /* dK = dS^T Q; dQ = dS K */
            auto dST = g.tensor(0, CUDNN_DATA_BFLOAT16, dS, sST);
            g.reshape(dSc, dST);
            g.matmul(dST, Q, dK);
            auto K = g.tensor(0, CUDNN_DATA_FLOAT, dKV, sQKV);
            g.reshape(KT, K);
            g.matmul(dSc, K, dQ);
        }
        cudnnBackendDescriptor_t graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
        g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->h, "operation graph handle");
        if (!g.st)
            g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)g.ops.size(),
                  g.ops.data(), "operation graph ops");
        g.finalize(graph, "operation graph");
        if (g.st && variant == 0) continue;
        if (g.st)
            return err_set(e, ERR_INTERNAL, "cuDNN %s attention graph: %s failed: %s (B %d, T %d, H %d, Hkv %d, hs %d)",
                           fwd ? "forward" : "backward", g.what, D.getErrorString(g.st), B, T, H, Hkv, a->hs);
        int rc = pick_plan(a, graph, &p, fwd ? "forward" : "backward", e);
        if (rc) {
            for (cudnnBackendDescriptor_t d : p.keep) D.bDestroy(d);
            p.keep.clear();
            if (variant == 0) continue;
            return rc;
        }
        p.keep.insert(p.keep.begin(), g.owned.begin(), g.owned.end());
        g.owned.clear();
        break;
    }
    if ((size_t)p.ws > a->ws_bytes) {
        cudaStreamSynchronize(a->s); /* the old workspace may still be in use */
        if (a->ws) cudaFree(a->ws);
        a->ws = nullptr;
        a->ws_bytes = 0;
        CUDA_TRY(cudaMalloc(&a->ws, (size_t)p.ws), e);
        a->ws_bytes = (size_t)p.ws;
    }
    *out = &(a->plans[key] = p);
    return 0;
}

/* Runs plan p with the n (uid, pointer) pairs. */
static int execute(cudnn_att *a, Plan *p, int n, const int64_t *uids, void *const *ptrs, tdm_err *e) {
    cudnnBackendDescriptor_t vp = nullptr;
    DNN_TRY(D.bCreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp), e);
    void *ws = a->ws;
    cudnnStatus_t st = D.bSet(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (!st) st = D.bSet(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (!st) st = D.bSet(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (!st) st = D.bFinalize(vp);
    if (!st) st = D.bExecute(a->h, p->plan, vp);
    D.bDestroy(vp);
    if (st) return dnn_error(e, st, "cudnnBackendExecute(attention)", __FILE__, __LINE__);
    return 0;
}

cudnn_att *cudnn_att_create(cudaStream_t s, int hs, char *why, size_t cap) {
    int version;
    if (cudnn_att_load(&version, why, cap)) return nullptr;
    if (hs % 8 != 0 || hs > 128) {
        snprintf(why, cap, "head size %d: cuDNN's fused attention needs a multiple of 8, at most 128", hs);
        return nullptr;
    }
    cudnn_att *a = new (std::nothrow) cudnn_att();
    if (!a) {
        snprintf(why, cap, "out of memory");
        return nullptr;
    }
    cudnnStatus_t st = D.create(&a->h);
    if (st == CUDNN_STATUS_SUCCESS) st = D.setStream(a->h, s);
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[200] = "";
        if (D.getLastErrorString) D.getLastErrorString(last, sizeof last);
        snprintf(why, cap, "cudnnCreate/cudnnSetStream: %s %s", D.getErrorString(st), last);
        cudnn_att_destroy(a);
        return nullptr;
    }
    a->s = s;
    a->hs = hs;
    a->scale = (float)(1.0 / sqrt((double)hs));
    return a;
}

void cudnn_att_destroy(cudnn_att *a) {
    if (!a) return;
    if (a->s) cudaStreamSynchronize(a->s);
    for (auto &kv : a->plans) {
        if (kv.second.plan) D.bDestroy(kv.second.plan);
        for (size_t i = kv.second.keep.size(); i-- > 0;) D.bDestroy(kv.second.keep[i]);
    }
    if (a->ws) cudaFree(a->ws);
    if (a->h) D.destroy(a->h);
    delete a;
}

int cudnn_att_prepare(cudnn_att *a, int B, int T, int H, int Hkv, tdm_err *e) {
    std::vector<int64_t> key = {B, T, H, Hkv};
    auto it = a->refused.find(key);
    if (it != a->refused.end()) return err_set(e, ERR_INTERNAL, "%s", it->second.c_str());
    Plan *p;
    int rc = 0;
    /* cuDNN's own frontend pads (a padding mask) every sequence length that is not a
     * multiple of 128 up to cuDNN 9.15: without it those versions are not trusted here */
    if (T % 128 != 0 && D.version <= 91500)
        rc = err_set(e, ERR_INTERNAL, "cuDNN %d.%d needs T a multiple of 128 here (T = %d)",
                     D.version / 10000, D.version / 100 % 100, T);
    if (!rc && (H < 1 || Hkv < 1 || H % Hkv))
        rc = err_set(e, ERR_INTERNAL, "%d query heads on %d key/value heads", H, Hkv);
    if (!rc) rc = get_plan(a, true, B, T, H, Hkv, &p, e);
    if (!rc) rc = get_plan(a, false, B, T, H, Hkv, &p, e);
    if (rc) a->refused[key] = e->msg;
    return rc;
}

int cudnn_att_forward(cudnn_att *a, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H,
                      int Hkv, tdm_err *e) {
    Plan *p;
    int rc = get_plan(a, true, B, T, H, Hkv, &p, e);
    if (rc) return rc;
    const size_t koff = (size_t)H * a->hs, voff = (size_t)(H + Hkv) * a->hs;
    const int64_t uids[] = {U_Q, U_K, U_V, U_O, U_LSE, U_SCALE, U_NINF};
    void *const ptrs[] = {(void *)qkv, (void *)(qkv + koff), (void *)(qkv + voff), out, lse,
                          &a->scale, &a->ninf};
    return execute(a, p, 7, uids, ptrs, e);
}

int cudnn_att_backward(cudnn_att *a, bf16 *dqkv, float *Dbuf, const bf16 *dout, const bf16 *qkv,
                       const bf16 *out, const float *lse, int B, int T, int H, int Hkv, tdm_err *e) {
    Plan *p;
    int rc = get_plan(a, false, B, T, H, Hkv, &p, e);
    if (rc) return rc;
    const size_t koff = (size_t)H * a->hs, voff = (size_t)(H + Hkv) * a->hs;
    const int64_t uids[] = {U_Q, U_K, U_V, U_O, U_DO, U_LSE, U_DQ, U_DK, U_DV, U_D,
                            U_SCALE, U_NINF, U_ONE};
    void *const ptrs[] = {(void *)qkv, (void *)(qkv + koff), (void *)(qkv + voff), (void *)out,
                          (void *)dout, (void *)lse, dqkv, dqkv + koff, dqkv + voff, Dbuf,
                          &a->scale, &a->ninf, &a->one};
    return execute(a, p, 13, uids, ptrs, e);
}

/* ------------------------------------------------------------ self-check */

/* The largest |x - y| over n bf16 (or float when f32) values, and the largest |y|. */
static void max_err(const void *x, const void *y, size_t n, bool f32, double *err, double *ref) {
    *err = 0, *ref = 0;
    for (size_t i = 0; i < n; i++) {
        double a = f32 ? ((const float *)x)[i] : (double)__bfloat162float(((const bf16 *)x)[i]);
        double b = f32 ? ((const float *)y)[i] : (double)__bfloat162float(((const bf16 *)y)[i]);
        if (!(fabs(a - b) <= *err)) *err = fabs(a - b); /* NaN counts as infinitely wrong */
        if (fabs(b) > *ref) *ref = fabs(b);
    }
}

int cudnn_att_selfcheck(cudnn_att *a, int group, int tile, char *msg, size_t cap) {
    const int hs = a->hs, Hkv = group > 1 ? 2 : 4, H = Hkv * group, B = 2, T = 128, C = H * hs;
    const int RS = (H + 2 * Hkv) * hs; /* a row of qkv */
    const size_t nqkv = (size_t)B * T * RS, no = (size_t)B * T * C, nr = (size_t)B * H * T;
    std::vector<bf16> h_qkv(nqkv), h_do(no);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto rnd = [&x]() { /* xorshift64*, uniform in [-1, 1) */
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0;
    };
    for (size_t i = 0; i < nqkv; i++) h_qkv[i] = __float2bfloat16((float)(2.0 * rnd()));
    for (size_t i = 0; i < no; i++) h_do[i] = __float2bfloat16((float)rnd());
    /* device: qkv, dout | builtin out, lse, dqkv, D | two cuDNN sets of the same */
    bf16 *qkv = nullptr, *dout = nullptr, *out[3] = {}, *dqkv[3] = {};
    float *lse[3] = {}, *Dbuf = nullptr;
    tdm_err e = {};
    int rc = -1;
    std::vector<bf16> o[3], dq[3];
    std::vector<float> l[3];
    bool ok = cudaMalloc(&qkv, nqkv * 2) == cudaSuccess && cudaMalloc(&dout, no * 2) == cudaSuccess &&
              cudaMalloc(&Dbuf, nr * 4) == cudaSuccess;
    for (int k = 0; k < 3 && ok; k++)
        ok = cudaMalloc(&out[k], no * 2) == cudaSuccess && cudaMalloc(&dqkv[k], nqkv * 2) == cudaSuccess &&
             cudaMalloc(&lse[k], nr * 4) == cudaSuccess;
    if (!ok) {
        snprintf(msg, cap, "self-check: out of GPU memory");
        cudaGetLastError();
        goto done;
    }
    if (cudaMemcpy(qkv, h_qkv.data(), nqkv * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dout, h_do.data(), no * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
        snprintf(msg, cap, "self-check: cudaMemcpy: %s", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    if (gpu_attention_forward<bf16>(out[0], lse[0], qkv, B, T, H, Hkv, hs, tile, a->s) != cudaSuccess ||
        gpu_attention_backward<bf16>(dqkv[0], Dbuf, dout, qkv, out[0], lse[0], B, T, H, Hkv, hs, tile, a->s) !=
            cudaSuccess) {
        snprintf(msg, cap, "self-check: built-in kernels: %s", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    if (cudnn_att_prepare(a, B, T, H, Hkv, &e)) {
        snprintf(msg, cap, "self-check: %s", e.msg);
        goto done;
    }
    for (int k = 1; k < 3; k++) {
        if (cudnn_att_forward(a, out[k], lse[k], qkv, B, T, H, Hkv, &e) ||
            cudnn_att_backward(a, dqkv[k], Dbuf, dout, qkv, out[k], lse[k], B, T, H, Hkv, &e)) {
            snprintf(msg, cap, "self-check: %s", e.msg);
            goto done;
        }
    }
    if (cudaStreamSynchronize(a->s) != cudaSuccess) {
        snprintf(msg, cap, "self-check: %s", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    for (int k = 0; k < 3; k++) {
        o[k].resize(no), dq[k].resize(nqkv), l[k].resize(nr);
        if (cudaMemcpy(o[k].data(), out[k], no * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(dq[k].data(), dqkv[k], nqkv * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(l[k].data(), lse[k], nr * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
            snprintf(msg, cap, "self-check: cudaMemcpy: %s", cudaGetErrorString(cudaGetLastError()));
            goto done;
        }
    }
    if (memcmp(o[1].data(), o[2].data(), no * 2) || memcmp(dq[1].data(), dq[2].data(), nqkv * 2) ||
        memcmp(l[1].data(), l[2].data(), nr * 4)) {
        snprintf(msg, cap, "self-check: two cuDNN runs on the same input gave different bits");
        goto done;
    }
    {
        double eo, ro, el, rl, eg = 0, rg = 0;
        max_err(o[1].data(), o[0].data(), no, false, &eo, &ro);
        max_err(l[1].data(), l[0].data(), nr, true, &el, &rl);
        /* dq, dk, dv each against its own scale: the rows of dqkv are q | k | v */
        double worst = 0;
        const size_t from[3] = {0, (size_t)C, (size_t)C + (size_t)Hkv * hs};
        const size_t width[3] = {(size_t)C, (size_t)Hkv * hs, (size_t)Hkv * hs};
        for (int part = 0; part < 3; part++) {
            double pe = 0, pr = 0;
            for (size_t r = 0; r < (size_t)B * T; r++) {
                double e1, r1;
                size_t off = r * RS + from[part];
                max_err(dq[1].data() + off, dq[0].data() + off, width[part], false, &e1, &r1);
                if (!(e1 <= pe)) pe = e1;
                if (r1 > pr) pr = r1;
            }
            double rel = pe / (pr > 0 ? pr : 1);
            if (!(rel <= worst)) worst = rel, eg = pe, rg = pr;
        }
        double rel_o = eo / (ro > 0 ? ro : 1);
        bool pass = rel_o <= CUDNN_ATT_TOL_OUT && el <= CUDNN_ATT_TOL_LSE && worst <= CUDNN_ATT_TOL_GRAD;
        snprintf(msg, cap,
                 "max err out %.2e (of %.2f), lse %.2e, grads %.2e (of %.2f); same bits twice; "
                 "B 2, H %d on %d, T 128, hs %d",
                 eo, ro, el, eg, rg, H, Hkv, hs);
        if (!pass) {
            char detail[256];
            snprintf(detail, sizeof detail, "%s", msg);
            snprintf(msg, cap, "self-check failed: %s (tolerances %.0e, %.0e, %.0e)", detail,
                     CUDNN_ATT_TOL_OUT, CUDNN_ATT_TOL_LSE, CUDNN_ATT_TOL_GRAD);
            goto done;
        }
    }
    rc = 0;
done:
    cudaStreamSynchronize(a->s);
    cudaFree(qkv), cudaFree(dout), cudaFree(Dbuf);
    for (int k = 0; k < 3; k++) cudaFree(out[k]), cudaFree(dqkv[k]), cudaFree(lse[k]);
    cudaGetLastError();
    return rc;
}

#endif /* TANDEM_GPU_SIM, TANDEM_HAVE_CUDNN_H */
