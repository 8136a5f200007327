/* test_records.c — the store's msgpack records: round trips, strict rejection of
 * malformed records, and thousands of truncated and mutated inputs that must each give
 * a clean error or a valid record (run under ASan+UBSan by `make test`). */
#include <math.h>

#include "ledger/codec.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "tests/record_samples.h"
#include "tests/test.h"
#include "util/rng.h"

static void test_head_round_trip(void) {
    rec_head h = {.seq = 42, .epoch = 3, .time = 1.5e9, .commits = 9}, back;
    snprintf(h.state, sizeof h.state, "states/42.mp");
    sha256("m", 1, &h.state_sha);
    size_t n;
    void *buf = rec_head_encode(&h, &n);
    tdm_err e = {0};
    CHECK(rec_head_decode(buf, n, "HEAD", &back, &e) == 0, "%s", e.msg);
    CHECK(back.seq == 42 && back.epoch == 3 && back.commits == 9 && back.time == 1.5e9 &&
              strcmp(back.state, "states/42.mp") == 0 &&
              sha256_equal(&back.state_sha, &h.state_sha),
          "fields");
    size_t n2;
    void *buf2 = rec_head_encode(&back, &n2);
    CHECK(n == n2 && memcmp(buf, buf2, n) == 0, "re-encoding must give the same bytes");
    free(buf);
    free(buf2);
    /* a HEAD naming anything but states/<its seq>.mp is damage (before: "/etc/passwd" and
     * "states/../RUN" reached the readers as keys, an internal error, exit 1) */
    const char *bad[] = {"/etc/passwd", "states/../RUN", "states/41.mp", "states/42.mpx", "RUN", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(h.state, sizeof h.state, "%s", bad[i]);
        buf = rec_head_encode(&h, &n);
        CHECK(rec_head_decode(buf, n, "HEAD", &back, &e) == ERR_STORE && strstr(e.msg, "state"),
              "HEAD naming '%s': %s", bad[i], e.msg);
        free(buf);
    }
}

static void test_state_round_trip(void) {
    rec_state s, back;
    sample_state(&s, 0, 1);
    size_t n;
    void *buf = rec_state_encode(&s, &n);
    tdm_err e = {0};
    CHECK(rec_state_decode(buf, n, "states/17.mp", &back, &e) == 0, "%s", e.msg);
    CHECK(back.seq == 17 && back.M == 3 && back.have_losses && strcmp(back.step, "free") == 0,
          "scalars");
    CHECK(memcmp(back.alpha, s.alpha, 3 * sizeof(double)) == 0, "alpha");
    CHECK(back.cursors[2][3] == 23, "cursors");
    CHECK(back.ntensors == 1 && back.tensors[0].nchunks == 4 &&
              sha256_equal(&back.tensors[0].chunks[3], &s.tensors[0].chunks[3]),
          "tensors");
    CHECK(back.nviews == 2 && back.views[1].offset == 16384, "views");
    size_t n2;
    void *buf2 = rec_state_encode(&back, &n2);
    CHECK(n == n2 && memcmp(buf, buf2, n) == 0, "deterministic encoding");
    free(buf2);
    rec_state_free(&back);
    /* chunks of a size that is no whole number of floats (6 bytes: the writer never makes
     * one, and the device load copies whole floats): refused naming the field */
    s.tensors[0].chunk_bytes = 1026;
    free(buf);
    buf = rec_state_encode(&s, &n);
    CHECK(rec_state_decode(buf, n, "states/17.mp", &back, &e) == ERR_STORE && strstr(e.msg, "states/17.mp") &&
              strstr(e.msg, "chunk_bytes") && strstr(e.msg, "multiple of 4"),
          "chunk_bytes 1026: %s", e.msg);
    s.tensors[0].chunk_bytes = 1024;
    /* the run's identity: kept, and the record written in REC_FORMAT_RUN (a tandem from
     * before it refuses that as a newer tandem's, rec_format_newer, not as damage); without
     * it, in REC_FORMAT as before */
    s.has_run = 1;
    memset(s.run.b, 0xab, sizeof s.run.b);
    free(buf);
    buf = rec_state_encode(&s, &n);
    CHECK(rec_state_decode(buf, n, "s", &back, &e) == 0 && back.has_run && sha256_equal(&back.run, &s.run), "run: %s",
          e.msg);
    rec_state_free(&back);
    static const unsigned char f2[] = {0xa6, 'f', 'o', 'r', 'm', 'a', 't', REC_FORMAT_RUN};
    /* "format" is the map's first key, after its header (map16: 3 bytes) */
    CHECK(n > 11 && memcmp((const unsigned char *)buf + 3, f2, sizeof f2) == 0 && REC_FORMAT_RUN > REC_FORMAT &&
              REC_FORMAT_RUN <= REC_FORMAT_MAX, "a state with its run's identity is not written in format %d",
          REC_FORMAT_RUN);
    s.has_run = 0;
    free(buf);
    buf = rec_state_encode(&s, &n);
    static const unsigned char f1[] = {0xa6, 'f', 'o', 'r', 'm', 'a', 't', REC_FORMAT};
    CHECK(memcmp((const unsigned char *)buf + 3, f1, sizeof f1) == 0 && rec_state_decode(buf, n, "s", &back, &e) == 0 &&
              !back.has_run, "a state without an identity: %s", e.msg);
    rec_state_free(&back);
    /* without pending losses */
    s.have_losses = 0;
    free(buf);
    buf = rec_state_encode(&s, &n);
    CHECK(rec_state_decode(buf, n, "s", &back, &e) == 0 && !back.have_losses, "%s", e.msg);
    rec_state_free(&back);
    free(buf);
    rec_state_free(&s);
}

