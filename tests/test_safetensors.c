/* test_safetensors.c — model/safetensors.h against an independent implementation of the
 * format (tests/models/st_ref.py: numpy and the standard library):
 *   - files it writes (F32, BF16, F16 and I64 tensors, metadata; a folder of two shards
 *     with model.safetensors.index.json) read back with every value equal, bit for bit,
 *     to the float32 values it meant (F16 subnormals, the largest half, -0; a BF16 tie);
 *   - files tandem writes (F32 and BF16, metadata with quotes) check out in its reader:
 *     8-byte alignment, offsets that tile the data, BF16 bits rounded to nearest even;
 *   - broken files and folders are refused with a message naming the file and the
 *     problem (truncated anywhere, a header length past the file, not an object, an
 *     unknown dtype, a size mismatch, overlapping ranges, a hole, trailing bytes, a name
 *     twice, an index naming a missing tensor or file), and a few hundred random damages
 *     of a header never crash the reader (the ASan build runs this too). */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/hf_config.h"
#include "model/safetensors.h"
#include "tests/test.h"
#include "util/buf.h"
#include "util/rng.h"

static char g_dir[600], g_root[600];

static int read_bytes(const char *path, unsigned char **data, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(*data, 1, (size_t)(len > 0 ? len : 0), f);
    fclose(f);
    return 0;
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(data, 1, n, f);
    return fclose(f);
}

/* Every float tensor of s against DIR/expect/<name>.f32, bit for bit. */
static int matches_expect(const st_set *s, const char *name) {
    const st_tensor *t = safetensors_find(s, name);
    CHECK_OR_RET(t, "no tensor %s", name);
    char path[900];
    snprintf(path, sizeof path, "%s/expect/%s.f32", g_dir, name);
    unsigned char *want;
    size_t n;
    CHECK_OR_RET(read_bytes(path, &want, &n) == 0 && n == t->numel * 4, "%s: %zu expected bytes for %llu values",
                 name, n, (unsigned long long)t->numel);
    float *got = malloc(t->numel * 4);
    tdm_err e = {0};
    int rc = safetensors_to_f32(t, got, &e);
    int same = rc == 0 && memcmp(got, want, n) == 0;
    free(got);
    free(want);
    CHECK_OR_RET(rc == 0, "%s", e.msg);
    CHECK_OR_RET(same, "%s: values differ from st_ref.py's", name);
    return 0;
}

static void test_reads_the_reference_writer(void) {
    char path[800];
    snprintf(path, sizeof path, "%s/one.safetensors", g_dir);
    st_set *s;
    tdm_err e = {0};
    CHECK(safetensors_open(path, &s, &e) == 0, "%s", e.msg);
    CHECK(safetensors_count(s) == 4, "%zu tensors", safetensors_count(s));
    const st_tensor *t = safetensors_find(s, "model.embed_tokens.weight");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 4, "embed shape");
    t = safetensors_find(s, "norm.weight");
    CHECK(t && t->dtype == ST_F16 && t->numel == 6, "f16 tensor");
    t = safetensors_find(s, "position_ids");
    CHECK(t && t->dtype == ST_I64 && t->numel == 2, "i64 tensor");
    float f2[2];
    CHECK(safetensors_to_f32(t, f2, &e) != 0 && strstr(e.msg, "I64") && strstr(e.msg, "position_ids"),
          "an I64 tensor converted to float: %s", e.msg);
    CHECK(safetensors_meta(s, "format") && !strcmp(safetensors_meta(s, "format"), "pt"), "metadata");
    CHECK(!safetensors_find(s, "missing"), "a missing name was found");
    const char *names[] = {"model.embed_tokens.weight", "layers.0.q_proj.bias", "norm.weight"};
    for (int i = 0; i < 3; i++)
        if (matches_expect(s, names[i])) {
            safetensors_close(s);
            return;
        }
    /* a few values spelled out: the largest half and a subnormal */
    float v[6];
    safetensors_to_f32(safetensors_find(s, "norm.weight"), v, &e);
    CHECK(v[4] == 65504.0f && v[3] > 5.9e-8f && v[3] < 6.0e-8f && signbit(v[5]), "f16 specials: %g %g %g", v[4], v[3],
          v[5]);
    safetensors_close(s);
}

