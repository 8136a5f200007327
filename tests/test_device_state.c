/* test_device_state.c — a committed state holds nothing device-specific (the format side
 * of "a state committed by the CUDA backend resumes on the CPU backend and back"; the
 * round trip through a real GPU is in tests/test_gpu.c).
 *
 * A commit reaches the store only through ops->download into host memory, so its bytes
 * cannot depend on how a backend keeps its buffers. To show it without a GPU, `foreign`
 * below is a backend whose buffers hold every float byte-swapped (as unlike the host's
 * layout as device memory can be): a state committed through it must be the same bytes
 * as the CPU backend's commit of the same values (same blobs, same manifest), must load
 * into the CPU backend and train on, and the CPU's next commit must load back into
 * `foreign` with every tensor intact. The manifest must name no device.
 */
#include <stdint.h>
#include <string.h>

#include "model/model.h"
#include "ledger/ckpt.h"
#include "runner/ckpt_model.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "tests/test.h"
#include "util/rng.h"

/* ---------------------------------------------------------------- the foreign backend */

struct foreign_buf {
    size_t n;
    uint32_t w[]; /* byte-swapped floats */
};

static uint32_t bswap32(uint32_t x) { return __builtin_bswap32(x); }

static float *foreign_alloc(model_ctx *ctx, size_t n) {
    (void)ctx;
    struct foreign_buf *b = calloc(1, sizeof *b + n * sizeof(uint32_t));
    if (!b) return NULL;
    b->n = n;
    return (float *)b; /* opaque to the caller, like a device pointer */
}

static void foreign_release(model_ctx *ctx, float *buf) {
    (void)ctx;
    free(buf);
}

static int foreign_upload(model_ctx *ctx, float *dst, const float *host, size_t n, tdm_err *e) {
    (void)ctx;
    struct foreign_buf *b = (struct foreign_buf *)dst;
    if (n > b->n) return err_set(e, ERR_INTERNAL, "foreign upload of %zu > %zu", n, b->n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &host[i], 4);
        b->w[i] = bswap32(u);
    }
    return 0;
}

static int foreign_download(model_ctx *ctx, float *host, const float *src, size_t n, tdm_err *e) {
    (void)ctx;
    const struct foreign_buf *b = (const struct foreign_buf *)src;
    if (n > b->n) return err_set(e, ERR_INTERNAL, "foreign download of %zu > %zu", n, b->n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bswap32(b->w[i]);
        memcpy(&host[i], &u, 4);
    }
    return 0;
}

/* Only what checkpointing uses: alloc, release, upload, download. */
static const model_ops foreign_ops = {
    .name = "foreign",
    .alloc = foreign_alloc,
    .release = foreign_release,
    .upload = foreign_upload,
    .download = foreign_download,
};

/* ---------------------------------------------------------------- helpers */

static const model_config TINY = {.vocab = 32, .ctx = 16, .layers = 2, .heads = 2, .channels = 16};

static void fill_random(float *x, size_t n, uint64_t seed, double scale) {
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 30, 0, 0);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * rng_normal(&s));
}

static void make_rec(rec_state *r, uint64_t seq) {
    memset(r, 0, sizeof *r);
    r->seq = seq;
    r->episode = seq / 3;
    snprintf(r->step, sizeof r->step, "free");
    r->index = seq % 3;
    r->free_steps = seq;
    r->seed = 7;
    r->M = 2;
    r->alpha[0] = 0.25;
    r->alpha[1] = 0.75;
}

/* Commits the three host tensors t[0..2] through `ops` (uploaded into its buffers first)
 * as state `seq` of the store at url. */
static int commit_through(const model_ops *ops, const char *url, const model_layout *lay,
                          float *const t[CKPT_TENSORS], uint64_t seq, tdm_err *e) {
    store *st = store_open(url, e);
    if (!st) return e->code;
    ckpt_model_io cio;
    ckpt *c = ckpt_model_open(st, lay, 4096, e);
    int rc = c ? 0 : e->code;
    float *dev[CKPT_TENSORS] = {0};
    for (int k = 0; !rc && k < CKPT_TENSORS; k++) {
        dev[k] = ops->alloc(NULL, lay->numel);
        if (!dev[k]) rc = err_set(e, ERR_INTERNAL, "alloc");
        else rc = ops->upload(NULL, dev[k], t[k], lay->numel, e);
    }
    rec_state rec;
    int found = 0;
    if (!rc) rc = ckpt_acquire(c, 0, e); /* as the runner: lease, then load */
    if (!rc) rc = ckpt_load(c, &rec, &found, e);
    if (!rc && found) rec_state_free(&rec);
    make_rec(&rec, seq);
    if (!rc) rc = ckpt_snapshot(c, &rec, ckpt_io_of(&cio, ops, NULL), dev, 0, e);
    if (!rc) rc = ckpt_release(c, e);
    for (int k = 0; k < CKPT_TENSORS; k++)
        if (dev[k]) ops->release(NULL, dev[k]);
    ckpt_close(c);
    store_close(st);
    return rc;
}

