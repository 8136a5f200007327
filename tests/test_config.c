/* test_config.c — the run configuration: layering, strict parsing, errors, canonical form. */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

#include "config/config.h"
#include "config/config_impl.h"
#include "config/presets.h"
#include "tests/test.h"
#include "util/ydoc.h"

/* One directory for the whole file, removed at the end of main, so a failing CHECK (which
 * returns early) leaves nothing behind. */
static char *tmp;

/* `name` inside the temp dir, in a rotating static buffer (two live at a time). */
static const char *tpath(const char *name) {
    static char buf[2][4096];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* Loads `yaml` (written to cfg.yaml) with the given sets. */
static int load_yaml(config *c, const char *yaml, char *const *sets, int nsets, tdm_err *e) {
    const char *p = tpath("cfg.yaml");
    if (write_file(p, yaml)) return -1;
    return config_load(c, p, sets, nsets, e);
}

static char *ds_set[] = {"data.dataset=d.yaml"};

/* Expects loading `yaml` (with data.dataset set on the command line) to fail with
 * ERR_USAGE, naming "cfg.yaml:LINE" (line > 0) and containing `a` and `b` (NULL: skip). */
static int expect_yaml_error(const char *yaml, int line, const char *a, const char *b) {
    config c;
    tdm_err e = {0};
    int rc = load_yaml(&c, yaml, ds_set, 1, &e);
    CHECK_OR_RET(rc == ERR_USAGE, "rc %d for:\n%s", rc, yaml);
    char where[4200];
    snprintf(where, sizeof where, "%s:%d:", tpath("cfg.yaml"), line);
    CHECK_OR_RET(line <= 0 || strstr(e.msg, where), "no '%s' in: %s", where, e.msg);
    CHECK_OR_RET(!a || strstr(e.msg, a), "no '%s' in: %s", a, e.msg);
    CHECK_OR_RET(!b || strstr(e.msg, b), "no '%s' in: %s", b, e.msg);
    return 0;
}

/* Expects loading with only the given sets to fail with ERR_USAGE naming "--set". */
static int expect_set_error(char *const *sets, int nsets, const char *a, const char *b) {
    config c;
    tdm_err e = {0};
    int rc = config_load(&c, NULL, sets, nsets, &e);
    CHECK_OR_RET(rc == ERR_USAGE, "rc %d for --set %s", rc, sets[nsets - 1]);
    CHECK_OR_RET(strstr(e.msg, "--set"), "no '--set' in: %s", e.msg);
    CHECK_OR_RET(!a || strstr(e.msg, a), "no '%s' in: %s", a, e.msg);
    CHECK_OR_RET(!b || strstr(e.msg, b), "no '%s' in: %s", b, e.msg);
    return 0;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_defaults(void) {
    config c;
    config_defaults(&c);
    CHECK(c.preset == CONFIG_PRESET_NONE && c.store[0] == '\0' && c.data.dataset[0] == '\0',
          "preset/store/dataset");
    CHECK(c.run.episodes == 20 && c.run.seed == 1 && c.run.device == CONFIG_DEVICE_CPU &&
              c.run.threads == 0,
          "run: %d %llu %d %d", c.run.episodes, (unsigned long long)c.run.seed, c.run.device,
          c.run.threads);
    CHECK(c.data.mixing == CONFIG_MIXING_AUTO, "mixing");
    CHECK(c.model.vocab == 0 && c.model.ctx == 64 && c.model.layers == 2 && c.model.heads == 2 &&
              c.model.channels == 64,
          "model");
    CHECK(c.train.batch == 8 && c.train.seq == 64, "train");
    CHECK(c.tandem.K == 5 && c.tandem.E == 5 && c.tandem.gamma == 1.0 &&
              c.tandem.lr_probe == 1e-2 && c.tandem.lr_alpha == 4e-3 && !c.tandem.probe_carry &&
              c.tandem.alpha_floor == 0 && c.data.mixture == CONFIG_MIXTURE_UNIMAX &&
                  c.data.unimax_epochs == 4 && !c.data.max_epochs[0] &&
                  c.data.mixing == CONFIG_MIXING_AUTO && c.run.mode == CONFIG_MODE_TANDEM,
          "tandem");
    CHECK(c.optim.lr == 5e-4 && c.optim.lr_min == 0 && c.optim.warmup == 0 &&
              c.optim.schedule == CONFIG_SCHEDULE_COSINE && c.optim.weight_decay == 1e-2 &&
              c.optim.clip == 1.0 && c.optim.beta1 == 0.9 && c.optim.beta2 == 0.95 &&
              c.optim.eps == 1e-8,
          "optim");
    CHECK(c.checkpoint.every_episodes == 5 && c.checkpoint.every_seconds == 0 &&
              c.checkpoint.chunk_kib == 65536,
          "checkpoint");

    /* No file: defaults plus sets; the only difference is the required key. */
    config l;
    tdm_err e = {0};
    int rc = config_load(&l, NULL, ds_set, 1, &e);
    CHECK(rc == 0, "load: %s", e.msg);
    const char **keys;
    size_t n;
    CHECK(config_diff(&c, &l, &keys, &n, &e) == 0, "diff");
    CHECK(n == 1 && strcmp(keys[0], "data.dataset") == 0, "diff n=%zu", n);
    free(keys);
    CHECK(strcmp(l.data.dataset, "d.yaml") == 0, "dataset %s", l.data.dataset);

    /* Nothing at all: the required key is missing; a NULL error sink is allowed. */
    rc = config_load(&l, NULL, NULL, 0, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "data.dataset") && strstr(e.msg, "required"),
          "rc %d: %s", rc, e.msg);
    CHECK(config_load(&l, NULL, NULL, 0, NULL) == ERR_USAGE, "NULL tdm_err");
}

static void test_file_nested_sections(void) {
    const char *yaml = "# a config\n"
                       "run:\n"
                       "  episodes: 7\n"
                       "  seed: 18446744073709551615\n"
                       "  device: cuda\n"
                       "data:\n"
                       "  dataset: /abs/ds.yaml\n"
                       "  mixing: sample\n"
                       "  mixture: natural\n"
                       "model: {layers: 3, channels: 96, heads: 4, ctx: 128, vocab: 65536}\n"
                       "tandem:\n"
                       "  gamma: 2\n"
                       "  lr_probe: 1e-3\n"
                       "  lr_alpha: .5\n"
                       "  probe_carry: true\n"
                       "optim:\n"
                       "  schedule: constant\n"
                       "  beta2: 0.999\n"
                       "  lr_min: -0.0\n"
                       "checkpoint:\n"
                       "  # every_episodes: 3\n"
                       "store: 'file:///tmp/run'\n"
                       "train:\n";
    config c;
    tdm_err e = {0};
    CHECK(load_yaml(&c, yaml, NULL, 0, &e) == 0, "load: %s", e.msg);
    CHECK(c.run.episodes == 7 && c.run.seed == UINT64_MAX && c.run.device == CONFIG_DEVICE_CUDA,
          "run %d %llu", c.run.episodes, (unsigned long long)c.run.seed);
    CHECK(strcmp(c.data.dataset, "/abs/ds.yaml") == 0, "absolute dataset kept: %s",
          c.data.dataset);
    CHECK(c.data.mixing == CONFIG_MIXING_SAMPLE, "mixing");
    CHECK(c.model.layers == 3 && c.model.channels == 96 && c.model.heads == 4 &&
              c.model.ctx == 128 && c.model.vocab == 65536,
          "model");
    CHECK(c.tandem.gamma == 2.0 && c.tandem.lr_probe == 1e-3 && c.tandem.lr_alpha == 0.5 &&
              c.tandem.probe_carry && c.data.mixture == CONFIG_MIXTURE_NATURAL,
          "tandem");
    CHECK(c.optim.schedule == CONFIG_SCHEDULE_CONSTANT && c.optim.beta2 == 0.999, "optim");
    CHECK(same_bits(c.optim.lr_min, -0.0), "-0.0 kept bit-exact");
    CHECK(c.checkpoint.every_episodes == 5, "empty section keeps defaults");
    CHECK(strcmp(c.store, "file:///tmp/run") == 0, "store %s", c.store);
    CHECK(c.tandem.K == 5 && c.train.batch == 8, "untouched keys keep defaults");
}

static void test_set_overrides_file_in_order(void) {
    const char *yaml = "data:\n  dataset: d.yaml\ntandem:\n  K: 3\noptim:\n  lr: 1e-3\n";
    char *sets[] = {"tandem.K=7", "optim.lr=2e-4", "tandem.K=9", "store=file://x",
                    "data.dataset=rel/ds.yaml"};
    config c;
    tdm_err e = {0};
    CHECK(load_yaml(&c, yaml, sets, 5, &e) == 0, "load: %s", e.msg);
    CHECK(c.tandem.K == 9, "last --set wins: K=%d", c.tandem.K);
    CHECK(c.optim.lr == 2e-4, "--set beats file: lr=%g", c.optim.lr);
    CHECK(strcmp(c.store, "file://x") == 0, "a string key takes the text: %s", c.store);
    CHECK(strcmp(c.data.dataset, "rel/ds.yaml") == 0,
          "a --set path stays relative to the working directory: %s", c.data.dataset);

    /* config_set on its own: validated, and nothing changes on error. */
    config before = c;
    CHECK(config_set(&c, "tandem.E", "11", &e) == 0 && c.tandem.E == 11, "set E: %s", e.msg);
    before.tandem.E = 11;
    CHECK(config_set(&c, "tandem.E", "0", &e) == ERR_USAGE && strstr(e.msg, "tandem.E"),
          "E=0: %s", e.msg);
    CHECK(config_set(&c, "optim.beta1", "1", &e) == ERR_USAGE, "beta1=1 accepted");
    CHECK(config_set(&c, "nope", "1", &e) == ERR_USAGE && strstr(e.msg, "nope"), "%s", e.msg);
    CHECK(memcmp(&c, &before, sizeof c) == 0, "a failed config_set changed the config");
}

static void test_preset_then_file(void) {
    /* The preset applies first wherever `preset:` stands in the file. */
    const char *yaml =
        "data:\n  dataset: d.yaml\nmodel:\n  layers: 3\npreset: data-restricted-160m\n";
    config c;
    tdm_err e = {0};
    CHECK(load_yaml(&c, yaml, NULL, 0, &e) == 0, "load: %s", e.msg);
    CHECK(c.preset == CONFIG_PRESET_DATA_RESTRICTED_160M, "preset %d", c.preset);
    CHECK(c.model.layers == 3, "file beats preset: layers %d", c.model.layers);
    CHECK(c.model.channels == 768 && c.model.heads == 12 && c.model.ctx == 512,
          "preset shape %d %d %d", c.model.channels, c.model.heads, c.model.ctx);
    CHECK(c.train.batch == 128 && c.train.seq == 512 && c.run.episodes == 1000, "preset train");
    CHECK(c.tandem.K == 5 && c.optim.lr == 5e-4 && c.tandem.lr_probe == 1e-2, "paper values");

    /* --set preset replaces the file's preset at the preset layer: the file still wins
     * over it, and a --set before it on the command line still wins too. */
    char *sets[] = {"model.heads=7", "model.channels=896", "preset=sft-qwen2-0.5b"};
    CHECK(load_yaml(&c, yaml, sets, 3, &e) == 0, "load: %s", e.msg);
    CHECK(c.preset == CONFIG_PRESET_SFT_QWEN2_0_5B, "preset %d", c.preset);
    CHECK(c.model.layers == 3 && c.model.heads == 7, "layers %d heads %d", c.model.layers,
          c.model.heads);
    CHECK(c.optim.lr == 4e-6 && c.tandem.lr_probe == 1e-2 && c.model.ctx == 512 &&
              c.tandem.K == 10 && c.tandem.E == 10 && c.train.batch == 32,
          "sft values");

    /* config_set preset: applies over everything present. */
    CHECK(config_set(&c, "preset", "data-restricted-410m", &e) == 0, "set: %s", e.msg);
    CHECK(c.model.layers == 24 && c.model.channels == 1024 && c.model.heads == 16 &&
              c.optim.lr == 5e-4,
          "410m over: %d %d %d", c.model.layers, c.model.channels, c.model.heads);
}

/* Every preset holds the paper's table (tab:hyper_params) exactly: batch, η_E, η_K, η_α,
 * K, E, total u-steps (episodes × E), context; γ, weight decay, clip, cosine for all. */
static void test_every_preset_loads(void) {
    static const struct {
        const char *name;
        int batch, ctx, K, E, u_steps, layers, channels, heads;
        double lr, lr_alpha;
    } want[] = {
        {"none", 8, 64, 5, 5, 100, 2, 64, 2, 5e-4, 4e-3}, /* the built-in defaults */
        {"data-abundant-160m", 8, 2048, 5, 20, 40000, 12, 768, 12, 5e-5, 2e-3},
        {"data-restricted-160m", 128, 512, 5, 5, 5000, 12, 768, 12, 5e-4, 4e-3},
        {"data-restricted-410m", 128, 512, 5, 5, 5000, 24, 1024, 16, 5e-4, 4e-3},
        {"data-restricted-1b", 128, 512, 5, 5, 5000, 16, 2048, 8, 5e-4, 4e-3},
        {"sft-qwen2-0.5b", 32, 512, 10, 10, 5000, 24, 896, 14, 4e-6, 4e-3},
    };
    CHECK(sizeof want / sizeof *want == CONFIG_PRESET_COUNT, "a row per preset");
    for (int i = 0; i < CONFIG_PRESET_COUNT; i++) {
        char set[64];
        snprintf(set, sizeof set, "preset=%s", want[i].name);
        char *sets[] = {set, "data.dataset=d.yaml"};
        config c;
        tdm_err e = {0};
        CHECK(config_load(&c, NULL, sets, 2, &e) == 0, "%s: %s", want[i].name, e.msg);
        CHECK(c.preset == i, "%s: preset %d", want[i].name, c.preset);
        CHECK(c.model.channels % c.model.heads == 0 && c.train.seq <= c.model.ctx, "%s", want[i].name);
        CHECK(c.train.batch == want[i].batch && c.train.seq == want[i].ctx &&
                  c.model.ctx == want[i].ctx && c.tandem.K == want[i].K && c.tandem.E == want[i].E &&
                  (long)c.run.episodes * c.tandem.E == want[i].u_steps &&
                  c.model.layers == want[i].layers && c.model.channels == want[i].channels &&
                  c.model.heads == want[i].heads && c.optim.lr == want[i].lr &&
                  c.tandem.lr_alpha == want[i].lr_alpha,
              "%s: batch %d seq %d ctx %d K %d E %d episodes %d shape %dx%d/%d lr %g lr_alpha %g",
              want[i].name, c.train.batch, c.train.seq, c.model.ctx, c.tandem.K, c.tandem.E,
              c.run.episodes, c.model.layers, c.model.channels, c.model.heads, c.optim.lr,
              c.tandem.lr_alpha);
        if (i != CONFIG_PRESET_NONE)
            CHECK(c.tandem.gamma == 1 && c.tandem.lr_probe == 1e-2 && c.optim.weight_decay == 1e-2 &&
                      c.optim.clip == 1.0 && c.optim.schedule == CONFIG_SCHEDULE_COSINE &&
                      c.model.vocab == 0,
                  "%s: the values common to every column", want[i].name);
    }
}

/* The presets are the YAML files of configs/presets/ as built in: one file per preset
 * but "none", no file that is not a preset, and the bytes built in are the file's. */
static void test_presets_are_the_files(void) {
    const char *root = getenv("TANDEM_ROOT");
    size_t n = 0;
    for (const config_preset_src *s = config_preset_srcs; s->name; s++, n++) {
        char set[96], path[1024];
        snprintf(set, sizeof set, "preset=%s", s->name);
        char *sets[] = {set, "data.dataset=d.yaml"};
        config c;
        tdm_err e = {0};
        CHECK(config_load(&c, NULL, sets, 2, &e) == 0 && c.preset != CONFIG_PRESET_NONE,
              "built-in %s is not a preset name: %s", s->name, e.msg);
        snprintf(path, sizeof path, "%s/configs/presets/%s.yaml", root && *root ? root : ".", s->name);
        FILE *f = fopen(path, "rb");
        CHECK(f, "%s: no such file", path);
        static char buf[1 << 16];
        size_t got = fread(buf, 1, sizeof buf, f);
        fclose(f);
        CHECK(got == s->len && memcmp(buf, s->text, got) == 0,
              "%s differs from what the build holds: rebuild (make)", path);
        CHECK(s->doc && *s->doc, "%s: no documentation line", s->name);
    }
    CHECK(n == CONFIG_PRESET_COUNT - 1, "%zu preset files built in for %d presets besides none", n,
          CONFIG_PRESET_COUNT - 1);
}

static void test_type_errors(void) {
    static const struct {
        const char *yaml;
        int line;
        const char *a, *b;
    } cases[] = {
        {"tandem:\n  K: \"5\"\n", 2, "tandem.K", "quoted"},
        {"tandem:\n  K: 3.0\n", 2, "tandem.K", "plain integer"},
        {"tandem:\n  K: 1e3\n", 2, "tandem.K", "expected an integer"},
        {"tandem:\n  K: 007\n", 2, "tandem.K", "leading zeros"},
        {"\n\ntandem:\n  K: five\n", 4, "tandem.K", "'five'"},
        {"tandem:\n  gamma: inf\n", 2, "tandem.gamma", "inf and nan"},
        {"tandem:\n  gamma: .nan\n", 2, "tandem.gamma", "finite"},
        {"tandem:\n  gamma: \"1.0\"\n", 2, "tandem.gamma", "quoted"},
        {"tandem:\n  gamma: 0x10\n", 2, "tandem.gamma", "a finite number"},
        {"tandem:\n  gamma: 1e999\n", 2, "tandem.gamma", "too large"},
        {"tandem:\n  probe_carry: yes\n", 2, "tandem.probe_carry", "true or false"},
        {"tandem:\n  probe_carry: True\n", 2, "tandem.probe_carry", "true or false"},
        {"tandem:\n  probe_carry: \"true\"\n", 2, "tandem.probe_carry", "quoted"},
        {"run:\n  device: gpu\n", 2, "run.device", "one of: cpu, cuda"},
        {"preset: tiny\n", 1, "preset", "data-restricted-160m"},
        {"data:\n  dataset: [a, b]\n", 2, "data.dataset", "got a sequence"},
        {"store: {a: 1}\n", 1, "store", "got a map"},
        {"run:\n  seed: 1\nmodel: 12\n", 3, "'model' is a section", "got a scalar"},
        {"run:\n  seed: 1\nmodel:\n  - 12\n", 3, "'model' is a section", "got a sequence"},
        {"tandem:\n  K:\n", 2, "tandem.K", "no value"},
        {"tandem:\n  K: ~\n", 2, "tandem.K", "no value"},
        {"- 1\n- 2\n", 1, "map of sections", NULL},
        /* a \0 escape would cut a C string short: "K\0 junk" must not set tandem.K */
        {"tandem:\n  \"K\\0 junk\": 7\n", 2, "NUL character", "key"},
        {"data:\n  mixture_file: \"a\\0b\"\n", 2, "NUL character", "value"},
        /* !!str makes a string, as quotes do; tags the reader cannot honour are refused */
        {"tandem:\n  K: !!str 5\n", 2, "tandem.K", "quoted"},
        {"tandem:\n  K: ! 5\n", 2, "tandem.K", "quoted"},
        {"tandem:\n  K: !!binary 5\n", 2, "tag", "binary"},
        {"tandem:\n  K: !custom 5\n", 2, "tag", "!custom"},
        {"tandem: !!seq\n  K: 5\n", 1, "tag", "seq"},
        /* control characters in a value: a block scalar's kept line end, an escaped CR or
         * tab (a path holding one named another file than it showed) */
        {"data:\n  dataset: |\n    /d/ds.yaml\n", 2, "data.dataset", "0x0a at byte 10"},
        {"store: \"file://./s\\r\"\n", 1, "store", "control character (0x0d"},
        {"log:\n  tensorboard: \"a\\tb\"\n", 2, "log.tensorboard", "control character (0x09"},
        /* and in Unicode's clothes: NEL (a line break to YAML), another C1 control, a line
         * separator, a direction override, a zero-width space, a BOM (hunt: the path
         * "dataset.yaml<NEL>" failed later as "cannot open .../dataset.yaml?") */
        {"data:\n  dataset: \"/d/ds.yaml\\x85\"\n", 2, "data.dataset", "U+0085 at byte 10"},
        {"data:\n  dataset: \"/d/\\x9bds.yaml\"\n", 2, "data.dataset", "U+009B at byte 3"},
        {"log:\n  tensorboard: \"tb\\u2028x\"\n", 2, "log.tensorboard", "U+2028 at byte 2, a line break"},
        {"log:\n  tensorboard: \"tb\\u202Ex\"\n", 2, "log.tensorboard", "U+202E"},
        {"log:\n  tensorboard: \"tb\\u200Bx\"\n", 2, "log.tensorboard", "U+200B"},
        {"log:\n  tensorboard: \"tb\\uFEFFx\"\n", 2, "log.tensorboard", "U+FEFF"},
        /* a byte the reader refuses: named with its line (libyaml's mark said line 1) */
        {"run:\n  seed: 1\ntandem:\n  K: 3 # caf\xe9\n", 4, "YAML syntax error", "byte 0xe9"},
        {"run:\n  seed: 1\x01\n", 2, "control characters", "byte 0x01"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (expect_yaml_error(cases[i].yaml, cases[i].line, cases[i].a, cases[i].b)) {
            fprintf(stderr, "  (case %zu)\n", i);
            return;
        }
    /* characters that show stay welcome: accents, CJK, an emoji, a no-break space */
    {
        config c;
        tdm_err e = {0};
        CHECK(load_yaml(&c, "log:\n  tensorboard: \"tb/caf\u00e9/\u8a13\u7df4/\U0001F600\u00a0x\"\n", ds_set, 1, &e) == 0,
              "a value of visible characters refused: %s", e.msg);
    }
    /* a key past libyaml's 1024 characters, in a block map and in a flow map: said as such
     * (libyaml's words were "mapping values are not allowed in this context" and "did not
     * find expected ',' or '}'") */
    char key[1101], y[1300];
    memset(key, 'k', 1100);
    key[1100] = '\0';
    snprintf(y, sizeof y, "run:\n  seed: 1\nlog:\n  %s: 1\n", key);
    if (expect_yaml_error(y, 4, "a key of 1100 characters", "at most 1024")) return;
    snprintf(y, sizeof y, "run: {seed: 1}\nlog: {%s: 1}\n", key);
    if (expect_yaml_error(y, 2, "a key of 1100 characters", "at most 1024")) return;
}

static void test_range_errors(void) {
    static const struct {
        const char *yaml;
        const char *a, *b;
    } cases[] = {
        {"tandem:\n  K: 0\n", "tandem.K", ">= 1"},
        {"model:\n  vocab: 16777217\n", "model.vocab", "0..16777216"},
        {"tandem:\n  lr_probe: 0\n", "tandem.lr_probe", "> 0"},
        {"optim:\n  beta1: 1\n", "optim.beta1", "[0, 1)"},
        {"tandem:\n  alpha_floor: -0.1\n", "tandem.alpha_floor", "[0, 1)"},
        {"checkpoint:\n  chunk_kib: 65537\n", "checkpoint.chunk_kib", "4..65536"},
        {"run:\n  seed: -1\n", "run.seed", "too small"},
        {"run:\n  seed: 18446744073709551616\n", "run.seed", "too large"},
        {"run:\n  episodes: 99999999999\n", "run.episodes", "too large"},
        {"run:\n  threads: -1\n", "run.threads", ">= 0"},
        {"tandem:\n  K: -0\n", "tandem.K", "too small"},
        /* the model's own limits, named with the file's line (they were found only when
         * the model was built, without it) */
        {"model:\n  layers: 1025\n", "model.layers", "1..1024"},
        {"model:\n  channels: 65537\n", "model.channels", "1..65536"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (expect_yaml_error(cases[i].yaml, 2, cases[i].a, cases[i].b)) {
            fprintf(stderr, "  (case %zu)\n", i);
            return;
        }
}

static void test_set_errors(void) {
    char *bad_int[] = {"data.dataset=d", "tandem.K=abc"};
    if (expect_set_error(bad_int, 2, "tandem.K=abc", "expected an integer >= 1")) return;
    char *no_eq[] = {"tandem.K"};
    if (expect_set_error(no_eq, 1, "tandem.K", "key=value")) return;
    char *no_key[] = {"=5"};
    if (expect_set_error(no_key, 1, "key=value", NULL)) return;
    char *bad_enum[] = {"run.device=CUDA"};
    if (expect_set_error(bad_enum, 1, "run.device", "cpu, cuda")) return;
    char *bad_bool[] = {"tandem.probe_carry=1"};
    if (expect_set_error(bad_bool, 1, "tandem.probe_carry", "true or false")) return;
    char *empty[] = {"tandem.gamma="};
    if (expect_set_error(empty, 1, "tandem.gamma", NULL)) return;
    char *bad_preset[] = {"preset=big"};
    if (expect_set_error(bad_preset, 1, "preset=big", "sft-qwen2-0.5b")) return;
    char *range[] = {"optim.eps=0"};
    if (expect_set_error(range, 1, "optim.eps", "> 0")) return;
    /* a path is any bytes to Linux: a --set path that is not UTF-8 is taken (a run on this
     * machine opens it; the pinned form keeps its bytes); a Kubernetes manifest refuses it
     * (test_manifest) */
    {
        config ok;
        tdm_err oe = {0};
        char *latin1[] = {"data.dataset=d", "data.mixture_file=caf\xe9"};
        CHECK(config_load(&ok, NULL, latin1, 2, &oe) == 0 && strcmp(ok.data.mixture_file, "caf\xe9") == 0,
              "a Latin-1 path: %s", oe.msg);
        config_kv *kv = NULL;
        size_t n = 0;
        config back;
        CHECK(config_canonical(&ok, &kv, &n, &oe) == 0 && config_from_canonical(&back, kv, n, &oe) == 0 &&
                  strcmp(back.data.mixture_file, "caf\xe9") == 0,
              "a Latin-1 path through the pinned form: %s", oe.msg);
        free(kv);
    }
    /* A --set error is reported even when the file is fine. */
    config c;
    tdm_err e = {0};
    char *sets[] = {"tandem.E=-2"};
    CHECK(load_yaml(&c, "data:\n  dataset: d\n", sets, 1, &e) == ERR_USAGE &&
              strstr(e.msg, "--set tandem.E=-2"),
          "%s", e.msg);
}

/* A map of 200k keys (a hostile or generated file) is read in linear time: its duplicate
 * key is found (named with its line) well within a second, where the old pairwise check
 * took minutes. No timing is asserted; the run time of the suite shows a regression. */
static void test_many_keys(void) {
    enum { NKEYS = 200000 };
    size_t cap = (size_t)NKEYS * 24 + 64;
    char *text = malloc(cap);
    CHECK(text, "out of memory");
    size_t len = (size_t)snprintf(text, cap, "x:\n");
    for (int i = 0; i < NKEYS; i++) len += (size_t)snprintf(text + len, cap - len, "  k%d: %d\n", i, i);
    len += (size_t)snprintf(text + len, cap - len, "  k%d: again\n", NKEYS / 2);
    tdm_err e = {0};
    ydoc_node *doc = ydoc_parse(text, len, "many.yaml", &e);
    char want[64];
    snprintf(want, sizeof want, "many.yaml:%d: key 'k%d' appears twice", NKEYS + 2, NKEYS / 2);
    CHECK(!doc && strstr(e.msg, want), "duplicate among many: %s", e.msg);
    /* without the duplicate: every key there, in order, each found */
    len -= strlen("  k100000: again\n");
    text[len] = '\0';
    doc = ydoc_parse(text, len, "many.yaml", &e);
    CHECK(doc, "%s", e.msg);
    const ydoc_node *x = ydoc_get(doc, "x");
    CHECK(x && x->n == NKEYS && strcmp(x->keys[NKEYS - 1], "k199999") == 0 &&
              strcmp(ydoc_get(x, "k12345")->value, "12345") == 0,
          "map of %zu keys", x ? x->n : 0);
    ydoc_free(doc);
    free(text);
}

static void test_unknown_keys_suggest(void) {
    if (expect_yaml_error("tandem:\n  k: 3\n", 2, "unknown key 'tandem.k'",
                          "did you mean 'tandem.K'?"))
        return;
    if (expect_yaml_error("tandem:\n  K: 3\n  lr_porbe: 1\n", 3, "did you mean 'tandem.lr_probe'?",
                          NULL))
        return;
    /* The section's own line, not its first key's. */
    if (expect_yaml_error("run:\n  seed: 2\n\ntrian:\n  # the batch\n  batch: 8\n", 4,
                          "unknown key 'trian'", "did you mean 'train'?"))
        return;
    if (expect_yaml_error("episodes: 5\n", 1, "did you mean 'run.episodes'?", NULL)) return;
    if (expect_yaml_error("model:\n  lr: 1e-3\n", 2, "did you mean 'optim.lr'?",
                          "keys of 'model' are"))
        return;
    if (expect_yaml_error("optimizer:\n  lr: 1\n", 1, "unknown key 'optimizer'",
                          "run, data, model, train, tandem, optim, checkpoint"))
        return;
    if (expect_yaml_error("tandem.K: 5\n", 1, "nested", "K: 5")) return;
    config c;
    tdm_err e = {0};
    CHECK(load_yaml(&c, "zzzz: 1\n", ds_set, 1, &e) == ERR_USAGE && !strstr(e.msg, "did you mean"),
          "nothing is close to zzzz: %s", e.msg);
    char *typo[] = {"trian.batch=4"};
    if (expect_set_error(typo, 1, "unknown key 'trian.batch'", "did you mean 'train.batch'?"))
        return;
    char *caps[] = {"TANDEM.k=4"};
    if (expect_set_error(caps, 1, "did you mean 'tandem.K'?", NULL)) return;
    char *section_only[] = {"tandem=4"};
    if (expect_set_error(section_only, 1, "unknown key 'tandem'", NULL)) return;
    /* a misspelt key is named, its value never repeated (cluster.env's value is never
     * echoed; with a typo in the key it was) */
    char *secret[] = {"cluster.envx=AWS_SECRET_ACCESS_KEY=s3cr3t-pasted"};
    if (expect_set_error(secret, 1, "--set cluster.envx=...: unknown key 'cluster.envx'", "did you mean 'cluster.env'?"))
        return;
    CHECK(config_load(&c, NULL, secret, 1, &e) == ERR_USAGE && !strstr(e.msg, "s3cr3t"), "echoed: %s", e.msg);
    /* a URL with user info in store or data.mixture_file: refused, not repeated */
    char *url[] = {"store=s3://AKIAX:s3cr3t-url@bucket/run"};
    CHECK(config_load(&c, NULL, url, 1, &e) == ERR_USAGE && strstr(e.msg, "user info") &&
              !strstr(e.msg, "s3cr3t"), "store with user info: %s", e.msg);
    /* the same in any spelling of the scheme, or none: the "://" rule alone let these
     * through to store_url_parse, whose errors repeated them ("did you mean
     * s3://AKIA:SECRET@bkt-a/run?"), and "s3//K:S@b" became a local store named after it */
    const char *spelt[] = {"store=s3:/AKIAX:s3cr3t-url@bucket/run", "store=s3:AKIAX:s3cr3t-url@bucket/run",
                           "store=s3//AKIAX:s3cr3t-url@bucket/run", "store=AKIAX:s3cr3t-url@bucket",
                           "data.mixture_file=file:u:s3cr3t-mix@x"};
    for (size_t i = 0; i < sizeof spelt / sizeof *spelt; i++) {
        char *one[] = {(char *)spelt[i]};
        err_clear(&e);
        CHECK(config_load(&c, NULL, one, 1, &e) == ERR_USAGE && strstr(e.msg, "user info") &&
                  !strstr(e.msg, "s3cr3t"), "%.*s... with user info: %s", 9, spelt[i], e.msg);
    }
    /* a ':' and an '@' further on in a path are none ("/scratch/12:00/lr@3e-4") */
    char *path[] = {"store=/scratch/2026-12-06T12:00/lr@3e-4"};
    err_clear(&e);
    CHECK(config_load(&c, NULL, path, 1, &e) != ERR_USAGE || !strstr(e.msg, "user info"),
          "a path with ':' and '@' in later segments: %s", e.msg);
    char *mix[] = {"data.mixture_file=s3://u:s3cr3t-mix@bucket/dmo"};
    CHECK(config_load(&c, NULL, mix, 1, &e) == ERR_USAGE && strstr(e.msg, "user info") &&
              !strstr(e.msg, "s3cr3t"), "mixture_file with user info: %s", e.msg);
    /* a file writing such a key dotted at the top level: the hint to nest it does not
     * repeat its value (it did, before the credential check could run) */
    int rc = load_yaml(&c, "cluster.env: AWS_SECRET_ACCESS_KEY=s3cr3t-top\n", NULL, 0, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "keys are nested") && strstr(e.msg, "env: ...") &&
              !strstr(e.msg, "s3cr3t"), "a dotted cluster.env at the top: %s", e.msg);
    /* nor one holding user info under a key whose values are echoed (cluster.image) */
    rc = load_yaml(&c, "cluster.image: https://u:s3cr3t-img@registry/img:1\n", NULL, 0, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "keys are nested") && !strstr(e.msg, "s3cr3t"),
          "a dotted cluster.image with user info at the top: %s", e.msg);
    rc = load_yaml(&c, "tandem.K: 7\n", NULL, 0, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "K: 7"), "a dotted tandem.K at the top: %s", e.msg);
}

/* Every key holding a path or URL refuses user info (exit 2, ERR_USAGE), in any spelling,
 * from --set and from a file, saying to use the credential chain and never repeating the
 * secret (before: log.tensorboard=s3://KEY:SECRET@b/tb ran, its secret pinned in RUN and
 * a local folder ./s3:/KEY:SECRET@b/tb made; data.dataset's "cannot open" error echoed it). */
static void test_path_keys_refuse_userinfo(void) {
    static const char *const keys[] = {"data.dataset", "log.tensorboard", "model.init", "cluster.workdir",
                                       "cluster.tandem_binary", "cluster.credentials_file",
                                       "data.mixture_file", "store"};
    static const char *const values[] = {"s3://AKIAX:s3cr3t-a@bucket/x", "s3://s3cr3t-user@bucket/x",
                                         "https://u:s3cr3t-b@host/x", "s3:/AKIAX:s3cr3t-c@bucket/x",
                                         "AKIAX:s3cr3t-d@bucket/x"};
    config c;
    tdm_err e = {0};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        for (size_t j = 0; j < sizeof values / sizeof *values; j++) {
            char set[300], yaml[400];
            const char *hf = strcmp(keys[i], "model.init") ? "" : "hf:";
            snprintf(set, sizeof set, "%s=%s%s", keys[i], hf, values[j]);
            char *sets[] = {"data.dataset=d.yaml", set};
            err_clear(&e);
            int rc = config_load(&c, NULL, sets, 2, &e);
            CHECK(rc == ERR_USAGE && strstr(e.msg, "user info") && strstr(e.msg, "credential chain") &&
                      !strstr(e.msg, "s3cr3t"),
                  "--set %s=%s%.12s...: rc %d: %s", keys[i], hf, values[j], rc, e.msg);
            /* shown masked where the key's values are echoed (store and mixture_file: never) */
            CHECK(!strncmp(keys[i], "store", 5) || !strcmp(keys[i], "data.mixture_file") || strstr(e.msg, "***"),
                  "--set %s: not shown masked: %s", keys[i], e.msg);
            /* the same from a file; a relative "K:S@b/x" there is checked as written, before
             * it is joined to the file's folder ("/dir/K:S@b/x" reads as no user info) */
            const char *dot = strchr(keys[i], '.');
            if (dot)
                snprintf(yaml, sizeof yaml, "%.*s:\n  %s: %s%s\n", (int)(dot - keys[i]), keys[i], dot + 1, hf,
                         values[j]);
            else
                snprintf(yaml, sizeof yaml, "%s: %s\n", keys[i], values[j]);
            err_clear(&e);
            rc = load_yaml(&c, yaml, ds_set, 1, &e);
            CHECK(rc == ERR_USAGE && strstr(e.msg, "user info") && strstr(e.msg, keys[i]) && !strstr(e.msg, "s3cr3t"),
                  "file %s: %s%.12s...: rc %d: %s", keys[i], hf, values[j], rc, e.msg);
        }
    /* nor under a key of another type, where it was pasted by mistake: "expected an
     * integer, got '...'" repeated it whole */
    char *wrong[] = {"tandem.K=https://u:s3cr3t-int@host/x", "optim.lr=s3://AKIAX:s3cr3t-flt@b/x",
                     "run.device=s3://AKIAX:s3cr3t-enum@b/x", "tandem.probe_carry=s3://AKIAX:s3cr3t-bool@b"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        char *sets[] = {"data.dataset=d.yaml", wrong[i]};
        err_clear(&e);
        int rc = config_load(&c, NULL, sets, 2, &e);
        CHECK(rc == ERR_USAGE && strstr(e.msg, "***@") && !strstr(e.msg, "s3cr3t"), "--set %.12s...: rc %d: %s",
              wrong[i], rc, e.msg);
    }
    err_clear(&e);
    int frc = load_yaml(&c, "tandem:\n  K: https://u:s3cr3t-yaml@host/x\n", ds_set, 1, &e);
    CHECK(frc == ERR_USAGE && strstr(e.msg, "expected") && !strstr(e.msg, "s3cr3t"), "file tandem.K: rc %d: %s", frc,
          e.msg);
    /* a ':' and an '@' further on in a path are none; a folder really named "s3:" is ./s3: */
    char *fine[] = {"data.dataset=/scratch/2026-12-06T12:00/lr@3/d.yaml", "log.tensorboard=./s3:/b/tb",
                    "model.init=hf:/models/run@3:v2", "cluster.workdir=/scratch/12:00/lr@3"};
    err_clear(&e);
    CHECK(config_load(&c, NULL, fine, 4, &e) == 0, "paths with ':' and '@' past their first segment: %s", e.msg);
    CHECK(!strcmp(c.log.tensorboard, "./s3:/b/tb") && !strcmp(c.model.init, "hf:/models/run@3:v2"),
          "kept as given: %s %s", c.log.tensorboard, c.model.init);
    /* a relative local path whose first segment holds a ':' and a later one an '@' is a
     * name, not user info (the URL rule, whose secret may hold '/', refused it) */
    char *relative[] = {"data.dataset=/scratch/d.yaml", "log.tensorboard=2026-12-06T12:00/tb@v2"};
    err_clear(&e);
    CHECK(config_load(&c, NULL, relative, 2, &e) == 0 && !strcmp(c.log.tensorboard, "2026-12-06T12:00/tb@v2"),
          "a relative path with ':' in its first segment and '@' after: %s", e.msg);
}

/* log.tensorboard is a local folder, data.dataset and model.init's hf:DIR local files: a
 * URL is refused with exit 2 saying what to do (before: log.tensorboard=s3://b/tb wrote
 * the local folder ./s3:/b/tb, exit 0; data.dataset=s3://... said "No such file"). */
static void test_path_keys_refuse_urls(void) {
    static const struct {
        const char *set, *want;
    } cases[] = {
        {"log.tensorboard=s3://bucket/tb", "an output path is local; s3:// is not supported here: write it locally "
                                           "and copy it"},
        {"log.tensorboard=gs://bucket/tb", "gs:// is not supported here"},
        {"log.tensorboard=https://host/tb", "https:// is not supported here"},
        {"log.tensorboard=s3:/bucket/tb", "s3:// is not supported here"},
        {"log.tensorboard=file:///data/tb", "file:// URL is not taken here: name the local path itself"},
        {"data.dataset=s3://bucket/d.yaml", "s3:// is not supported: copy it onto this machine first"},
        {"model.init=hf:s3://bucket/qwen", "hf:DIR: a local path is read here; s3:// is not supported"},
    };
    config c;
    tdm_err e = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *sets[] = {"data.dataset=d.yaml", (char *)cases[i].set};
        err_clear(&e);
        int rc = config_load(&c, NULL, sets, 2, &e);
        CHECK(rc == ERR_USAGE && strstr(e.msg, cases[i].want), "--set %s: rc %d: %s", cases[i].set, rc, e.msg);
    }
    /* from a file: the URL is not joined to the file's folder, and refused the same */
    int rc = load_yaml(&c, "log:\n  tensorboard: s3://bucket/tb\n", ds_set, 1, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, ":2: log.tensorboard") && strstr(e.msg, "an output path is local"),
          "file: rc %d: %s", rc, e.msg);
    /* the store stays a URL, and data.mixture_file may name a run's store */
    char *urls[] = {"data.dataset=d.yaml", "store=s3://bucket/run", "data.mixture_file=s3://bucket/dmo"};
    err_clear(&e);
    CHECK(config_load(&c, NULL, urls, 3, &e) == 0, "store and data.mixture_file URLs: %s", e.msg);
}