static void test_sharded_folder(void) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/sharded", g_dir);
    st_set *s;
    tdm_err e = {0};
    CHECK(safetensors_open(dir, &s, &e) == 0, "%s", e.msg);
    CHECK(safetensors_count(s) == 3, "%zu tensors", safetensors_count(s));
    CHECK(strstr(safetensors_find(s, "c.weight")->file, "00002"), "c.weight's file");
    int bad = matches_expect(s, "a.weight") || matches_expect(s, "b.bias") || matches_expect(s, "c.weight");
    safetensors_close(s);
    if (bad) return;
    /* an index naming a tensor that is not in its file, then a file that is not there */
    char idx[900], text[1200];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    unsigned char *orig;
    size_t n;
    CHECK(read_bytes(idx, &orig, &n) == 0, "index");
    snprintf(text, sizeof text, "{\"weight_map\": {\"a.weight\": \"model-00002-of-00002.safetensors\", "
                                "\"b.bias\": \"model-00001-of-00002.safetensors\"}}");
    write_bytes(idx, text, strlen(text));
    int rc = safetensors_open(dir, &s, &e);
    CHECK(rc != 0 && strstr(e.msg, "a.weight") && strstr(e.msg, "model.safetensors.index.json"),
          "an index naming the wrong file: %d %s", rc, e.msg);
    snprintf(text, sizeof text, "{\"weight_map\": {\"a.weight\": \"model-00003-of-00002.safetensors\"}}");
    write_bytes(idx, text, strlen(text));
    rc = safetensors_open(dir, &s, &e);
    CHECK(rc != 0 && strstr(e.msg, "model-00003-of-00002.safetensors"), "an index naming a missing file: %s", e.msg);
    snprintf(text, sizeof text, "{\"weight_map\": {\"a.weight\": \"../one.safetensors\"}}");
    write_bytes(idx, text, strlen(text));
    rc = safetensors_open(dir, &s, &e);
    CHECK(rc != 0 && strstr(e.msg, "not a file name in the folder"), "an index leaving the folder: %s", e.msg);
    write_bytes(idx, orig, n);
    free(orig);
    /* the same tensor in two shards */
    char dup[700];
    snprintf(dup, sizeof dup, "%s/dup", g_dir);
    mkdir(dup, 0755);
    char cmd[6000], out[256];
    snprintf(cmd, sizeof cmd, "cp '%s'/*.safetensors '%s'/ && cp '%s/model-00001-of-00002.safetensors' "
             "'%s/model-00003-of-00003.safetensors' && printf '%%s' '{\"weight_map\": {\"a.weight\": "
             "\"model-00001-of-00002.safetensors\", \"c.weight\": \"model-00002-of-00002.safetensors\", \"x\": "
             "\"model-00003-of-00003.safetensors\"}}' > '%s/model.safetensors.index.json'",
             dir, dup, dir, dup, dup);
    CHECK(test_sh(cmd, out, sizeof out) == 0, "copy");
    rc = safetensors_open(dup, &s, &e);
    CHECK(rc != 0 && strstr(e.msg, "given twice"), "a tensor in two shards: %s", e.msg);
    /* a model.safetensors beside the index: read, as transformers reads a folder (the
     * index came first: another model than transformers loads) */
    snprintf(cmd, sizeof cmd, "cp '%s/model-00002-of-00002.safetensors' '%s/model.safetensors'", dir, dir);
    CHECK(test_sh(cmd, out, sizeof out) == 0, "copy");
    rc = safetensors_open(dir, &s, &e);
    CHECK(rc == 0 && !safetensors_find(s, "a.weight") && safetensors_find(s, "c.weight") &&
              strstr(safetensors_source(s), "/model.safetensors"),
          "model.safetensors beside the index: rc %d %s", rc, rc ? e.msg : safetensors_source(s));
    if (!rc) safetensors_close(s);
    snprintf(cmd, sizeof cmd, "rm '%s/model.safetensors'", dir);
    test_sh(cmd, out, sizeof out);
}

