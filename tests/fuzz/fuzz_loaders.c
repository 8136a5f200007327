/* fuzz_loaders.c — libFuzzer targets for the readers of files a user hands us, one per
 * build (-DFUZZ_LOAD_tokenizer, _safetensors, _shard, _dataset, _jsonl): the input is the
 * whole file, read from a memory file (a dataset.yaml: from a directory of shards it can
 * name; JSON records: from memory). Every input must give a clean result: 0 (then what was loaded is used:
 * a text encoded and its ids checked against the vocabulary, every tensor converted, every
 * token read) or ERR_USAGE with a message; ASan and UBSan report anything else. Built and
 * run by `make fuzz` (targets "tokenizer", "safetensors", "shard", "dataset", "jsonl"), seeded by
 * tests/fuzz/loader_seeds.py. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_mem.h"
#include "util/err.h"

/* A failure must be ERR_USAGE (the file is wrong) or ERR_INTERNAL (memory), and say why. */
static void check_error(int rc, const tdm_err *e) {
    if (getenv("FUZZ_SAY")) fprintf(stderr, "refused (%d): %s\n", rc, e->msg); /* seed checks */
    if ((rc != ERR_USAGE && rc != ERR_INTERNAL) || !e->msg[0]) abort();
}

#if defined(FUZZ_LOAD_tokenizer)
#include "data/tokenizer.h"

static void load(const char *path, const uint8_t *data, size_t n) {
    tokenizer *t = NULL;
    tdm_err e = {0};
    /* a tokenizer.json as it is, and the same bytes as a tiktoken ranks file */
    for (int ranks = 0; ranks < 2; ranks++) {
        int rc = tokenizer_load(path, ranks ? "cl100k" : NULL, &t, &e);
        if (rc) {
            check_error(rc, &e);
            continue;
        }
        static const char sample[] = "Hello, world! It's 2026 \xc3\xa9t\xc3\xa9 <|endoftext|>\n  x";
        tok_ids ids = {0};
        uint32_t vocab = tokenizer_vocab(t);
        if (tokenizer_encode(t, sample, sizeof sample - 1, &ids, &e) == 0)
            for (size_t i = 0; i < ids.n; i++)
                if (ids.v[i] >= vocab) abort();
        ids.n = 0;
        if (tokenizer_encode(t, (const char *)data, n < 4096 ? n : 4096, &ids, &e) == 0)
            for (size_t i = 0; i < ids.n; i++)
                if (ids.v[i] >= vocab) abort();
        free(ids.v);
        tokenizer_free(t);
    }
}
#elif defined(FUZZ_LOAD_safetensors)
#include "model/safetensors.h"

static void load(const char *path, const uint8_t *data, size_t n) {
    (void)data, (void)n;
    st_set *s = NULL;
    tdm_err e = {0};
    int rc = safetensors_open(path, &s, &e);
    if (rc) {
        check_error(rc, &e);
        return;
    }
    for (size_t i = 0; i < safetensors_count(s); i++) {
        const st_tensor *t = safetensors_at(s, i);
        size_t count = 1;
        for (int d = 0; d < t->ndim; d++) count *= (size_t)t->shape[d];
        if (count > ((size_t)1 << 24)) continue;
        float *out = malloc((count ? count : 1) * sizeof *out);
        if (out && safetensors_to_f32(t, out, &e)) check_error(ERR_USAGE, &e);
        free(out);
    }
    safetensors_close(s);
}
#elif defined(FUZZ_LOAD_shard)
#include "data/shard.h"

static void load(const char *path, const uint8_t *data, size_t n) {
    (void)data, (void)n;
    static const int vocabs[] = {256, 50257, 1 << 24};
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        shard s;
        tdm_err e = {0};
        int rc = shard_open(&s, path, vocabs[v], &e);
        if (rc) {
            check_error(rc, &e);
            continue;
        }
        for (size_t i = 0; i < s.n; i++)
            if (shard_token(&s, i) >= (uint32_t)vocabs[v]) abort();
        shard_close(&s);
    }
}
#elif defined(FUZZ_LOAD_dataset)
#include <sys/stat.h>