static void test_missing_dataset(void) {
    config c;
    tdm_err e = {0};
    int rc = load_yaml(&c, "tandem:\n  K: 2\n", NULL, 0, &e);
    CHECK(rc == ERR_USAGE, "rc %d", rc);
    CHECK(strstr(e.msg, "data.dataset") && strstr(e.msg, tpath("cfg.yaml")), "%s", e.msg);
    rc = load_yaml(&c, "data:\n  dataset: \"\"\n", NULL, 0, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "data.dataset"), "empty dataset: %s", e.msg);
}

static void test_cross_field(void) {
    char where[4200];
    snprintf(where, sizeof where, "%s:3", tpath("cfg.yaml"));
    config c;
    tdm_err e = {0};
    int rc = load_yaml(&c, "model:\n  heads: 3\n  channels: 100\n", ds_set, 1, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "model.channels") && strstr(e.msg, "model.heads") &&
              strstr(e.msg, where),
          "rc %d: %s", rc, e.msg);
    char *sets[] = {"data.dataset=d", "train.seq=128"};
    rc = load_yaml(&c, "model:\n  ctx: 64\n", sets, 2, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "train.seq") && strstr(e.msg, "model.ctx") &&
              strstr(e.msg, "--set"),
          "rc %d: %s", rc, e.msg);
    /* a GPT-2 of the model.* shape takes at most 65536 positions */
    char *seq[] = {"data.dataset=d", "train.seq=64"};
    rc = load_yaml(&c, "model:\n  ctx: 65537\n", seq, 2, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "model.ctx = 65537") && strstr(e.msg, "65536") &&
              strstr(e.msg, "cfg.yaml:2"),
          "rc %d: %s", rc, e.msg);
    rc = load_yaml(&c, "model:\n  ctx: 65536\n", seq, 2, &e);
    CHECK(rc == 0, "ctx 65536: rc %d: %s", rc, e.msg);
    rc = load_yaml(&c, "optim:\n  lr_min: 1e-3\n", ds_set, 1, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "optim.lr_min") && strstr(e.msg, "optim.lr "),
          "rc %d: %s", rc, e.msg);
    /* a validation budget shorter than one window measures nothing (before: accepted, and
     * every episode warned that the data held no window); without log.val_every it is unused */
    char *val[] = {"data.dataset=d", "train.seq=16", "log.val_tokens=15"};
    rc = load_yaml(&c, "log:\n  val_every: 1\n", val, 3, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "log.val_tokens = 15") && strstr(e.msg, "train.seq = 16"),
          "rc %d: %s", rc, e.msg);
    rc = load_yaml(&c, "log:\n  val_every: 0\n", val, 3, &e);
    CHECK(rc == 0, "val_every 0: rc %d: %s", rc, e.msg);
    val[2] = "log.val_tokens=16"; /* one window of 16 targets (17 tokens read) */
    rc = load_yaml(&c, "log:\n  val_every: 1\n", val, 3, &e);
    CHECK(rc == 0, "one window: rc %d: %s", rc, e.msg);
    /* threads: at most 1024, as prep and tokenize take (before: 2 million accepted, and the
     * memory plan grew with them) */
    char *thr[] = {"data.dataset=d", "run.threads=2000000"};
    rc = load_yaml(&c, "", thr, 2, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "run.threads") && strstr(e.msg, "0..1024"), "rc %d: %s", rc, e.msg);
    /* ... from input only: a run stored before the bound (RUN holds every key) still loads */
    config big;
    CHECK(config_load(&big, NULL, (char *[]){"data.dataset=d"}, 1, &e) == 0, "%s", e.msg);
    big.run.threads = 2000000;
    big.checkpoint.grace_s = 1e9;
    big.log.val_every = 1, big.log.val_tokens = 1;
    config_kv *bkv;
    size_t bn;
    CHECK(config_canonical(&big, &bkv, &bn, &e) == 0, "canonical: %s", e.msg);
    config back;
    rc = config_from_canonical(&back, bkv, bn, &e);
    free(bkv);
    CHECK(rc == 0 && back.run.threads == 2000000 && back.checkpoint.grace_s == 1e9,
          "a stored config past the input bounds does not load: rc %d: %s", rc, e.msg);
    /* Transient violations between two sets are fine; the final state is checked. */
    char *fix[] = {"data.dataset=d", "model.heads=3", "model.channels=96"};
    CHECK(config_load(&c, NULL, fix, 3, &e) == 0, "%s", e.msg);

    /* config_check on a struct edited by hand. */
    CHECK(config_check(&c, &e) == 0, "%s", e.msg);
    c.model.heads = 0;
    CHECK(config_check(&c, &e) == ERR_USAGE && strstr(e.msg, "model.heads"), "%s", e.msg);
    c.model.heads = 3;
    c.optim.lr = NAN;
    CHECK(config_check(&c, &e) == ERR_USAGE && strstr(e.msg, "optim.lr"), "%s", e.msg);
    config_kv *kv;
    size_t n;
    CHECK(config_canonical(&c, &kv, &n, &e) == ERR_USAGE && !kv, "canonical of a NaN config");
}