static void test_the_reference_reads_ours(void) {
    rng_stream r;
    rng_stream_init(&r, 3, RNG_TEST, 1, 0, 0);
    float a[2 * 3 * 5], b[9];
    for (int i = 0; i < 30; i++) a[i] = (float)(rng_uniform(&r) * 8 - 4);
    for (int i = 0; i < 9; i++) b[i] = (float)(rng_uniform(&r) * 1000 - 500);
    b[0] = 1.00390625f;  /* halfway between two bfloat16: rounds to even (1.0) */
    b[1] = 1.01171875f;  /* halfway, rounds up to even (1.015625) */
    b[2] = -0.0f;
    char inputs[700], path[800], cmd[2400], out[4096];
    snprintf(inputs, sizeof inputs, "%s/ours-in", g_dir);
    mkdir(inputs, 0755);
    snprintf(path, sizeof path, "%s/a\"q.f32", inputs);
    write_bytes(path, a, sizeof a);
    snprintf(path, sizeof path, "%s/layers.1.b.f32", inputs);
    write_bytes(path, b, sizeof b);
    st_out t[] = {{"a\"q", ST_F32, 3, {2, 3, 5}, a}, {"layers.1.b", ST_BF16, 1, {9}, b}};
    const char *meta[] = {"format", "pt", "made by", "tandem \"test\"\n"};
    snprintf(path, sizeof path, "%s/ours.safetensors", g_dir);
    tdm_err e = {0};
    CHECK(safetensors_write(path, t, 2, meta, 2, &e) == 0, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/models/st_ref.py' read '%s' '%s' 2>&1", g_root, path, inputs);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 0 && !strcmp(out, "ok\n"), "st_ref.py read: %s", out);
    CHECK(safetensors_f32_to_bf16(1.00390625f) == 0x3f80 && safetensors_f32_to_bf16(1.01171875f) == 0x3f82,
          "bf16 ties: %04x %04x", safetensors_f32_to_bf16(1.00390625f), safetensors_f32_to_bf16(1.01171875f));
    /* and back through our own reader */
    st_set *s;
    CHECK(safetensors_open(path, &s, &e) == 0, "%s", e.msg);
    float back[30];
    CHECK(safetensors_to_f32(safetensors_find(s, "a\"q"), back, &e) == 0 && !memcmp(back, a, sizeof a), "f32 round trip");
    CHECK(safetensors_to_f32(safetensors_find(s, "layers.1.b"), back, &e) == 0 && back[0] == 1.0f &&
              back[1] == 1.015625f && signbit(back[2]),
          "bf16 read back: %g %g", back[0], back[1]);
    CHECK(safetensors_meta(s, "made by") && !strcmp(safetensors_meta(s, "made by"), "tandem \"test\"\n"), "metadata");
    safetensors_close(s);
    /* refused descriptions */
    st_out twice[] = {{"x", ST_F32, 1, {1}, a}, {"x", ST_F32, 1, {1}, a}};
    CHECK(safetensors_write(path, twice, 2, NULL, 0, &e) != 0 && strstr(e.msg, "twice"), "a name twice: %s", e.msg);
    st_out f16[] = {{"x", ST_F16, 1, {1}, a}};
    CHECK(safetensors_write(path, f16, 1, NULL, 0, &e) != 0, "F16 output");
    /* a weight that is not finite (f32 and bf16): refused on reading, naming the tensor
     * and the element (a model started from it failed its first probe as "diverged") */
    float bad[3] = {1.0f, INFINITY, 2.0f}, nan3[3] = {0.5f, 0.25f, NAN};
    st_out nf[] = {{"h.0.w", ST_F32, 1, {3}, bad}, {"h.1.w", ST_BF16, 1, {3}, nan3}};
    CHECK(safetensors_write(path, nf, 2, NULL, 0, &e) == 0, "%s", e.msg);
    CHECK(safetensors_open(path, &s, &e) == 0, "%s", e.msg);
    e.msg[0] = '\0';
    CHECK(safetensors_to_f32(safetensors_find(s, "h.0.w"), back, &e) == ERR_USAGE && strstr(e.msg, "h.0.w") &&
              strstr(e.msg, "inf") && strstr(e.msg, "element 1"), "an inf weight: %s", e.msg);
    CHECK(safetensors_to_f32(safetensors_find(s, "h.1.w"), back, &e) == ERR_USAGE && strstr(e.msg, "h.1.w") &&
              strstr(e.msg, "NaN") && strstr(e.msg, "element 2"), "a NaN weight: %s", e.msg);
    safetensors_close(s);
}

/* The file with its 8-byte length replaced and the header text replaced. */
static void write_with_header(const char *path, const char *json, const unsigned char *body, size_t nbody) {
    size_t hn = strlen(json);
    unsigned char *f = malloc(8 + hn + nbody);
    for (int i = 0; i < 8; i++) f[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(f + 8, json, hn);
    memcpy(f + 8 + hn, body, nbody);
    write_bytes(path, f, 8 + hn + nbody);
    free(f);
}

static void test_broken_files_are_refused(void) {
    char path[800];
    snprintf(path, sizeof path, "%s/broken.safetensors", g_dir);
    unsigned char body[64] = {0};
    struct {
        const char *json, *want;
        size_t nbody;
    } cases[] = {
        {"[1, 2]", "not an object", 0},
        {"{\"t\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "unknown dtype", 4},
        /* a NUL inside the name: no dtype (it read as F32) */
        {"{\"t\": {\"dtype\": \"F32\\u0000junk\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "unknown dtype", 4},
        /* a name that would write escapes and line ends into the terminal of every message */
        {"{\"evil\\u001b[31m\\nfake\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
         "control character 0x1b", 4},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", "4 bytes for 2", 4},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}", "run past the data", 4},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", "shape[0]", 4},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", "shape[0]", 4},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}", "data_offsets", 4},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", "overlaps", 8},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", "a hole", 8},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "trailing bytes", 8},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", "given twice", 8},
        {"{\"__metadata__\": {\"n\": 1}}", "not a string", 0},
        {"{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]", "not JSON", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_with_header(path, cases[i].json, body, cases[i].nbody);
        st_set *s = NULL;
        tdm_err e = {0};
        int rc = safetensors_open(path, &s, &e);
        CHECK(rc != 0 && !s && strstr(e.msg, cases[i].want) && strstr(e.msg, "broken.safetensors"),
              "case %zu (%s): rc %d, message: %s", i, cases[i].json, rc, e.msg);
    }
    /* empty tensors (a 0 in the shape) start where the next one starts: a valid file, read
     * whatever order the sort leaves equal starts in (ties break on the end) */
    write_with_header(path,
                      "{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}, "
                      "\"z1\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}, "
                      "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                      "\"z2\": {\"dtype\": \"F32\", \"shape\": [2, 0], \"data_offsets\": [4, 4]}, "
                      "\"z3\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 8]}}",
                      body, 8);
    {
        st_set *s = NULL;
        tdm_err e = {0};
        int rc = safetensors_open(path, &s, &e);
        CHECK(rc == 0 && s, "empty tensors beside others: rc %d: %s", rc, e.msg);
        if (s) safetensors_close(s);
    }
    /* a header of 9M numbers in one tensor's entry (18 MB): refused before it is parsed
     * (at 100 MB it took 3.7 GB); its extra key is no business of ours, its size is */
    {
        buf_t j = {0};
        buf_puts(&j, "{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"junk\": [0");
        for (int k = 0; k < 9000000; k++) buf_puts(&j, ",0");
        buf_puts(&j, "]}}");
        CHECK(!j.oom, "memory");
        write_with_header(path, j.p, body, 4);
        buf_free(&j);
        st_set *s = NULL;
        tdm_err e = {0};
        int rc = safetensors_open(path, &s, &e);
        CHECK(rc == ERR_USAGE && !s && strstr(e.msg, "JSON values, more than"), "9M values: rc %d: %s", rc, e.msg);
    }
    /* a header length past the end, and every truncation of a good file */
    char good[800];
    snprintf(good, sizeof good, "%s/one.safetensors", g_dir);
    unsigned char *g;
    size_t n;
    CHECK(read_bytes(good, &g, &n) == 0, "read");
    for (size_t cut = 0; cut < n; cut += (cut < 16 ? 1 : 7)) {
        write_bytes(path, g, cut);
        st_set *s = NULL;
        tdm_err e = {0};
        int rc = safetensors_open(path, &s, &e);
        if (rc == 0) safetensors_close(s);
        CHECK(rc != 0 && strstr(e.msg, "broken.safetensors"), "the file cut at %zu of %zu bytes was accepted", cut, n);
    }
    /* random damage inside the header: refused or read, never a crash */
    rng_stream r;
    rng_stream_init(&r, 11, RNG_TEST, 2, 0, 0);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | g[i];
    int refused = 0;
    for (int k = 0; k < 300; k++) {
        unsigned char *d = malloc(n);
        memcpy(d, g, n);
        int flips = 1 + (int)rng_below(&r, 4);
        for (int f = 0; f < flips; f++) d[8 + rng_below(&r, hlen)] = (unsigned char)rng_below(&r, 256);
        write_bytes(path, d, n);
        free(d);
        st_set *s = NULL;
        tdm_err e = {0};
        if (safetensors_open(path, &s, &e) == 0) {
            for (size_t i = 0; i < safetensors_count(s); i++) {
                const st_tensor *t = safetensors_at(s, i);
                float *v = malloc(t->numel * 4 + 4);
                safetensors_to_f32(t, v, &e);
                free(v);
            }
            safetensors_close(s);
        } else {
            refused++;
        }
    }
    free(g);
    printf("  300 damaged headers: %d refused, the rest read (no crash)\n", refused);
    CHECK(refused > 100, "only %d of 300 damaged headers refused", refused);
    st_set *s;
    tdm_err e = {0};
    CHECK(safetensors_open(g_dir, &s, &e) != 0 && strstr(e.msg, "model.safetensors"), "a folder without a model: %s",
          e.msg);
}