/* Loads the newest state of url and uploads its tensors into `ops` buffers, then
 * downloads them into out[0..2] (host). */
static int load_through(const model_ops *ops, const char *url, const model_layout *lay,
                        float *out[CKPT_TENSORS], uint64_t *seq, tdm_err *e) {
    store *st = store_open(url, e);
    if (!st) return e->code;
    ckpt *c = ckpt_model_open(st, lay, 4096, e);
    int rc = c ? 0 : e->code, found = 0;
    rec_state rec;
    if (!rc) rc = ckpt_load(c, &rec, &found, e);
    if (!rc && !found) rc = err_set(e, ERR_STORE, "no state in %s", url);
    if (!rc) {
        *seq = rec.seq;
        for (size_t i = 0; !rc && i < rec.ntensors; i++)
            if (strcmp(rec.tensors[i].dtype, "f32") || rec.tensors[i].ndim != 1)
                rc = err_set(e, ERR_INTERNAL, "tensor %s is %s with %d dims", rec.tensors[i].name,
                             rec.tensors[i].dtype, rec.tensors[i].ndim);
        rec_state_free(&rec);
    }
    for (int k = 0; !rc && k < CKPT_TENSORS; k++) {
        float *dev = ops->alloc(NULL, lay->numel);
        if (!dev) {
            rc = err_set(e, ERR_INTERNAL, "alloc");
            break;
        }
        rc = ops->upload(NULL, dev, ckpt_host(c, k), lay->numel, e);
        if (!rc) rc = ops->download(NULL, out[k], dev, lay->numel, e);
        ops->release(NULL, dev);
    }
    if (c) ckpt_close(c);
    store_close(st);
    return rc;
}

static int read_key(const char *url, const char *key, void **data, size_t *n) {
    tdm_err e;
    store *st = store_open(url, &e);
    if (!st) return -1;
    int rc = store_get(st, key, data, n, NULL, &e);
    store_close(st);
    return rc;
}

static int contains(const void *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp((const char *)hay + i, needle, k)) return 1;
    return 0;
}

/* ---------------------------------------------------------------- tests */

/* The same values committed through the CPU backend and through `foreign` are the same
 * bytes in the store: blobs, manifest and HEAD's hash of it. */