static const char *kv_get(const config_kv *kv, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0) return kv[i].value;
    return NULL;
}

/* A run pinned before tandem.alpha_step, alpha_budget, val_loss, eval_batches, alpha_cut,
 * start_epochs and skip_pinned existed computed with Algorithm 1's step, unheld, the summed
 * L_val, one evaluation batch, its start at data.unimax_epochs (start_epochs 0) and a full
 * probe every episode: its canonical form, without those keys, loads as exactly that (not
 * as today's defaults). */
static void test_canonical_before_alpha_keys(void) {
    char *sets[] = {"data.dataset=d.yaml", "tandem.lr_alpha=0.05"};
    config a, b;
    tdm_err e = {0};
    CHECK(config_load(&a, NULL, sets, 2, &e) == 0, "%s", e.msg);
    CHECK(a.tandem.alpha_step == CONFIG_ALPHA_EG && a.tandem.val_loss == CONFIG_VAL_SUM &&
              a.tandem.alpha_cut == CONFIG_CUT_OVERFIT && a.tandem.start_epochs == 16 && a.tandem.skip_pinned,
          "today's defaults: eg, sum, overfit, start at 16 epochs, pinned episodes skipped");
    config_kv *kv = NULL;
    size_t n = 0, k = 0;
    CHECK(config_canonical(&a, &kv, &n, &e) == 0, "%s", e.msg);
    static const char *const younger[] = {"tandem.alpha_step", "tandem.alpha_budget",
                                          "tandem.val_loss", "tandem.eval_batches",
                                          "tandem.alpha_cut", "tandem.start_epochs",
                                          "tandem.skip_pinned"};
    for (size_t i = 0; i < n; i++) { /* drop the younger keys, keep the order */
        int drop = 0;
        for (size_t j = 0; j < 7; j++) drop |= !strcmp(kv[i].key, younger[j]);
        if (!drop) kv[k++] = kv[i];
    }
    CHECK(k == n - 7, "the seven keys were pinned (%zu of %zu left)", k, n);
    int rc = config_from_canonical(&b, kv, k, &e);
    free(kv);
    CHECK(rc == 0, "an older pin loads: %s", e.msg);
    CHECK(b.tandem.alpha_step == CONFIG_ALPHA_PGD && b.tandem.val_loss == CONFIG_VAL_SUM &&
              b.tandem.eval_batches == 1 && b.tandem.lr_alpha == 0.05 &&
              b.tandem.alpha_cut == CONFIG_CUT_ANY && b.tandem.start_epochs == 0 && !b.tandem.skip_pinned,
          "older pin: step %d val %d eval %d lr %g start %g", b.tandem.alpha_step, b.tandem.val_loss,
          b.tandem.eval_batches, b.tandem.lr_alpha, b.tandem.start_epochs);
}