/* The overfitting record (tandem.overfit_cap): round trip of every field; a manifest
 * holding an overfit flag other than 0 or 1 is refused naming the field; a manifest
 * without it decodes with has_val 0. */
static void test_state_overfit_record(void) {
    rec_state s, back;
    sample_state(&s, 0, 1);
    s.has_val = 1;
    s.val_n = 12;
    for (int m = 0; m < 3; m++) {
        s.val_now[m] = 2.5 + m;
        s.val_ema[m] = 2.4 + m;
        s.val_var[m] = 0.01 * (m + 1);
        s.val_best[m] = 2.3 + m;
        s.val_best_seen[m] = 1e5 * (m + 1);
        s.overfit[m] = m == 1;
    }
    size_t n;
    void *buf = rec_state_encode(&s, &n);
    tdm_err e = {0};
    CHECK(rec_state_decode(buf, n, "states/17.mp", &back, &e) == 0, "%s", e.msg);
    CHECK(back.has_val && back.val_n == 12 && back.val_now[2] == 4.5 && back.val_ema[1] == 3.4 && back.val_var[2] == 0.03 &&
              back.val_best[0] == 2.3 && back.val_best_seen[2] == 3e5 && back.overfit[1] == 1 && back.overfit[0] == 0,
          "fields");
    rec_state_free(&back);
    free(buf);
    s.overfit[2] = 0.5;
    buf = rec_state_encode(&s, &n);
    CHECK(rec_state_decode(buf, n, "states/17.mp", &back, &e) == ERR_STORE && strstr(e.msg, "overfit"),
          "a flag of 0.5: %s", e.msg);
    free(buf);
    s.overfit[2] = 0;
    /* without the record (a run without the cap, or one pinned before it) */
    s.has_val = 0;
    buf = rec_state_encode(&s, &n);
    CHECK(rec_state_decode(buf, n, "states/17.mp", &back, &e) == 0 && !back.has_val, "%s", e.msg);
    rec_state_free(&back);
    free(buf);
    rec_state_free(&s);
}

static void test_alpha_hash_excludes_meta(void) {
    rec_alpha a, back;
    sample_alpha(&a, 0);
    size_t n;
    void *buf = rec_alpha_encode(&a, &n);
    tdm_err e = {0};
    CHECK(rec_alpha_decode(buf, n, "alpha/4.mp", &back, &e) == 0, "%s", e.msg);
    CHECK(back.M == 2 && back.alpha_next[1] == 0.4 && strcmp(back.host, "node-7") == 0 &&
              back.attempt == 2,
          "fields");
    sha256_digest h1, h2;
    rec_alpha_hash(&a, &h1);
    back.time += 100;
    back.attempt = 9;
    snprintf(back.host, sizeof back.host, "other");
    rec_alpha_hash(&back, &h2);
    CHECK(sha256_equal(&h1, &h2), "meta must not change the hash");
    back.alpha_next[0] = nextafter(back.alpha_next[0], 1.0);
    rec_alpha_hash(&back, &h2);
    CHECK(!sha256_equal(&h1, &h2), "one ulp of alpha must change the hash");
    free(buf);
}