/* A small folder made by st_ref.py hf TYPE TIED: the arch, the parameter count (as the
 * script counts it), and the weights checked. */
static long make_hf(const char *dir, const char *type, int tied) {
    char cmd[1600], out[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/models/st_ref.py' hf '%s' %s %d 2>&1", g_root, dir, type,
             tied);
    return test_sh(cmd, out, sizeof out) == 0 ? atol(out) : -1;
}

static int set_config(const char *dir, const char *edit) {
    char cmd[2400], out[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import json,sys; p=sys.argv[1]+\"/config.json\"; "
             "c=json.load(open(p)); %s; json.dump(c, open(p, \"w\"))' '%s' 2>&1", edit, dir);
    return test_sh(cmd, out, sizeof out);
}

static void test_hf_folders(void) {
    char q[700], l[700];
    snprintf(q, sizeof q, "%s/hf-qwen2", g_dir);
    snprintf(l, sizeof l, "%s/hf-llama", g_dir);
    long nq = make_hf(q, "qwen2", 1), nl = make_hf(l, "llama", 0);
    CHECK(nq > 0 && nl > 0, "st_ref.py hf");
    hf_arch a;
    st_set *s;
    tdm_err e = {0};
    CHECK(hf_arch_read(q, &a, &e) == 0, "%s", e.msg);
    CHECK(a.qkv_bias && a.tied && a.kv_heads == 2 && a.head_dim == 8 && a.rope_theta == 1e6, "qwen2 arch");
    CHECK((long)hf_arch_params(&a) == nq, "qwen2: %llu parameters, the script counts %ld",
          (unsigned long long)hf_arch_params(&a), nq);
    CHECK(safetensors_open(q, &s, &e) == 0 && hf_arch_check_weights(&a, s, &e) == 0, "%s", e.msg);
    safetensors_close(s);
    CHECK(hf_arch_read(l, &a, &e) == 0 && !a.qkv_bias && !a.tied, "llama arch: %s", e.msg);
    CHECK((long)hf_arch_params(&a) == nl, "llama: %llu parameters, the script counts %ld",
          (unsigned long long)hf_arch_params(&a), nl);
    CHECK(safetensors_open(l, &s, &e) == 0 && hf_arch_check_weights(&a, s, &e) == 0, "%s", e.msg);
    safetensors_close(s);
    /* tied, with the head saved as well (an identical copy of the embedding, as some tools
     * save it; transformers ties it and ignores the copy): accepted as the same model, by
     * the check and by tandem inspect (refused as "not part of the architecture") */
    char qh[700];
    snprintf(qh, sizeof qh, "%s/hf-qwen2-head", g_dir);
    long nqh = make_hf(qh, "qwen2", 2);
    CHECK(nqh == nq, "st_ref.py hf qwen2 2: %ld parameters", nqh);
    CHECK(hf_arch_read(qh, &a, &e) == 0 && a.tied, "%s", e.msg);
    CHECK(safetensors_open(qh, &s, &e) == 0 && hf_arch_check_weights(&a, s, &e) == 0, "a tied head's copy: %s", e.msg);
    safetensors_close(s);
    const char *tbin = getenv("TANDEM_BIN");
    if (tbin && *tbin) {
        char cmd[2000], out[4096];
        snprintf(cmd, sizeof cmd, "'%s' inspect '%s' 2>&1", tbin, qh);
        int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 0, "tandem inspect of a tied head's copy: exit %d: %s", rc, out);
        /* the copy changed (its first value's bits): refused, naming both tensors */
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import json,struct,sys; p=sys.argv[1]+\"/model.safetensors\"; "
                 "b=bytearray(open(p,\"rb\").read()); hl=struct.unpack(\"<Q\",b[:8])[0]; "
                 "o=json.loads(b[8:8+hl])[\"lm_head.weight\"][\"data_offsets\"][0]; b[8+hl+o]^=1; "
                 "open(p,\"wb\").write(b)' '%s' && '%s' inspect '%s' 2>&1", qh, tbin, qh);
        rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2 && strstr(out, "lm_head.weight differs from model.embed_tokens.weight"),
              "tandem inspect of a tied head that differs: exit %d: %s", rc, out);
    }
    /* model.safetensors a dangling link or a loop (a broken Hugging Face cache snapshot):
     * said as a broken link, not "holds neither model.safetensors nor ..." */
    {
        char bl[700], lk[800], cmd[2400], out[2048];
        snprintf(bl, sizeof bl, "%s/hf-broken-link", g_dir);
        snprintf(lk, sizeof lk, "%s/model.safetensors", bl);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/config.json' '%s/'", bl, q, bl);
        CHECK(test_sh(cmd, out, sizeof out) == 0, "copy: %s", out);
        static const char *const to[2] = {"../../blobs/0123abcd", "model.safetensors"};
        for (int k = 0; k < 2; k++) {
            unlink(lk);
            CHECK(symlink(to[k], lk) == 0, "symlink");
            CHECK(safetensors_open(bl, &s, &e) == ERR_USAGE && strstr(e.msg, "is a broken symbolic link") &&
                      strstr(e.msg, to[k]) && strstr(e.msg, k ? "Too many levels" : "No such file"),
                  "a %s link: %s", k ? "looping" : "dangling", e.msg);
            const char *tb = getenv("TANDEM_BIN");
            if (!tb || !*tb) continue;
            snprintf(cmd, sizeof cmd, "'%s' inspect '%s' 2>&1", tb, bl);
            int rc = test_sh(cmd, out, sizeof out);
            CHECK(rc == 2 && strstr(out, "is a broken symbolic link"), "tandem inspect, a %s link: exit %d: %s",
                  k ? "looping" : "dangling", rc, out);
        }
    }
    /* tandem inspect's words: one tensor of a dtype is "1 F32 tensor" ("1 F32 tensors"); a
     * config.json past the limit says the limit (it said "File too large") */
    /* absolute: these commands run in the model's folder (tests/run.sh gives a relative path) */
    const char *wbin0 = getenv("TANDEM_BIN");
    char *wbin_abs = wbin0 && *wbin0 ? realpath(wbin0, NULL) : NULL;
    const char *wbin = wbin_abs ? wbin_abs : wbin0;
    if (wbin && *wbin) {
        char mx[700], cmd[4400], out[2048];
        snprintf(mx, sizeof mx, "%s/hf-mixed", g_dir);
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && cd '%s' && /usr/bin/python3 -c 'import json,struct; "
                 "p=\"model.safetensors\"; raw=open(p,\"rb\").read(); n=struct.unpack(\"<Q\",raw[:8])[0]; "
                 "h=json.loads(raw[8:8+n]); body=raw[8+n:]; hh={}; bl=[]; at=0\n"
                 "for k in [k for k in h if k != \"__metadata__\"]:\n"
                 "  b,e=h[k][\"data_offsets\"]; x=body[b:e]; dt=h[k][\"dtype\"]\n"
                 "  if k == \"model.norm.weight\": x=b\"\".join(b\"\\0\\0\"+x[i:i+2] for i in range(0,len(x),2)); dt=\"F32\"\n"
                 "  hh[k]={\"dtype\":dt,\"shape\":h[k][\"shape\"],\"data_offsets\":[at,at+len(x)]}; at+=len(x); bl.append(x)\n"
                 "t=json.dumps(hh).encode(); t+=b\" \"*((8-len(t)%%8)%%8)\n"
                 "open(p,\"wb\").write(struct.pack(\"<Q\",len(t))+t+b\"\".join(bl))' && '%s' inspect . 2>&1",
                 q, mx, mx, wbin);
        int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 0 && strstr(out, " 1 F32 tensor (0.00 GB), 25 BF16 tensors (0.00 GB)"),
              "tandem inspect of one F32 tensor: exit %d: %s", rc, out);
        snprintf(cmd, sizeof cmd, "cd '%s' && head -c 9000000 /dev/zero | tr '\\0' ' ' >> config.json && '%s' inspect . "
                 "2>&1", mx, wbin);
        rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2 && strstr(out, "larger than the 8 MiB a config.json may be"),
              "tandem inspect of a 9 MB config.json: exit %d: %s", rc, out);
        /* a syntax error at a multi-byte character: the quoted text ends at a character's
         * boundary (it ended inside the UTF-8 of the é, a lone 0xc3 on stderr) */
        snprintf(cmd, sizeof cmd, "cd '%s' && printf '{\"model_type\": \"\\\\\303\251\"}' > config.json && "
                 "'%s' inspect . 2>&1", mx, wbin);
        rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2 && strstr(out, "invalid escape near '\"\\'") && !strchr(out, '\xc3'),
              "tandem inspect of an escape cut short: exit %d: %s", rc, out);
    }
    free(wbin_abs);
    /* Qwen2-0.5B as published (config.json of Qwen/Qwen2-0.5B): 494,032,768 parameters */
    char big[700];
    snprintf(big, sizeof big, "%s/qwen2-0.5b", g_dir);
    mkdir(big, 0755);
    char path[800];
    snprintf(path, sizeof path, "%s/config.json", big);
    FILE *f = fopen(path, "w");
    fputs("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 896, "
          "\"intermediate_size\": 4864, \"max_position_embeddings\": 131072, \"model_type\": \"qwen2\", "
          "\"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, "
          "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 131072, "
          "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"use_sliding_window\": false, "
          "\"vocab_size\": 151936}", f);
    fclose(f);
    CHECK(hf_arch_read(big, &a, &e) == 0, "%s", e.msg);
    CHECK(hf_arch_params(&a) == 494032768ull, "Qwen2-0.5B: %llu parameters", (unsigned long long)hf_arch_params(&a));
    /* configs that do not describe the weights, or what is not implemented */
    struct {
        const char *dir, *edit, *want;
    } bad[] = {
        {q, "c[\"tie_word_embeddings\"]=False", "lm_head.weight is missing"},
        {l, "c[\"tie_word_embeddings\"]=True", "lm_head.weight differs from model.embed_tokens.weight"},
        {l, "c[\"intermediate_size\"]=64", "implies [64, 32]"},
        {l, "c[\"model_type\"]=\"gpt2\"", "model_type \"gpt2\""},
        {l, "c[\"rope_scaling\"]={\"rope_type\": \"llama3\"}", "rope_scaling"},
        {l, "c[\"num_key_value_heads\"]=3", "multiple of num_key_value_heads"},
        {l, "del c[\"vocab_size\"]", "\"vocab_size\" is missing"},
        {l, "c[\"hidden_act\"]=\"gelu\"", "silu"},
        {q, "c[\"use_sliding_window\"]=True", "sliding-window"},
        /* yes/no given otherwise (read as false, 1 made an untied model), a rope_theta that
         * only failed later as a "diverged" run */
        {q, "c[\"tie_word_embeddings\"]=1", "\"tie_word_embeddings\" must be true or false"},
        {q, "c[\"use_sliding_window\"]=\"true\"", "\"use_sliding_window\" must be true or false"},
        {l, "c[\"rope_theta\"]=1e-300", "rope_theta 1e-300 is below 1"},
        /* transformers 5's rope_parameters: a scaled RoPE there was not seen (exit 0, the
         * default theta); a Llama with biases (o_proj's was "not part of the architecture") */
        {l, "c[\"rope_parameters\"]={\"rope_type\": \"yarn\", \"rope_theta\": 1e6, \"factor\": 4.0}",
         "rope_parameters.rope_type is \"yarn\""},
        {l, "c[\"rope_parameters\"]={\"rope_type\": \"default\", \"rope_theta\": 5e5}", "disagree"},
        {l, "c[\"rope_parameters\"]=[1]", "must be an object"},
        {l, "c[\"attention_bias\"]=True", "a Llama with biases"},
        {l, "c[\"mlp_bias\"]=True", "a Llama with biases"},
        /* each size in its range, the product past 2^64 parameters (the count wrapped to
         * ~8.6e9, and memory was sized from it before the weights were looked at) */
        {l, "c.update(hidden_size=1<<20, intermediate_size=1<<30, num_hidden_layers=4096, num_attention_heads=4096, "
            "num_key_value_heads=4096, head_dim=65536)", "more than tandem holds"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char keep[900], cmd[2000], out[64];
        snprintf(keep, sizeof keep, "%s/config.json", bad[i].dir);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s.keep'", keep, keep);
        test_sh(cmd, out, sizeof out);
        CHECK(set_config(bad[i].dir, bad[i].edit) == 0, "edit %s", bad[i].edit);
        int rc = hf_arch_read(bad[i].dir, &a, &e);
        if (!rc && safetensors_open(bad[i].dir, &s, &e) == 0) {
            rc = hf_arch_check_weights(&a, s, &e);
            safetensors_close(s);
        }
        CHECK(rc != 0 && strstr(e.msg, bad[i].want), "%s: rc %d, message: %s", bad[i].edit, rc, e.msg);
        snprintf(cmd, sizeof cmd, "mv '%s.keep' '%s'", keep, keep);
        test_sh(cmd, out, sizeof out);
    }
    /* transformers 5 writes the theta only inside rope_parameters: read from there (it was
     * the default 10000, a wrong model with exit 0) */
    {
        char keep[900], cmd[2000], out[64];
        snprintf(keep, sizeof keep, "%s/config.json", l);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s.keep'", keep, keep);
        test_sh(cmd, out, sizeof out);
        CHECK(set_config(l, "c.pop(\"rope_theta\", None); c[\"rope_parameters\"]={\"rope_type\": \"default\", "
                            "\"rope_theta\": 500000.0}") == 0, "edit");
        int rc = hf_arch_read(l, &a, &e);
        CHECK(rc == 0 && a.rope_theta == 500000.0, "rope_parameters.rope_theta: rc %d, theta %g: %s", rc, a.rope_theta,
              rc ? e.msg : "");
        snprintf(cmd, sizeof cmd, "mv '%s.keep' '%s'", keep, keep);
        test_sh(cmd, out, sizeof out);
    }
    /* the command: JSON with the count, and exit 2 naming the problem */
    const char *bin = getenv("TANDEM_BIN");
    if (bin && *bin) {
        char cmd[2000], out[4096];
        snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); "
                 "print(d[\"params\"], d[\"tensors\"], d[\"dtypes\"][\"BF16\"][\"tensors\"], d[\"tied\"])'", bin, q);
        char want[128];
        snprintf(want, sizeof want, "%ld 26 26 True\n", nq);
        CHECK(test_sh(cmd, out, sizeof out) == 0 && !strcmp(out, want), "tandem inspect --json: %s (want %s)", out, want);
        set_config(l, "c[\"intermediate_size\"]=64");
        snprintf(cmd, sizeof cmd, "'%s' inspect '%s' 2>&1", bin, l);
        int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2 && strstr(out, "mlp.gate_proj.weight"), "tandem inspect of a mismatch: exit %d: %s", rc, out);
        /* a NaN among the weights: refused as the load refuses it (inspect passed it) */
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import struct,sys; p=sys.argv[1]+\"/model.safetensors\"; "
                 "b=bytearray(open(p,\"rb\").read()); hl=struct.unpack(\"<Q\",b[:8])[0]; b[-2:]=b\"\\xc0\\x7f\"; "
                 "open(p,\"wb\").write(b)' '%s' && '%s' inspect '%s' 2>&1", q, bin, q);
        rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2 && strstr(out, "non-finite value (NaN)"), "tandem inspect of a NaN weight: exit %d: %s", rc, out);
    }
}

int main(void) {
    const char *root = getenv("TANDEM_ROOT");
    snprintf(g_root, sizeof g_root, "%s", root && *root ? root : ".");
    char *dir = test_tmpdir("safetensors");
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    free(dir);
    char cmd[1600], out[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/models/st_ref.py' write '%s' 2>&1", g_root, g_dir);
    if (test_sh(cmd, out, sizeof out) != 0 || strcmp(out, "ok\n")) {
        printf("FAIL test_safetensors_setup: st_ref.py write: %s\ntest_safetensors: 0 passed, 1 failed\n", out);
        return 1;
    }
    RUN(test_reads_the_reference_writer);
    RUN(test_sharded_folder);
    RUN(test_the_reference_reads_ours);
    RUN(test_broken_files_are_refused);
    RUN(test_hf_folders);
    test_rmtree(g_dir);
    return test_summary("test_safetensors");
}