static void test_canonical_round_trip(void) {
    char *sets[] = {"data.dataset=d.yaml",
                    "tandem.gamma=0.1",
                    "tandem.lr_alpha=1e-300",
                    "checkpoint.every_seconds=5e-324", /* subnormal */
                    "optim.lr=0.30000000000000004",
                    "optim.lr_min=1.5e-7",
                    "run.seed=18446744073709551615",
                    "store=s3://b/p q",
                    "tandem.probe_carry=true",
                    "preset=data-restricted-1b"};
    config a, b;
    tdm_err e = {0};
    CHECK(config_load(&a, NULL, sets, 10, &e) == 0, "%s", e.msg);
    config_kv *kv = NULL, *kv2 = NULL;
    size_t n = 0, n2 = 0;
    CHECK(config_canonical(&a, &kv, &n, &e) == 0, "%s", e.msg);
    CHECK(n >= 35, "all keys: n=%zu", n);
    /* (A failing CHECK below leaks kv; the failure is reported either way.) */
    for (size_t i = 1; i < n; i++)
        CHECK(strcmp(kv[i - 1].key, kv[i].key) < 0, "not sorted at %zu", i);
    const char *g = kv_get(kv, n, "tandem.gamma"), *p = kv_get(kv, n, "preset");
    const char *heads = kv_get(kv, n, "model.heads");
    CHECK(g && strcmp(g, "0.1") == 0, "shortest exact text: gamma %s", g ? g : "-");
    CHECK(p && strcmp(p, "data-restricted-1b") == 0 && heads && strcmp(heads, "8") == 0,
          "preset %s heads %s", p ? p : "-", heads ? heads : "-");
    int rc = config_from_canonical(&b, kv, n, &e);
    if (!rc) rc = config_canonical(&b, &kv2, &n2, &e);
    int same = !rc && n == n2;
    for (size_t i = 0; same && i < n; i++)
        same = !strcmp(kv[i].key, kv2[i].key) && !strcmp(kv[i].value, kv2[i].value);
    free(kv2);

    /* Strictness: a missing, repeated, unknown or bad key is refused. */
    config_kv saved = kv[3];
    config spare = b;
    int missing = config_from_canonical(&spare, kv, n - 1, &e) == ERR_USAGE &&
                  strstr(e.msg, kv[n - 1].key) && strstr(e.msg, "missing");
    kv[3] = kv[2];
    int twice = config_from_canonical(&spare, kv, n, &e) == ERR_USAGE && strstr(e.msg, "twice");
    snprintf(kv[3].key, sizeof kv[3].key, "tandem.Q");
    int unknown =
        config_from_canonical(&spare, kv, n, &e) == ERR_USAGE && strstr(e.msg, "tandem.Q");
    kv[3] = saved;
    char *gv = (char *)kv_get(kv, n, "tandem.gamma");
    snprintf(gv, CONFIG_STR_MAX, "\"0.1\"");
    int bad =
        config_from_canonical(&spare, kv, n, &e) == ERR_USAGE && strstr(e.msg, "tandem.gamma");
    free(kv);
    CHECK(!rc, "round trip: %s", e.msg);
    CHECK(same, "canonical texts differ after the round trip");
    CHECK(missing && twice && unknown && bad, "strictness: %d %d %d %d", missing, twice, unknown,
          bad);
    CHECK(memcmp(&spare, &b, sizeof b) == 0, "a failed from_canonical wrote the config");

    CHECK(same_bits(b.tandem.gamma, 0.1) && same_bits(b.tandem.lr_alpha, 1e-300) &&
              same_bits(b.checkpoint.every_seconds, 5e-324) &&
              same_bits(b.optim.lr, 0.30000000000000004) && same_bits(b.optim.lr_min, 1.5e-7),
          "floats not bit-exact");
    CHECK(b.run.seed == UINT64_MAX && b.tandem.probe_carry && strcmp(b.store, "s3://b/p q") == 0 &&
              b.preset == CONFIG_PRESET_DATA_RESTRICTED_1B && b.model.heads == 8,
          "other values");
    const char **keys;
    size_t nd;
    CHECK(config_diff(&a, &b, &keys, &nd, &e) == 0 && nd == 0 && keys == NULL, "diff n=%zu", nd);
}