static void test_run_and_change_round_trip(void) {
    rec_kv kv[2] = {{"a.x", "1"}, {"b.y", "file:///tmp/x"}};
    rec_run r = {.created = 5, .nconfig = 2, .config = kv, .M = 2}, back;
    snprintf(r.domains[0], REC_NAME_MAX, "web");
    snprintf(r.domains[1], REC_NAME_MAX, "code");
    snprintf(r.run_id, sizeof r.run_id, "run-abc");
    rec_config_hash(kv, 2, &r.config_sha);
    size_t n;
    void *buf = rec_run_encode(&r, &n);
    tdm_err e = {0};
    CHECK(rec_run_decode(buf, n, "RUN", &back, &e) == 0, "%s", e.msg);
    CHECK(back.nconfig == 2 && strcmp(back.config[1].value, "file:///tmp/x") == 0, "config");
    CHECK(back.M == 2 && !strcmp(back.domains[1], "code"), "domains");
    rec_run_free(&back);
    free(buf);
    /* a config that does not match its hash is refused */
    kv[0].value = "2";
    buf = rec_run_encode(&r, &n);
    CHECK(rec_run_decode(buf, n, "RUN", &back, &e) == ERR_STORE && strstr(e.msg, "RUN"),
          "altered config: %s", e.msg);
    free(buf);
    rec_kv o[1] = {{"tandem.K", "5"}}, nw[1] = {{"tandem.K", "3"}};
    rec_change c = {.seq = 8, .created = 9, .n = 1, .old_values = o, .new_values = nw}, cb;
    buf = rec_change_encode(&c, &n);
    CHECK(rec_change_decode(buf, n, "configs/1.mp", &cb, &e) == 0, "%s", e.msg);
    CHECK(cb.n == 1 && strcmp(cb.new_values[0].value, "3") == 0, "change");
    rec_change_free(&cb);
    free(buf);
}

/* Hand-built records that are well-formed msgpack but wrong as records. */
/* The lease's PID namespace and boot id are optional: written, read back; absent (an
 * older writer's lease), read as absent; and an older lease's bytes (no such fields) are
 * what a lease without them encodes to (tests/records/golden/lease.mp pins them). */
static void test_lease_namespace_round_trip(void) {
    rec_lease l = {.epoch = 3, .pid = 10, .attempt = 1, .time = 5, .has_pid_ns = 1, .pid_ns = 4026531836ULL,
                   .has_boot_id = 1};
    snprintf(l.host, sizeof l.host, "h");
    snprintf(l.boot_id, sizeof l.boot_id, "0f7d1f0e-3a5c-4b8e-9d1a-2c3b4d5e6f70");
    size_t n;
    void *buf = rec_lease_encode(&l, &n);
    rec_lease back;
    tdm_err e;
    CHECK(rec_lease_decode(buf, n, "lease", &back, &e) == 0 && back.has_pid_ns && back.pid_ns == l.pid_ns &&
              back.has_boot_id && !strcmp(back.boot_id, l.boot_id) && back.pid == 10,
          "lease with namespace: %s", e.msg);
    free(buf);
    l.has_pid_ns = l.has_boot_id = 0;
    buf = rec_lease_encode(&l, &n);
    CHECK(rec_lease_decode(buf, n, "lease", &back, &e) == 0 && !back.has_pid_ns && !back.has_boot_id &&
              !back.boot_id[0], "lease without namespace: %s", e.msg);
    /* a field of a newer tandem's lease is skipped, the rest read (an older tandem that
     * refused pid_ns took a live writer's lease for damage and replaced it); a known field
     * twice is still refused */
    uint8_t more[512];
    CHECK(n + 16 < sizeof more && (((uint8_t *)buf)[0] & 0xf0) == 0x80 && (((uint8_t *)buf)[0] & 0x0f) < 14,
          "the lease encodes as a small map");
    memcpy(more, buf, n);
    more[0]++;
    memcpy(more + n, "\xa6" "quorum" "\x07", 8);
    CHECK(rec_lease_decode(more, n + 8, "lease", &back, &e) == 0 && back.epoch == 3 && back.pid == 10 &&
              !strcmp(back.host, "h"), "a lease with a newer field: %s", e.msg);
    more[0]++;
    memcpy(more + n + 8, "\xa3" "pid" "\x0b", 5);
    CHECK(rec_lease_decode(more, n + 13, "lease", &back, &e) != 0 && strstr(e.msg, "twice"),
          "a lease with pid twice was read: %s", e.msg);
    free(buf);
    /* the DELETEs a stopped writer gave up on (late_deletes): read back as written, absent
     * when none (a lease without them encodes as before) */
    l.has_settle = 1, l.settle_until = 100;
    l.has_late_deletes = 1;
    snprintf(l.late_deletes, sizeof l.late_deletes, "states/60.mp\nalpha/12.mp\n");
    buf = rec_lease_encode(&l, &n);
    CHECK(rec_lease_decode(buf, n, "lease", &back, &e) == 0 && back.has_late_deletes &&
              !strcmp(back.late_deletes, "states/60.mp\nalpha/12.mp\n") && back.settle_until == 100,
          "lease with late DELETEs: %s", e.msg);
    free(buf);
    l.has_late_deletes = 0;
    buf = rec_lease_encode(&l, &n);
    CHECK(rec_lease_decode(buf, n, "lease", &back, &e) == 0 && !back.has_late_deletes && !back.late_deletes[0],
          "lease without late DELETEs: %s", e.msg);
    free(buf);
}