#include "data/dataset.h"

/* The input is a dataset.yaml in a directory that holds real shards for it to name
 * (a/train_0.bin, a/train_1.bin, a/val_0.bin, b/train_0.bin, b/val_0.bin: uint16, vocab
 * 256; big/train_0.bin: uint32 with a token of 70000), made once per process. */
static char dir[64];

static void remove_dir(void) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "fuzz_dataset: could not remove %s\n", dir);
}

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/fuzz-dataset-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    static const char *const files[] = {"a/train_0.bin", "a/train_1.bin", "a/val_0.bin", "b/train_0.bin",
                                        "b/val_0.bin"};
    uint32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (uint32_t)(i * 37 % 256);
    tdm_err e;
    char path[160];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%c", dir, files[i][0]);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (shard_write_tokens(path, tok, 64, 256, &e)) abort();
    }
    snprintf(path, sizeof path, "%s/big", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/big/train_0.bin", dir);
    tok[5] = 70000;
    if (shard_write_tokens(path, tok, 64, 100000, &e)) abort();
}

static void load(const char *ignored, const uint8_t *data, size_t n) {
    (void)ignored;
    if (!dir[0]) make_dir();
    char path[160];
    snprintf(path, sizeof path, "%s/dataset.yaml", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) abort();
    dataset ds;
    tdm_err e = {0};
    int rc = dataset_load(&ds, path, &e);
    if (rc) {
        check_error(rc, &e);
        return;
    }
    /* what was loaded holds: every domain has train shards, every token is below vocab */
    for (int d = 0; d < ds.n_domains; d++) {
        if (!ds.domains[d].split[SPLIT_TRAIN].n_shards) abort();
        for (int sp = 0; sp < SPLIT_COUNT; sp++)
            for (size_t k = 0; k < ds.domains[d].split[sp].n_shards; k++) {
                const shard *sh = &ds.domains[d].split[sp].shards[k];
                for (size_t i = 0; i < sh->n; i++)
                    if (shard_token(sh, i) >= (uint32_t)ds.vocab) abort();
            }
    }
    dataset_free(&ds);
}
#elif defined(FUZZ_LOAD_jsonl)
#include "data/jsonl.h"
#include "util/ydoc.h"

/* Strict UTF-8 (noncharacters allowed: JSON text may hold them), by util/ydoc.c's check,
 * which shares nothing with data/utf8.c, the decoder jsonl.c uses. */
static int utf8_ok(const unsigned char *p, size_t n) { return ydoc_utf8_ok((const char *)p, n, 1, NULL); }


static int each_text(void *ctx, const jsonl_result *r, const char *text, size_t len) {
    (void)ctx;
    if (r->status == JSONL_OK && !utf8_ok((const unsigned char *)text, len)) abort();
    if (r->status != JSONL_OK && !r->why) abort();
    return 0;
}

/* The input as one JSONL record and as a .json text: a record's outcome is one of the
 * listed ones with a reason, and a text handed out is valid UTF-8. */
static void load(const char *ignored, const uint8_t *data, size_t n) {
    (void)ignored;
    buf_t out = {0};
    jsonl_result r = {0};
    int st = jsonl_record((const char *)data, n, "text", &out, &r);
    if (st != r.status || st < JSONL_OK || st > JSONL_OOM || r.at > n) abort();
    if (st == JSONL_OK && !utf8_ok((const unsigned char *)out.p, out.n)) abort();
    if (st != JSONL_OK && st != JSONL_OOM && !r.why) abort();
    jsonl_result r2 = {0};
    jsonl_each((const char *)data, n, "text", &out, each_text, NULL, &r2);
    free(out.p);
}
#else
#error "build with -DFUZZ_LOAD_tokenizer, -DFUZZ_LOAD_safetensors, -DFUZZ_LOAD_shard, -DFUZZ_LOAD_dataset or -DFUZZ_LOAD_jsonl"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[64];
    int fd = fuzz_mem_path(data, n, path, sizeof path);
    if (fd < 0) return 0;
    load(path, data, n);
    close(fd);
    return 0;
}