/* A RUN pinned by a tandem that took log.tensorboard=s3://... (unpinned: a resume takes its
 * own) still loads, with the default in its place: refused, it made the whole RUN read as
 * damaged (status, eval, resume: exit 3). A pinned key holding what is refused still fails,
 * without repeating a secret. */
static void test_canonical_unpinned_url(void) {
    char *sets[] = {"data.dataset=d.yaml"};
    config a, b;
    tdm_err e = {0};
    CHECK(config_load(&a, NULL, sets, 1, &e) == 0, "%s", e.msg);
    config_kv *kv = NULL;
    size_t n = 0;
    CHECK(config_canonical(&a, &kv, &n, &e) == 0, "%s", e.msg);
    char *tb = (char *)kv_get(kv, n, "log.tensorboard"), *ds = (char *)kv_get(kv, n, "data.dataset");
    if (!tb || !ds) free(kv);
    CHECK(tb && ds, "log.tensorboard and data.dataset are in the canonical form");
    snprintf(tb, CONFIG_STR_MAX, "s3://AKIAX:s3cr3t-old@bucket/tb");
    int rc = config_from_canonical(&b, kv, n, &e);
    int kept_default = !rc && b.log.tensorboard[0] == '\0';
    snprintf(ds, CONFIG_STR_MAX, "s3://AKIAX:s3cr3t-ds@bucket/d.yaml");
    err_clear(&e);
    int pinned_rc = config_from_canonical(&b, kv, n, &e);
    free(kv);
    CHECK(kept_default, "an old unpinned log.tensorboard URL: rc %d (%s), value '%s'", rc, e.msg, b.log.tensorboard);
    CHECK(pinned_rc == ERR_USAGE && strstr(e.msg, "data.dataset") && !strstr(e.msg, "s3cr3t"),
          "a pinned data.dataset with user info: rc %d: %s", pinned_rc, e.msg);
}