static void test_strict_rejections(void) {
    tdm_err e = {0};
    rec_head h;
    codec_writer w;
    const char *cases[] = {"version", "unknown", "type", "missing", "trailing"};
    for (int c = 0; c < 5; c++) {
        codec_writer_init(&w);
        codec_map(&w, c == 1 ? 8 : (c == 3 ? 6 : 7));
        codec_key(&w, "format");
        codec_u64(&w, c == 0 ? 2 : 1);
        codec_key(&w, "seq");
        if (c == 2) codec_str(&w, "42");
        else codec_u64(&w, 42);
        codec_key(&w, "state");
        codec_str(&w, "states/42.mp");
        codec_key(&w, "sha256");
        codec_bin(&w, "0123456789abcdef0123456789abcdef", 32);
        if (c != 3) {
            codec_key(&w, "epoch");
            codec_u64(&w, 1);
        }
        codec_key(&w, "time");
        codec_f64(&w, 1.0);
        codec_key(&w, "commits");
        codec_u64(&w, 1);
        if (c == 1) {
            codec_key(&w, "extra");
            codec_u64(&w, 1);
        }
        if (c == 4) codec_u64(&w, 7); /* a second object after the map */
        size_t n;
        void *buf = codec_writer_take(&w, &n);
        codec_writer_free(&w);
        int rc = rec_head_decode(buf, n, "HEAD", &h, &e);
        free(buf);
        CHECK(rc == ERR_STORE, "case %s accepted", cases[c]);
        CHECK(strncmp(e.msg, "HEAD", 4) == 0, "case %s: message names the object: %s", cases[c],
              e.msg);
        if (c == 0) CHECK(strstr(e.msg, "version 2"), "names the version: %s", e.msg);
        if (c == 1) CHECK(strstr(e.msg, "extra"), "names the field: %s", e.msg);
        if (c == 2 || c == 3) CHECK(strstr(e.msg, c == 2 ? "seq" : "epoch"), "%s", e.msg);
    }
    /* an array header claiming 2^32-1 elements in a few bytes must not allocate */
    const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x00};
    CHECK(rec_head_decode(huge, sizeof huge, "HEAD", &h, &e) == ERR_STORE, "huge array");
    /* NaN in alpha is rejected */
    rec_alpha a, back;
    sample_alpha(&a, 0);
    a.alpha_next[1] = NAN;
    size_t n;
    void *buf = rec_alpha_encode(&a, &n);
    CHECK(rec_alpha_decode(buf, n, "alpha/4.mp", &back, &e) == ERR_STORE &&
              strstr(e.msg, "alpha_next"),
          "NaN alpha: %s", e.msg);
    free(buf);
    /* a domain named twice (sealed and well formed otherwise): read by name into another
     * run's dataset it gave one domain two weights and the other none */
    rec_mixture x = {.M = 3, .alpha = {0.25, 0.5, 0.25}, .first = 1, .last = 2}, y;
    snprintf(x.names[0], REC_NAME_MAX, "web");
    snprintf(x.names[1], REC_NAME_MAX, "code");
    snprintf(x.names[2], REC_NAME_MAX, "web");
    buf = rec_mixture_encode(&x, &n);
    CHECK(rec_mixture_decode(buf, n, "mixture.mp", &y, &e) == ERR_STORE && strstr(e.msg, "names") &&
              strstr(e.msg, "twice"),
          "a mixture naming a domain twice: %s", e.msg);
    free(buf);
    snprintf(x.names[2], REC_NAME_MAX, "webs");
    buf = rec_mixture_encode(&x, &n);
    CHECK(rec_mixture_decode(buf, n, "mixture.mp", &y, &e) == 0, "three names: %s", e.msg);
    free(buf);
}

