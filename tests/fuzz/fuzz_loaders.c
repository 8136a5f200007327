/* fuzz_loaders.c — libFuzzer targets for the readers of files a user hands us, one per
 * build (-DFUZZ_LOAD_tokenizer, _safetensors, _shard): the input is the whole file, read
 * from a memory file. Every input must give a clean result: 0 (then what was loaded is used:
 * a text encoded and its ids checked against the vocabulary, every tensor converted, every
 * token read) or ERR_USAGE with a message; ASan and UBSan report anything else. Built and
 * run by `make fuzz` (targets "tokenizer", "safetensors", "shard"), seeded by
 * tests/fuzz/make_seeds.c where a seed is small enough to write there. */
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
#else
#error "build with -DFUZZ_LOAD_tokenizer, -DFUZZ_LOAD_safetensors or -DFUZZ_LOAD_shard"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[64];
    int fd = fuzz_mem_path(data, n, path, sizeof path);
    if (fd < 0) return 0;
    load(path, data, n);
    close(fd);
    return 0;
}