static void test_diff_lists_changed_keys(void) {
    config a, b;
    tdm_err e = {0};
    CHECK(config_load(&a, NULL, ds_set, 1, &e) == 0, "%s", e.msg);
    b = a;
    CHECK(config_set(&b, "tandem.K", "7", &e) == 0 &&
              config_set(&b, "store", "file:///r", &e) == 0 &&
              config_set(&b, "optim.lr", "1e-3", &e) == 0 &&
              config_set(&b, "optim.lr_min", "-0", &e) == 0 &&
              config_set(&b, "run.seed", "1", &e) == 0, /* same value: not a difference */
          "%s", e.msg);
    const char **keys;
    size_t n;
    CHECK(config_diff(&a, &b, &keys, &n, &e) == 0, "%s", e.msg);
    const char *want[] = {"optim.lr", "optim.lr_min", "store", "tandem.K"};
    int ok = n == 4;
    for (size_t i = 0; ok && i < n; i++) ok = strcmp(keys[i], want[i]) == 0;
    if (!ok)
        for (size_t i = 0; i < n; i++) fprintf(stderr, "  diff[%zu] = %s\n", i, keys[i]);
    free(keys);
    CHECK(ok, "diff gave %zu keys", n);
}

static void test_relative_dataset_path(void) {
    CHECK(mkdir(tpath("sub"), 0700) == 0 || errno == EEXIST, "mkdir");
    const char *cfg = tpath("sub/run.yaml");
    CHECK(write_file(cfg, "data:\n  dataset: ../corpus/ds.yaml\n") == 0, "write");
    config c;
    tdm_err e = {0};
    CHECK(config_load(&c, cfg, NULL, 0, &e) == 0, "%s", e.msg);
    char want[4200];
    snprintf(want, sizeof want, "%s/sub/../corpus/ds.yaml", tmp);
    CHECK(strcmp(c.data.dataset, want) == 0, "dataset %s, want %s", c.data.dataset, want);
    /* The resolved path is what the canonical form pins. */
    config_kv *kv;
    size_t n;
    CHECK(config_canonical(&c, &kv, &n, &e) == 0, "%s", e.msg);
    int pinned = strcmp(kv_get(kv, n, "data.dataset"), want) == 0;
    free(kv);
    CHECK(pinned, "canonical holds the resolved path");
}