typedef int (*decode_fn)(const void *, size_t, tdm_err *);
static int dec_head(const void *d, size_t n, tdm_err *e) {
    rec_head h;
    return rec_head_decode(d, n, "HEAD", &h, e);
}
static int dec_state(const void *d, size_t n, tdm_err *e) {
    rec_state s;
    int rc = rec_state_decode(d, n, "states/1.mp", &s, e);
    if (!rc) rec_state_free(&s);
    return rc;
}
static int dec_alpha(const void *d, size_t n, tdm_err *e) {
    rec_alpha a;
    return rec_alpha_decode(d, n, "alpha/1.mp", &a, e);
}
static int dec_run(const void *d, size_t n, tdm_err *e) {
    rec_run r;
    int rc = rec_run_decode(d, n, "RUN", &r, e);
    if (!rc) rec_run_free(&r);
    return rc;
}
static int dec_lease(const void *d, size_t n, tdm_err *e) {
    rec_lease l;
    return rec_lease_decode(d, n, "lease", &l, e);
}

/* Every truncation, and 3000 random mutations (byte flips, insertions, deletions), of a
 * valid record: each decode must return 0 or ERR_STORE with a message, never crash (ASan
 * and UBSan watch). Counts how many were rejected: most mutations must be. */
static int mutate_all_sealed(const uint8_t *valid, size_t n, decode_fn dec, const char *name,
                             int sealed) {
    tdm_err e;
    uint8_t *buf = malloc(n + 16);
    int rejected = 0, total = 0;
    for (size_t cut = 0; cut < n; cut++) {
        memcpy(buf, valid, cut);
        int rc = dec(buf, cut, &e);
        CHECK_OR_RET(rc == ERR_STORE && e.msg[0], "%s: truncation at %zu accepted (rc %d)", name,
                     cut, rc);
    }
    rng_stream s;
    rng_stream_init(&s, 7, RNG_TEST, 8, (uint32_t)n, 0);
    for (int i = 0; i < 3000; i++) {
        size_t len = n;
        memcpy(buf, valid, n);
        int edits = 1 + (int)rng_below(&s, 4);
        for (int k = 0; k < edits; k++) {
            int kind = (int)rng_below(&s, 3);
            size_t at = (size_t)rng_below(&s, len);
            if (kind == 0) buf[at] ^= (uint8_t)(1 + rng_below(&s, 255));
            else if (kind == 1 && len < n + 16) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (uint8_t)rng_below(&s, 256);
                len++;
            } else if (len > 1) {
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
            }
        }
        e.msg[0] = 0;
        int rc = dec(buf, len, &e);
        CHECK_OR_RET(rc == 0 || (rc == ERR_STORE && e.msg[0]), "%s: mutation %d gave rc %d", name,
                     i, rc);
        /* a sealed record (self-digest) accepts no change at all */
        CHECK_OR_RET(!sealed || rc != 0 || (len == n && !memcmp(buf, valid, n)),
                     "%s: mutation %d was read as a record (it carries a self-digest)", name, i);
        rejected += rc != 0;
        total++;
    }
    free(buf);
    printf("  %s: %zu truncations rejected, %d of %d mutations rejected\n", name, n, rejected,
           total);
    return rejected;
}

static int mutate_all(const uint8_t *valid, size_t n, decode_fn dec, const char *name) {
    return mutate_all_sealed(valid, n, dec, name, 0);
}
static int dec_mixture(const void *d, size_t n, tdm_err *e) {
    rec_mixture x;
    return rec_mixture_decode(d, n, "mixture.mp", &x, e);
}
static int dec_model(const void *d, size_t n, tdm_err *e) {
    rec_model m;
    return rec_model_decode(d, n, "model.mp", &m, e);
}
static int dec_data(const void *d, size_t n, tdm_err *e) {
    static rec_data x;
    return rec_data_decode(d, n, "data.mp", &x, e);
}
static int dec_sweep(const void *d, size_t n, tdm_err *e) {
    static rec_sweep w; /* 32 KiB: not on the stack of every mutation */
    return rec_sweep_decode(d, n, "SWEEP", &w, e);
}
static int dec_diverged(const void *d, size_t n, tdm_err *e) {
    static rec_diverged x;
    return rec_diverged_decode(d, n, "diverged.mp", &x, e);
}
static int dec_metrics(const void *d, size_t n, tdm_err *e) {
    rec_metrics m;
    return rec_metrics_decode(d, n, "metrics/3.mp", &m, e);
}