static void test_commit_bytes_do_not_depend_on_the_backend(void) {
    model_layout lay;
    tdm_err e = {0};
    CHECK(model_layout_init(&lay, &TINY, &e) == 0, "%s", e.msg);
    size_t P = lay.numel;
    float *t[CKPT_TENSORS];
    for (int k = 0; k < CKPT_TENSORS; k++) {
        t[k] = malloc(P * sizeof(float));
        fill_random(t[k], P, 10 + k, k ? 0.01 : 1.0);
    }
    char *dir = test_tmpdir("devstate");
    char url_cpu[600], url_foreign[600];
    snprintf(url_cpu, sizeof url_cpu, "file://%s/cpu", dir);
    snprintf(url_foreign, sizeof url_foreign, "file://%s/foreign", dir);
    /* the CPU backend's buffers are plain host memory: alloc needs no workspace */
    CHECK(commit_through(&model_cpu_ops, url_cpu, &lay, t, 5, &e) == 0, "cpu commit: %s", e.msg);
    CHECK(commit_through(&foreign_ops, url_foreign, &lay, t, 5, &e) == 0, "foreign commit: %s",
          e.msg);
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(read_key(url_cpu, "states/5.mp", &a, &na) == 0, "cpu manifest");
    CHECK(read_key(url_foreign, "states/5.mp", &b, &nb) == 0, "foreign manifest");
    CHECK(na == nb && memcmp(a, b, na) == 0,
          "the manifests differ (%zu vs %zu bytes): the state format depends on the backend", na,
          nb);
    /* nothing in the manifest names a device or a backend (msgpack strings: 0xa0 + len) */
    static const char *const names[] = {"\xa4" "cuda", "\xa3" "cpu", "\xa6" "device",
                                        "\xa7" "foreign", "\xa9" "precision"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        CHECK(!contains(a, na, names[i]), "the manifest holds the string \"%s\"", names[i] + 1);
    free(a);
    free(b);
    /* every tensor comes back intact through either backend */
    float *out[CKPT_TENSORS];
    for (int k = 0; k < CKPT_TENSORS; k++) out[k] = malloc(P * sizeof(float));
    uint64_t seq = 0;
    CHECK(load_through(&foreign_ops, url_cpu, &lay, out, &seq, &e) == 0, "load: %s", e.msg);
    CHECK(seq == 5, "seq %llu", (unsigned long long)seq);
    for (int k = 0; k < CKPT_TENSORS; k++)
        CHECK(memcmp(out[k], t[k], P * sizeof(float)) == 0, "tensor %d changed", k);
    CHECK(load_through(&model_cpu_ops, url_foreign, &lay, out, &seq, &e) == 0, "load: %s", e.msg);
    for (int k = 0; k < CKPT_TENSORS; k++)
        CHECK(memcmp(out[k], t[k], P * sizeof(float)) == 0, "tensor %d changed", k);
    for (int k = 0; k < CKPT_TENSORS; k++) {
        free(t[k]);
        free(out[k]);
    }
    test_rmtree(dir);
    free(dir);
    model_layout_free(&lay);
}

/* foreign commits → the CPU backend resumes and trains one AdamW step → commits → foreign
 * loads it: the tensors are exactly what the CPU computed, and the CPU's step from the
 * foreign state equals its step from the original host values. */
static void test_round_trip_foreign_cpu_foreign(void) {
    model_layout lay;
    tdm_err e = {0};
    CHECK(model_layout_init(&lay, &TINY, &e) == 0, "%s", e.msg);
    size_t P = lay.numel;
    const model_ops *cpu = &model_cpu_ops;
    float *t[CKPT_TENSORS], *got[CKPT_TENSORS];
    for (int k = 0; k < CKPT_TENSORS; k++) {
        t[k] = malloc(P * sizeof(float));
        got[k] = malloc(P * sizeof(float));
    }
    model_init_params(&lay, 3, t[0]);
    memset(t[1], 0, P * sizeof(float));
    memset(t[2], 0, P * sizeof(float));
    char *dir = test_tmpdir("devstate");
    char url[600];
    snprintf(url, sizeof url, "file://%s/run", dir);
    CHECK(commit_through(&foreign_ops, url, &lay, t, 1, &e) == 0, "commit: %s", e.msg);
    uint64_t seq = 0;
    CHECK(load_through(cpu, url, &lay, got, &seq, &e) == 0, "load: %s", e.msg);

    /* one training step on the CPU from the loaded state, and from the original values */
    int B = 2, T = 8, M = 2;
    uint32_t tok[2 * 9];
    int32_t dom[2] = {0, 1};
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)((i * 7 + 3) % TINY.vocab);
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    double coef[2] = {0.4, 0.6}, loss[2];
    model_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.01f, .step = 1};
    float *after[2][CKPT_TENSORS];
    for (int run = 0; run < 2; run++) {
        float *const *src = run == 0 ? got : t;
        model_ctx *ctx = cpu->create(&lay, B, T, M, 1, &e);
        CHECK(ctx, "create: %s", e.msg);
        float *dev[CKPT_TENSORS], *g = cpu->alloc(ctx, P);
        for (int k = 0; k < CKPT_TENSORS; k++) {
            dev[k] = cpu->alloc(ctx, P);
            cpu->upload(ctx, dev[k], src[k], P, &e);
        }
        CHECK(cpu->forward(ctx, dev[0], &batch, loss, NULL, &e) == 0, "%s", e.msg);
        CHECK(cpu->backward(ctx, dev[0], coef, g, &e) == 0, "%s", e.msg);
        CHECK(cpu->adamw(ctx, dev[0], g, dev[1], dev[2], &hp, &e) == 0, "%s", e.msg);
        for (int k = 0; k < CKPT_TENSORS; k++) {
            after[run][k] = malloc(P * sizeof(float));
            cpu->download(ctx, after[run][k], dev[k], P, &e);
            cpu->release(ctx, dev[k]);
        }
        cpu->release(ctx, g);
        cpu->destroy(ctx);
    }
    for (int k = 0; k < CKPT_TENSORS; k++)
        CHECK(memcmp(after[0][k], after[1][k], P * sizeof(float)) == 0,
              "the step from the loaded state differs in tensor %d", k);
    CHECK(commit_through(cpu, url, &lay, after[0], 2, &e) == 0, "commit: %s", e.msg);
    CHECK(load_through(&foreign_ops, url, &lay, got, &seq, &e) == 0, "load: %s", e.msg);
    CHECK(seq == 2, "loaded seq %llu, want 2", (unsigned long long)seq);
    for (int k = 0; k < CKPT_TENSORS; k++)
        CHECK(memcmp(got[k], after[0][k], P * sizeof(float)) == 0,
              "tensor %d changed on the way back", k);
    for (int k = 0; k < CKPT_TENSORS; k++) {
        free(t[k]);
        free(got[k]);
        free(after[0][k]);
        free(after[1][k]);
    }
    test_rmtree(dir);
    free(dir);
    model_layout_free(&lay);
}

int main(void) {
    RUN(test_commit_bytes_do_not_depend_on_the_backend);
    RUN(test_round_trip_foreign_cpu_foreign);
    return test_summary("test_device_state");
}