/* The shipped example configs load and say what they should. */
static void test_shipped_configs(void) {
    const char *root = getenv("TANDEM_ROOT");
    char path[4096];
    config c;
    tdm_err e = {0};
    snprintf(path, sizeof path, "%s/configs/demo.yaml", root && *root ? root : ".");
    CHECK(config_load(&c, path, NULL, 0, &e) == 0, "%s", e.msg);
    CHECK(c.model.layers == 2 && c.model.channels == 64 && c.model.heads == 2 &&
              c.model.ctx == 64 && c.train.batch == 8 && c.train.seq == 64 &&
              c.checkpoint.every_episodes == 5 && c.train.batch % 4 == 0,
          "demo values");
    const char *tail = "configs/../runs/demo-corpus/dataset.yaml";
    size_t dl = strlen(c.data.dataset), tl = strlen(tail);
    CHECK(dl >= tl && strcmp(c.data.dataset + dl - tl, tail) == 0, "demo dataset %s",
          c.data.dataset);
    snprintf(path, sizeof path, "%s/configs/data-restricted-160m.yaml", root && *root ? root : ".");
    CHECK(config_load(&c, path, NULL, 0, &e) == 0, "%s", e.msg);
    CHECK(c.preset == CONFIG_PRESET_DATA_RESTRICTED_160M && c.model.channels == 768, "160m");
}