static void test_truncated_and_mutated_inputs(void) {
    size_t n;
    void *buf;
    {
        /* an array declaring 9M elements, each a zero byte (a sparse file reads so): every
         * byte is one, but the unpacker took 24 bytes each (250M: 6 GB in every command) —
         * refused before unpacking */
        size_t big = 9u << 20;
        unsigned char *p = calloc(big + 5, 1);
        CHECK(p, "memory");
        p[0] = 0xdd, p[1] = (unsigned char)(big >> 24), p[2] = (unsigned char)(big >> 16), p[3] = (unsigned char)(big >> 8),
        p[4] = (unsigned char)big;
        rec_alpha a;
        tdm_err e = {0};
        CHECK(p && rec_alpha_decode(p, big + 5, "alpha/3.mp", &a, &e) != 0 && strstr(e.msg, "more than"),
              "9M elements: %s", e.msg);
        free(p);
    }
    rec_head h = {.seq = 1, .epoch = 1};
    snprintf(h.state, sizeof h.state, "states/1.mp");
    buf = rec_head_encode(&h, &n);
    int r = mutate_all(buf, n, dec_head, "HEAD");
    free(buf);
    CHECK(r > 2000, "HEAD: only %d mutations rejected", r);
    rec_state s;
    sample_state(&s, 0, 1);
    buf = rec_state_encode(&s, &n);
    r = mutate_all(buf, n, dec_state, "state");
    free(buf);
    rec_state_free(&s);
    CHECK(r > 2000, "state: only %d mutations rejected", r);
    rec_alpha a;
    sample_alpha(&a, 0);
    buf = rec_alpha_encode(&a, &n);
    r = mutate_all(buf, n, dec_alpha, "alpha");
    free(buf);
    CHECK(r > 1500, "alpha: only %d mutations rejected", r);
    rec_kv kv[2] = {{"a.x", "1"}, {"b.y", "2"}};
    rec_run run = {.created = 5, .nconfig = 2, .config = kv, .M = 1};
    snprintf(run.domains[0], REC_NAME_MAX, "d0");
    snprintf(run.run_id, sizeof run.run_id, "r");
    rec_config_hash(kv, 2, &run.config_sha);
    buf = rec_run_encode(&run, &n);
    r = mutate_all(buf, n, dec_run, "RUN");
    free(buf);
    CHECK(r > 2500, "RUN: only %d mutations rejected", r);
    rec_lease l = {.epoch = 3, .pid = 10, .attempt = 1, .time = 5};
    snprintf(l.host, sizeof l.host, "h");
    buf = rec_lease_encode(&l, &n);
    r = mutate_all(buf, n, dec_lease, "lease");
    free(buf);
    CHECK(r > 1500, "lease: only %d mutations rejected", r);
    /* sealed: the chaos pass read a metrics row with one flipped byte inside α as a row
     * with another α; now no mutation of these reads as a record */
    rec_mixture x = {.M = 2, .alpha = {0.25, 0.75}, .first = 9, .last = 10};
    snprintf(x.names[0], REC_NAME_MAX, "web");
    snprintf(x.names[1], REC_NAME_MAX, "code");
    buf = rec_mixture_encode(&x, &n);
    r = mutate_all_sealed(buf, n, dec_mixture, "mixture.mp", 1);
    free(buf);
    rec_metrics m = {.t = 3, .seq = 40, .gen = 1, .M = 2, .has_probe = 1, .loss = {2.5, 3.5},
                     .loss_u = {2.4, 3.4}, .loss_w = {2.6, 3.6}, .alpha = {0.3, 0.7}, .lr = 1e-3,
                     .free_steps = 5, .time = 1.8e9, .attempt = 2};
    snprintf(m.host, sizeof m.host, "node7");
    buf = rec_metrics_encode(&m, &n);
    r = mutate_all_sealed(buf, n, dec_metrics, "metrics row", 1);
    free(buf);
    rec_model md = {.init = "hf:/models/qwen2-0.5b"};
    sha256("config", 6, &md.config_sha);
    sha256("weights", 7, &md.weights_sha);
    buf = rec_model_encode(&md, &n);
    rec_model back;
    tdm_err e;
    CHECK(rec_model_decode(buf, n, "model.mp", &back, &e) == 0 && !strcmp(back.init, md.init) &&
              sha256_equal(&back.config_sha, &md.config_sha) && sha256_equal(&back.weights_sha, &md.weights_sha),
          "model.mp round trip: %s", e.msg);
    r = mutate_all_sealed(buf, n, dec_model, "model.mp", 1);
    free(buf);
    /* data.mp: names and per-split digests back as written, sealed against every mutation */
    static rec_data dd = {.M = 2, .domains = {"web", "code"}}, db;
    for (int m = 0; m < 2; m++)
        for (int sp = 0; sp < REC_DATA_SPLITS; sp++) dd.sha[m][sp].b[0] = (uint8_t)(16 * m + sp + 1);
    buf = rec_data_encode(&dd, &n);
    CHECK(rec_data_decode(buf, n, "data.mp", &db, &e) == 0 && db.M == 2 && !strcmp(db.domains[1], "code") &&
              db.sha[1][2].b[0] == 19 && db.sha[0][0].b[0] == 1,
          "data.mp round trip: %s", e.msg);
    r = mutate_all_sealed(buf, n, dec_data, "data.mp", 1);
    free(buf);
    /* SWEEP: a study's texts and points, round trip and sealed against every mutation */
    static rec_sweep sw, swb;
    sw.n = 2, sw.points = 6;
    snprintf(sw.text[0], REC_SWEEP_TEXT_MAX, "run.seed=1,2,3");
    snprintf(sw.text[1], REC_SWEEP_TEXT_MAX, "tandem.lr_alpha=2e-3,4e-3");
    buf = rec_sweep_encode(&sw, &n);
    CHECK(rec_sweep_decode(buf, n, "SWEEP", &swb, &e) == 0 && swb.n == 2 && swb.points == 6 &&
              !strcmp(swb.text[1], sw.text[1]),
          "SWEEP round trip: %s", e.msg);
    r = mutate_all_sealed(buf, n, dec_sweep, "SWEEP", 1);
    free(buf);
    /* diverged.mp: where and why a run diverged, round trip, sealed against every
     * mutation; a step that is not the loop's, or a state past the divergence, refused */
    static rec_diverged dv = {.epoch = 4, .seq = 13, .episode = 3, .step = "free", .index = 1, .state_seq = 12,
                              .time = 1.8e9, .host = "node-3", .attempt = 1},
                        dvb;
    snprintf(dv.message, sizeof dv.message, "free step 9: the gradient norm is not finite: lower optim.lr");
    buf = rec_diverged_encode(&dv, &n);
    CHECK(rec_diverged_decode(buf, n, "diverged.mp", &dvb, &e) == 0 && dvb.seq == 13 && dvb.index == 1 &&
              dvb.state_seq == 12 && !strcmp(dvb.message, dv.message) && !strcmp(dvb.step, "free"),
          "diverged.mp round trip: %s", e.msg);
    r = mutate_all_sealed(buf, n, dec_diverged, "diverged.mp", 1);
    free(buf);
    static const struct { const char *step; uint64_t index, state_seq; const char *msg, *why; } bad_dv[] = {
        {"done", 0, 12, "m", "step"}, {"probe", 1, 12, "m", "index"}, {"free", 1, 14, "m", "state_seq"},
        {"free", 1, 12, "", "message"}, {"free", 1, 12, "a\x1b[2Jb", "control character"}};
    for (size_t i = 0; i < sizeof bad_dv / sizeof *bad_dv; i++) {
        rec_diverged x = dv;
        snprintf(x.step, sizeof x.step, "%s", bad_dv[i].step);
        x.index = bad_dv[i].index, x.state_seq = bad_dv[i].state_seq;
        snprintf(x.message, sizeof x.message, "%s", bad_dv[i].msg);
        buf = rec_diverged_encode(&x, &n);
        memset(&e, 0, sizeof e);
        CHECK(rec_diverged_decode(buf, n, "diverged.mp", &dvb, &e) == ERR_STORE && strstr(e.msg, bad_dv[i].why),
              "diverged.mp with a bad %s: '%s'", bad_dv[i].why, e.msg);
        free(buf);
    }
}

/* ledger_read: the one call that reads a record — each kind through its own decoder,
 * a missing object, a damaged one (named, with the decoder's reason) and a record of
 * another kind told apart. */
static void test_ledger_read(void) {
    char *dir = test_tmpdir("ledger-read");
    tdm_err e = {0};
    store *st = store_open(dir, &e);
    CHECK(st, "%s", e.msg);
    if (!st) return;
    rec_head h = {.seq = 7, .epoch = 2, .time = 1.6e9, .commits = 3}, hb;
    snprintf(h.state, sizeof h.state, "states/7.mp");
    rec_alpha a, ab;
    sample_alpha(&a, 0);
    rec_state s, sb;
    sample_state(&s, 0, 1);
    size_t n;
    void *buf = rec_head_encode(&h, &n);
    CHECK(store_put(st, "HEAD", buf, n, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    free(buf);
    buf = rec_alpha_encode(&a, &n);
    CHECK(store_put(st, "alpha/0.mp", buf, n, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    free(buf);
    buf = rec_state_encode(&s, &n);
    CHECK(store_put(st, "states/17.mp", buf, n, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    /* the same manifest under another position's name: damaged (a copy over another) */
    CHECK(store_put(st, "states/7.mp", buf, n, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    ((unsigned char *)buf)[n / 2] ^= 0x5a;
    CHECK(store_put(st, "states/8.mp", buf, n, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    free(buf);

    CHECK(ledger_read(st, REC_KIND_HEAD, "HEAD", NULL, &hb, &e) == 0 && hb.seq == 7 && hb.commits == 3 &&
              !strcmp(hb.state, "states/7.mp"), "HEAD: %s", e.msg);
    CHECK(ledger_read(st, REC_KIND_ALPHA, "alpha/0.mp", NULL, &ab, &e) == 0 && ab.t == a.t && ab.M == a.M,
          "alpha: %s", e.msg);
    CHECK(ledger_read(st, REC_KIND_STATE, "states/17.mp", NULL, &sb, &e) == 0 && sb.seq == 17 && sb.ntensors == 1,
          "state: %s", e.msg);
    if (sb.ntensors) rec_state_free(&sb);
    memset(&e, 0, sizeof e);
    CHECK(ledger_read(st, REC_KIND_STATE, "states/7.mp", NULL, &sb, &e) == STORE_CORRUPT &&
              strstr(e.msg, "states/7.mp holds run position 17"), "a manifest under another name: '%s'", e.msg);
    CHECK(ledger_read(st, REC_KIND_HEAD, "states/9.mp", NULL, &hb, &e) == STORE_NOT_FOUND, "missing: %d", e.code);
    memset(&e, 0, sizeof e);
    CHECK(ledger_read(st, REC_KIND_STATE, "states/8.mp", "the damaged one", &sb, &e) == STORE_CORRUPT &&
              strstr(e.msg, "the damaged one"), "damaged: '%s'", e.msg);
    memset(&e, 0, sizeof e);
    CHECK(ledger_read(st, REC_KIND_HEAD, "alpha/0.mp", NULL, &hb, &e) == STORE_CORRUPT && strstr(e.msg, "alpha/0.mp"),
          "an alpha record read as HEAD: '%s'", e.msg);
    /* every kind in the table has a decoder: a HEAD read as each other kind is damaged */
    void *hbytes = NULL;
    size_t hn = 0;
    CHECK(store_get(st, "HEAD", &hbytes, &hn, NULL, &e) == 0, "HEAD bytes: %s", e.msg);
    static union {
        rec_head h; rec_run r; rec_change c; rec_state s; rec_alpha a; rec_lease l; rec_mixture x;
        rec_model m; rec_metrics t; rec_sweep w; rec_data d; rec_diverged v;
    } any;
    for (int k = 0; hbytes && k < REC_KIND_COUNT; k++) {
        memset(&e, 0, sizeof e);
        int rc = ledger_decode((rec_kind)k, hbytes, hn, "HEAD", &any, &e);
        if (k == REC_KIND_HEAD) CHECK(rc == 0, "HEAD as HEAD: %s", e.msg);
        else CHECK(rc == STORE_CORRUPT && e.msg[0], "HEAD read as kind %d: %d '%s'", k, rc, e.msg);
    }
    free(hbytes);
    rec_state_free(&s);
    store_close(st);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_head_round_trip);
    RUN(test_state_round_trip);
    RUN(test_state_overfit_record);
    RUN(test_alpha_hash_excludes_meta);
    RUN(test_run_and_change_round_trip);
    RUN(test_lease_namespace_round_trip);
    RUN(test_strict_rejections);
    RUN(test_truncated_and_mutated_inputs);
    RUN(test_ledger_read);
    return test_summary("test_records");
}