/* Help names every key; docs/config.md holds every line of the current generated tables
 * (regenerate them with config_print_markdown when the schema changes). */
static void test_docs_in_sync(void) {
    char *help = NULL, *md = NULL;
    size_t hl = 0, ml = 0;
    FILE *f = open_memstream(&help, &hl);
    CHECK(f, "memstream");
    config_print_help(f);
    fclose(f);
    f = open_memstream(&md, &ml);
    if (!f) free(help);
    CHECK(f, "memstream");
    config_print_markdown(f);
    fclose(f);
    config c;
    config_defaults(&c);
    snprintf(c.data.dataset, sizeof c.data.dataset, "d");
    config_kv *kv = NULL;
    size_t n = 0;
    tdm_err e = {0};
    int missing = config_canonical(&c, &kv, &n, &e) != 0;
    for (size_t i = 0; !missing && i < n; i++) {
        char tick[80];
        snprintf(tick, sizeof tick, "`%s`", kv[i].key);
        if (!strstr(help, kv[i].key) || !strstr(md, tick)) {
            fprintf(stderr, "  key %s not documented\n", kv[i].key);
            missing = 1;
        }
    }
    free(kv);
    free(help);

    const char *root = getenv("TANDEM_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/config.md", root && *root ? root : ".");
    char *doc = NULL;
    FILE *d = fopen(path, "r");
    if (d) {
        size_t cap = 0;
        ssize_t got = getdelim(&doc, &cap, '\0', d);
        fclose(d);
        if (got < 0) {
            free(doc);
            doc = NULL;
        }
    }
    /* Line by line: the doc may put prose between the key and preset tables. */
    int in_sync = doc != NULL;
    for (char *line = md, *end; in_sync && *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end) break;
        *end = '\0';
        in_sync = strstr(doc, line) != NULL;
        if (!in_sync) fprintf(stderr, "  docs/config.md lacks: %s\n", line);
        *end = '\n';
    }
    if (!in_sync) { /* leave the expected text where the message says */
        FILE *o = fopen(tpath("../config.md.expected"), "w");
        if (o) {
            fputs(md, o);
            fclose(o);
        }
    }
    free(doc);
    free(md);
    CHECK(!missing, "undocumented keys");
    CHECK(in_sync, "%s lacks the current key table: paste %s", path,
          tpath("../config.md.expected"));
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}


/* Which keys a resume may change comes from the schema: the cluster and log sections and
 * the rows flagged F_UNPINNED, each of which says "Not pinned" in its documentation (and
 * no other row does), so the docs cannot promise what run_config.c refuses. */
static void test_pinned_keys_from_the_schema(void) {
    CHECK(config_key_pinned("model.layers") && config_key_pinned("checkpoint.every_episodes") &&
              config_key_pinned("run.seed") && config_key_pinned("no.such.key"),
          "a key that changes what the run computes is unpinned");
    CHECK(!config_key_pinned("checkpoint.keep") && !config_key_pinned("checkpoint.grace_s") &&
              !config_key_pinned("checkpoint.snapshot") && !config_key_pinned("log.tensorboard") &&
              !config_key_pinned("cluster.nodes") && !config_key_pinned("cluster.image"),
          "a key of where/how the run executes is pinned");
    int unpinned = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        const key_def *k = &config_schema[i];
        if (!strncmp(k->key, "cluster.", 8)) {
            CHECK(!config_key_pinned(k->key), "%s is pinned", k->key);
            continue;
        }
        int says = strstr(k->doc, "Not pinned") != NULL;
        CHECK(says == !config_key_pinned(k->key), "%s: pinned %d but its doc %s \"Not pinned\"", k->key,
              config_key_pinned(k->key), says ? "says" : "does not say");
        unpinned += says;
    }
    CHECK(unpinned == 6, "%d keys outside cluster.* are unpinned, expected 6", unpinned);
}

/* The keys a fixed run may resume with changed are exactly the α step's own (F_DMO_ONLY),
 * and each is still pinned: a DMO refuses a change of any of them (cli_caps runs both). */
static void test_dmo_only_keys_from_the_schema(void) {
    const char *want[] = {"tandem.alpha_cut", "tandem.overfit_cap", "tandem.start_epochs",
                          "tandem.skip_pinned"};
    size_t found = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        const char *k = config_schema[i].key;
        if (!config_key_dmo_only(k)) continue;
        int listed = 0;
        for (size_t j = 0; j < sizeof want / sizeof *want; j++) listed |= !strcmp(want[j], k);
        CHECK(listed, "%s is flagged F_DMO_ONLY: a fixed run would resume with it changed", k);
        CHECK(config_key_pinned(k), "%s is DMO-only but unpinned: a DMO would take it changed", k);
        found++;
    }
    CHECK(found == sizeof want / sizeof *want, "%zu keys are DMO-only, expected %zu", found,
          sizeof want / sizeof *want);
    CHECK(!config_key_dmo_only("tandem.K") && !config_key_dmo_only("data.unimax_epochs") &&
              !config_key_dmo_only("no.such.key"),
          "a key every run reads is DMO-only");
}

int main(void) {
    tmp = test_tmpdir("config");
    RUN(test_defaults);
    RUN(test_file_nested_sections);
    RUN(test_set_overrides_file_in_order);
    RUN(test_preset_then_file);
    RUN(test_every_preset_loads);
    RUN(test_presets_are_the_files);
    RUN(test_type_errors);
    RUN(test_range_errors);
    RUN(test_set_errors);
    RUN(test_many_keys);
    RUN(test_unknown_keys_suggest);
    RUN(test_missing_dataset);
    RUN(test_path_keys_refuse_userinfo);
    RUN(test_path_keys_refuse_urls);
    RUN(test_canonical_unpinned_url);
    RUN(test_cross_field);
    RUN(test_canonical_round_trip);
    RUN(test_canonical_before_alpha_keys);
    RUN(test_diff_lists_changed_keys);
    RUN(test_pinned_keys_from_the_schema);
    RUN(test_dmo_only_keys_from_the_schema);
    RUN(test_relative_dataset_path);
    RUN(test_shipped_configs);
    RUN(test_docs_in_sync);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(tmp);
    return test_summary("test_config");
}
