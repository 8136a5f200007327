/* dataset.c — dataset YAML → validated, opened shard lists. */
#include "data/dataset.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard.h"
#include "util/ydoc.h"

static const char *const split_names[SPLIT_COUNT] = {"train", "val", "test"};

const char *dataset_split_name(int split) {
    return split >= 0 && split < SPLIT_COUNT ? split_names[split] : "?";
}

int dataset_name_ok(const char *name) {
    size_t len = strlen(name);
    if (len == 0 || len > DATASET_NAME_MAX) return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

int dataset_name_reserved(const char *name) { return strcasecmp(name, "Average") == 0; }

const char *dataset_folder_name_bad(const char *name) {
    if (!strcmp(name, ".") || !strcmp(name, "..")) return "is a directory's own name (. or ..)";
    if (!strcasecmp(name, "dataset.yaml"))
        return "would be a folder in the place of the corpus's dataset.yaml: choose another name";
    return NULL;
}

/* The YAML file's directory, with glob metacharacters escaped so that a directory called
 * "runs[1]" is taken literally while the patterns below it still glob. "" for the cwd. */
static char *glob_base_dir(const char *yaml_path) {
    const char *slash = strrchr(yaml_path, '/');
    size_t len = slash ? (size_t)(slash - yaml_path) + 1 : 0; /* keep the slash */
    char *out = malloc(2 * len + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        if (strchr("*?[]\\", yaml_path[i])) *o++ = '\\';
        *o++ = yaml_path[i];
    }
    *o = '\0';
    return out;
}

/* The files opened so far, by identity (device, inode): open addressing, grown at half
 * full. A file listed twice is refused at its second mention, before it is mapped again:
 * a list repeating one shard 60,000 times used to map every copy (and meet
 * vm.max_map_count) before the check after the load said so. */
typedef struct {
    dev_t dev;
    ino_t ino;
    int domain, split, used;
    size_t index; /* into the split's shards */
} seen_file;

typedef struct {
    seen_file *slot;
    size_t cap, n; /* cap a power of two, or 0 */
} seen_set;

static size_t seen_hash(dev_t dev, ino_t ino, size_t cap) {
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static const seen_file *seen_find(const seen_set *s, dev_t dev, ino_t ino) {
    if (!s->cap) return NULL;
    for (size_t i = seen_hash(dev, ino, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slot[i].used) return NULL;
        if (s->slot[i].dev == dev && s->slot[i].ino == ino) return &s->slot[i];
    }
}

static int seen_add(seen_set *s, seen_file f) {
    if (2 * (s->n + 1) > s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        seen_file *ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slot[i].used) {
                size_t j = seen_hash(s->slot[i].dev, s->slot[i].ino, nc);
                while (ns[j].used) j = (j + 1) & (nc - 1);
                ns[j] = s->slot[i];
            }
        free(s->slot);
        s->slot = ns, s->cap = nc;
    }
    size_t j = seen_hash(f.dev, f.ino, s->cap);
    while (s->slot[j].used) j = (j + 1) & (s->cap - 1);
    f.used = 1;
    s->slot[j] = f;
    s->n++;
    return 0;
}

typedef struct {
    const char *path; /* YAML file, for messages */
    const char *base; /* escaped directory prefix for relative patterns */
    int vocab;
    const char *domain;
    int domain_index;
    const dataset *ds; /* the shards opened so far, for the message naming a repeat */
    seen_set *seen;
} load_ctx;

static int repeat_refused(const load_ctx *c, int split, int line, const char *path,
                          const seen_file *was, tdm_err *e) {
    const dataset_split *wsp = &c->ds->domains[was->domain].split[was->split];
    return err_set(e, ERR_USAGE,
                   "%s:%d: shard %s (domain '%s' %s) is also %s (domain '%s' %s); each file may "
                   "appear once in a dataset",
                   c->path, line, path, c->domain, split_names[split], wsp->shards[was->index].path,
                   c->ds->domains[was->domain].name, split_names[was->split]);
}

/* Opens `path` into `sp` unless the dataset holds its file already (by identity, so that
 * "web/a.bin" and "./web/a.bin" are one file): each file may appear once. Judged by stat
 * before the mapping, and again by the opened file's own identity (a file replaced in
 * between). */
static int add_shard(const load_ctx *c, int split, int line, dataset_split *sp, size_t *cap,
                     const char *path, tdm_err *e) {
    struct stat st;
    const seen_file *was = stat(path, &st) == 0 ? seen_find(c->seen, st.st_dev, st.st_ino) : NULL;
    if (was) return repeat_refused(c, split, line, path, was, e);
    if (sp->n_shards == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        shard *ns = realloc(sp->shards, nc * sizeof *ns);
        if (!ns) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
        sp->shards = ns;
        *cap = nc;
    }
    shard *sh = &sp->shards[sp->n_shards];
    int rc = shard_open(sh, path, c->vocab, e);
    if (rc) {
        err_prefix(e, "%s: domain '%s' %s: ", c->path, c->domain, split_names[split]);
        return rc;
    }
    if ((was = seen_find(c->seen, sh->dev, sh->ino))) {
        shard_close(sh);
        return repeat_refused(c, split, line, path, was, e);
    }
    sp->tokens += sh->n;
    sp->n_shards++;
    seen_file f = {.dev = sh->dev, .ino = sh->ino, .domain = c->domain_index, .split = split,
                   .index = sp->n_shards - 1};
    if (seen_add(c->seen, f)) return err_set(e, ERR_INTERNAL, "%s: out of memory", c->path);
    return 0;
}

/* glob's first error: which directory, and why (a pattern into a missing directory is
 * GLOB_ABORTED under GLOB_ERR, as an unreadable one is) */
static _Thread_local char glob_err_dir[512];
static _Thread_local int glob_err_no;
static int glob_error(const char *path, int err) {
    if (!glob_err_dir[0]) snprintf(glob_err_dir, sizeof glob_err_dir, "%s", path), glob_err_no = err;
    return 1; /* stop: GLOB_ERR */
}

/* Expands one pattern into `sp`, opening each match. */
static int load_pattern(const load_ctx *c, int split, const ydoc_node *pat, dataset_split *sp,
                        size_t *cap, tdm_err *e) {
    const char *sn = split_names[split];
    if (pat->kind != YDOC_SCALAR || !pat->value[0])
        return err_set(e, ERR_USAGE,
                       "%s:%d: domain '%s' %s: each entry must be a non-empty glob pattern "
                       "string",
                       c->path, pat->line, c->domain, sn);
    const char *p = pat->value;
    size_t len = strlen(c->base) + strlen(p) + 1;
    char *full = malloc(len);
    if (!full) return err_set(e, ERR_INTERNAL, "%s: out of memory", c->path);
    snprintf(full, len, "%s%s", p[0] == '/' ? "" : c->base, p);
    glob_t g;
    glob_err_dir[0] = '\0';
    int gr = glob(full, GLOB_ERR, glob_error, &g);
    int rc = 0;
    if (gr == GLOB_NOMATCH)
        rc = err_set(e, ERR_USAGE,
                     "%s:%d: domain '%s' %s: pattern '%s' matched no file (searched '%s'); "
                     "fix the pattern or create the shards",
                     c->path, pat->line, c->domain, sn, p, full);
    else if (gr == GLOB_ABORTED)
        rc = err_set(e, ERR_USAGE,
                     "%s:%d: domain '%s' %s: pattern '%s': directory '%s' could not be read: %s",
                     c->path, pat->line, c->domain, sn, p, glob_err_dir[0] ? glob_err_dir : "?",
                     glob_err_dir[0] ? strerror(glob_err_no) : "unknown error");
    else if (gr != 0)
        rc = err_set(e, ERR_INTERNAL, "%s:%d: glob '%s' failed (out of memory)", c->path, pat->line,
                     full);
    for (size_t i = 0; !rc && i < g.gl_pathc; i++)
        rc = add_shard(c, split, pat->line, sp, cap, g.gl_pathv[i], e);
    if (gr == 0 || gr == GLOB_NOMATCH) globfree(&g);
    free(full);
    return rc;
}

static int load_split(const load_ctx *c, int split, const ydoc_node *v, dataset_split *sp,
                      tdm_err *e) {
    size_t cap = 0;
    if (v->kind == YDOC_SCALAR) return load_pattern(c, split, v, sp, &cap, e);
    if (v->kind != YDOC_SEQ || v->n == 0)
        return err_set(e, ERR_USAGE,
                       "%s:%d: domain '%s' %s: expected a non-empty list of glob patterns", c->path,
                       v->line, c->domain, split_names[split]);
    for (size_t i = 0; i < v->n; i++) {
        int rc = load_pattern(c, split, v->items[i], sp, &cap, e);
        if (rc) return rc;
    }
    return 0;
}

static int load_domain(dataset *ds, const char *base, seen_set *seen, const ydoc_node *m, int idx,
                       tdm_err *e) {
    const char *path = ds->path;
    if (m->kind != YDOC_MAP)
        return err_set(e, ERR_USAGE,
                       "%s:%d: domain #%d must be a map with name, train, val (and test)", path,
                       m->line, idx + 1);
    const ydoc_node *name = ydoc_get(m, "name");
    if (!name)
        return err_set(e, ERR_USAGE, "%s:%d: domain #%d has no 'name'", path, m->line, idx + 1);
    if (name->kind != YDOC_SCALAR || !dataset_name_ok(name->value))
        return err_set(e, ERR_USAGE,
                       "%s:%d: domain #%d: name '%s' is not 1..%d characters of "
                       "[A-Za-z0-9_.-]",
                       path, name->line, idx + 1, name->kind == YDOC_SCALAR ? name->value : "",
                       DATASET_NAME_MAX);
    if (!strcmp(name->value, ".") || !strcmp(name->value, ".."))
        return err_set(e, ERR_USAGE, "%s:%d: domain #%d: name '%s' is a directory's own name: choose another "
                       "(mixture outputs put domain names into paths)", path, name->line, idx + 1, name->value);
    for (int j = 0; j < idx; j++)
        if (strcmp(ds->domains[j].name, name->value) == 0)
            return err_set(e, ERR_USAGE, "%s:%d: duplicate domain name '%s' (domains #%d and #%d)",
                           path, name->line, name->value, j + 1, idx + 1);
    dataset_domain *d = &ds->domains[idx];
    d->name = strdup(name->value);
    if (!d->name) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    for (size_t k = 0; k < m->n; k++) {
        const char *key = m->keys[k];
        int known = strcmp(key, "name") == 0;
        for (int s = 0; s < SPLIT_COUNT; s++) known |= strcmp(key, split_names[s]) == 0;
        if (!known)
            return err_set(e, ERR_USAGE,
                           "%s:%d: unknown key '%s' in domain '%s' (expected name, train, val, "
                           "test)",
                           path, m->items[k]->line, key, d->name);
    }
    load_ctx c = {.path = path, .base = base, .vocab = ds->vocab, .domain = d->name,
                  .domain_index = idx, .ds = ds, .seen = seen};
    for (int s = 0; s < SPLIT_COUNT; s++) {
        const ydoc_node *v = ydoc_get(m, split_names[s]);
        if (!v) {
            if (s == SPLIT_TEST) continue;
            return err_set(e, ERR_USAGE, "%s:%d: domain '%s' has no '%s' list of shard globs", path,
                           m->line, d->name, split_names[s]);
        }
        int rc = load_split(&c, s, v, &d->split[s], e);
        if (rc) return rc;
    }
    return 0;
}

static int parse_vocab(const char *path, const ydoc_node *v, int *out, tdm_err *e) {
    if (!v) return err_set(e, ERR_USAGE, "%s: missing 'vocab' (e.g. vocab: 256)", path);
    char *end = NULL;
    errno = 0;
    long x = v->kind == YDOC_SCALAR ? strtol(v->value, &end, 10) : 0;
    if (v->kind != YDOC_SCALAR || v->quoted || end == v->value || *end || errno || x < 1 ||
        x > SHARD_VOCAB_MAX)
        return err_set(e, ERR_USAGE, "%s:%d: vocab must be an integer in 1..%d", path, v->line,
                       SHARD_VOCAB_MAX);
    *out = (int)x;
    return 0;
}

int dataset_tokenizer_ok(const char *kind) {
    size_t len = strlen(kind);
    if (len == 0 || len >= DATASET_TOKENIZER_MAX) return 0;
    for (const char *p = kind; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 (c && strchr("_.:/@+-", c));
        if (!ok) return 0;
    }
    return 1;
}

/* 64 hex digits, either case. */
static int sha256_hex_ok(const char *h) {
    size_t i = 0;
    for (; h[i]; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f') ||
              (h[i] >= 'A' && h[i] <= 'F')))
            return 0;
    return i == 64;
}

/* The optional keys tokenizer, tokenizer_sha256 and eot (after vocab, which eot needs). */
static int parse_tokenizer(dataset *ds, const ydoc_node *root, tdm_err *e) {
    const char *path = ds->path;
    const ydoc_node *t = ydoc_get(root, "tokenizer"), *h = ydoc_get(root, "tokenizer_sha256"),
                    *eot = ydoc_get(root, "eot");
    ds->eot = -1;
    if (t) {
        if (t->kind != YDOC_SCALAR || !dataset_tokenizer_ok(t->value))
            return err_set(e, ERR_USAGE,
                           "%s:%d: tokenizer must be a string of 1..%d characters of "
                           "[A-Za-z0-9_.:/@+-] (e.g. byte, hf-bpe:gpt2, tiktoken:cl100k)",
                           path, t->line, DATASET_TOKENIZER_MAX - 1);
        snprintf(ds->tokenizer, sizeof ds->tokenizer, "%s", t->value);
    }
    if (h) {
        if (h->kind != YDOC_SCALAR || !sha256_hex_ok(h->value))
            return err_set(e, ERR_USAGE,
                           "%s:%d: tokenizer_sha256 must be a SHA-256 digest: 64 hex digits",
                           path, h->line);
        for (int i = 0; i < 64; i++) {
            char c = h->value[i];
            ds->tokenizer_sha256[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
        }
        ds->tokenizer_sha256[64] = '\0';
    }
    if (eot) {
        char *end = NULL;
        errno = 0;
        long x = eot->kind == YDOC_SCALAR ? strtol(eot->value, &end, 10) : -1;
        if (eot->kind != YDOC_SCALAR || eot->quoted || end == eot->value || *end || errno ||
            x < 0 || x >= ds->vocab)
            return err_set(e, ERR_USAGE, "%s:%d: eot must be a token id in 0..%d (below vocab %d)",
                           path, eot->line, ds->vocab - 1, ds->vocab);
        ds->eot = (int)x;
    }
    return 0;
}

int dataset_byte_level(const dataset *ds) {
    return !strcmp(ds->tokenizer, "byte") || (!ds->tokenizer[0] && ds->vocab == 256);
}

int dataset_model_vocab(const dataset *ds, int config_vocab, int *vocab, tdm_err *e) {
    if (config_vocab == 0) {
        *vocab = ds->vocab;
        return 0;
    }
    if (config_vocab < ds->vocab)
        return err_set(e, ERR_USAGE,
                       "model.vocab = %d is smaller than the vocabulary %d of the dataset %s%s%s%s "
                       "(its token ids go up to %d, which the model could not embed): set "
                       "model.vocab = 0 to take the dataset's, or at least %d, or train on a "
                       "dataset made with the model's tokenizer",
                       config_vocab, ds->vocab, ds->path, ds->tokenizer[0] ? " (tokenizer " : "",
                       ds->tokenizer, ds->tokenizer[0] ? ")" : "", ds->vocab - 1, ds->vocab);
    *vocab = config_vocab;
    return 0;
}

static int load_tree(dataset *ds, const ydoc_node *root, tdm_err *e) {
    const char *path = ds->path;
    if (root->kind != YDOC_MAP)
        return err_set(e, ERR_USAGE, "%s:%d: expected a map with 'vocab' and 'domains'", path,
                       root->line);
    for (size_t k = 0; k < root->n; k++)
        if (strcmp(root->keys[k], "vocab") && strcmp(root->keys[k], "domains") &&
            strcmp(root->keys[k], "tokenizer") && strcmp(root->keys[k], "tokenizer_sha256") &&
            strcmp(root->keys[k], "eot"))
            return err_set(e, ERR_USAGE,
                           "%s:%d: unknown key '%s' (expected vocab, domains, tokenizer, "
                           "tokenizer_sha256, eot)",
                           path, root->items[k]->line, root->keys[k]);
    int rc = parse_vocab(path, ydoc_get(root, "vocab"), &ds->vocab, e);
    if (!rc) rc = parse_tokenizer(ds, root, e);
    if (rc) return rc;
    const ydoc_node *doms = ydoc_get(root, "domains");
    if (!doms) return err_set(e, ERR_USAGE, "%s: missing 'domains' list", path);
    if (doms->kind != YDOC_SEQ || doms->n < 1 || doms->n > DATASET_MAX_DOMAINS)
        return err_set(e, ERR_USAGE, "%s:%d: 'domains' must be a list of 1..%d domains", path,
                       doms->line, DATASET_MAX_DOMAINS);
    ds->domains = calloc(doms->n, sizeof *ds->domains);
    if (!ds->domains) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    char *base = glob_base_dir(path);
    if (!base) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    seen_set seen = {0};
    for (size_t i = 0; i < doms->n && !rc; i++) {
        ds->n_domains = (int)i + 1; /* so dataset_free releases a partly loaded domain */
        rc = load_domain(ds, base, &seen, doms->items[i], (int)i, e);
    }
    free(base);
    free(seen.slot);
    return rc;
}

int dataset_load(dataset *ds, const char *yaml_path, tdm_err *e) {
    memset(ds, 0, sizeof *ds);
    ds->path = strdup(yaml_path);
    if (!ds->path) return err_set(e, ERR_INTERNAL, "%s: out of memory", yaml_path);
    ydoc_node *root = ydoc_parse_file(yaml_path, e);
    int rc = root ? load_tree(ds, root, e) : e ? e->code : ERR_USAGE;
    /* no description beside a prep's lock: its writer was cut off (prep and gen-corpus
     * remove the old description first and write the new one last) */
    struct stat st;
    const char *base = strrchr(yaml_path, '/');
    base = base ? base + 1 : yaml_path;
    if (!root && e && errno == ENOENT && !strcmp(base, "dataset.yaml") && access(yaml_path, F_OK) != 0) {
        char lock[4200];
        const char *slash = strrchr(yaml_path, '/');
        snprintf(lock, sizeof lock, "%.*s.tandem-prep.lock", slash ? (int)(slash - yaml_path + 1) : 0, yaml_path);
        if (stat(lock, &st) == 0)
            snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg),
                     " (a tandem prep or gen-corpus wrote into this folder, and it writes dataset.yaml last: it "
                     "did not finish, or the file was removed; run the same command again)");
    }
    ydoc_free(root);
    if (rc) dataset_free(ds);
    return rc;
}

void dataset_free(dataset *ds) {
    if (!ds) return;
    for (int d = 0; d < ds->n_domains && ds->domains; d++) {
        for (int s = 0; s < SPLIT_COUNT; s++) {
            dataset_split *sp = &ds->domains[d].split[s];
            for (size_t i = 0; i < sp->n_shards; i++) shard_close(&sp->shards[i]);
            free(sp->shards);
        }
        free(ds->domains[d].name);
    }
    free(ds->domains);
    free(ds->path);
    memset(ds, 0, sizeof *ds);
}

int dataset_n_domains(const dataset *ds) {
    return ds->n_domains;
}

const char *dataset_domain_name(const dataset *ds, int domain) {
    return ds->domains[domain].name;
}

int dataset_find_domain(const dataset *ds, const char *name) {
    for (int d = 0; d < ds->n_domains; d++)
        if (strcmp(ds->domains[d].name, name) == 0) return d;
    return -1;
}

const shard *dataset_shards(const dataset *ds, int domain, int split, size_t *n) {
    const dataset_split *sp = &ds->domains[domain].split[split];
    *n = sp->n_shards;
    return sp->shards;
}

uint64_t dataset_tokens(const dataset *ds, int domain, int split) {
    return ds->domains[domain].split[split].tokens;
}

int dataset_shard_stem(const char *name, size_t len) {
    char file[64];
    if (len >= sizeof file) return 0;
    memcpy(file, name, len);
    file[len] = '\0';
    int split, digits;
    uint64_t index;
    return dataset_shard_match(file, &split, &index, &digits);
}

void dataset_shard_name(int split, uint64_t index, int digits, char out[64]) {
    /* digits <= 20 anyway; the mask lets the compiler see that the name fits */
    snprintf(out, 64, "%s_%0*llu.bin", dataset_split_name(split), digits & 31,
             (unsigned long long)index);
}

int dataset_write_yaml(const char *path, const char *header, int vocab,
                       const dataset_yaml_domain *doms, int n, int with_test, tdm_err *e) {
    dataset_yaml_meta meta = {.vocab = vocab, .eot = -1};
    return dataset_write_yaml_meta(path, header, &meta, doms, n, with_test, e);
}

int dataset_write_yaml_meta(const char *path, const char *header, const dataset_yaml_meta *meta,
                            const dataset_yaml_domain *doms, int n, int with_test, tdm_err *e) {
    const char *tk = meta->tokenizer ? meta->tokenizer : "";
    const char *sha = meta->tokenizer_sha256 ? meta->tokenizer_sha256 : "";
    if (meta->vocab < 1 || meta->vocab > SHARD_VOCAB_MAX)
        return err_set(e, ERR_USAGE, "%s: vocab %d is outside 1..%d", path, meta->vocab,
                       SHARD_VOCAB_MAX);
    if (tk[0] && !dataset_tokenizer_ok(tk))
        return err_set(e, ERR_USAGE,
                       "%s: tokenizer '%s' is not 1..%d characters of [A-Za-z0-9_.:/@+-]", path,
                       tk, DATASET_TOKENIZER_MAX - 1);
    if (sha[0] && !sha256_hex_ok(sha))
        return err_set(e, ERR_USAGE, "%s: tokenizer_sha256 '%s' is not 64 hex digits", path, sha);
    if (meta->eot < -1 || meta->eot >= meta->vocab)
        return err_set(e, ERR_USAGE, "%s: eot %d is not a token id below vocab %d", path, meta->eot,
                       meta->vocab);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return err_set(e, ERR_INTERNAL, "out of memory");
    fprintf(f, "%svocab: %d\n", header, meta->vocab);
    /* quoted: a kind like "byte" or one with ':' stays a plain string to any YAML reader */
    if (tk[0]) fprintf(f, "tokenizer: \"%s\"\n", tk);
    if (sha[0]) fprintf(f, "tokenizer_sha256: \"%s\"\n", sha);
    if (meta->eot >= 0) fprintf(f, "eot: %d\n", meta->eot);
    fprintf(f, "domains:\n");
    for (int m = 0; m < n; m++) {
        /* names are checked by dataset_name_ok: no quote or backslash to escape */
        fprintf(f, "  - name: \"%s\"%s%s\n", doms[m].name, doms[m].comment[0] ? "  # " : "",
                doms[m].comment);
        for (int s = 0; s < SPLIT_COUNT; s++) {
            if (s == SPLIT_TEST && !with_test) continue;
            const char *sn = dataset_split_name(s);
            fprintf(f, "    %s: [\"%s/%s_*.bin\"]\n", sn, doms[m].name, sn);
        }
    }
    if (fclose(f) != 0) {
        free(text);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    int rc = shard_atomic_write(path, text, len, NULL, 0, e);
    free(text);
    return rc;
}

int dataset_shard_match(const char *file, int *split, uint64_t *index, int *digits) {
    size_t len = strlen(file);
    for (int s = 0; s < SPLIT_COUNT; s++) {
        const char *sn = dataset_split_name(s);
        size_t pl = strlen(sn);
        if (len < pl + 5 || strncmp(file, sn, pl) || file[pl] != '_' || strcmp(file + len - 4, ".bin"))
            continue;
        *split = s;
        const char *num = file + pl + 1;
        size_t nd = len - pl - 5;
        uint64_t v = 0;
        *digits = nd > 0 && nd <= 19 ? (int)nd : 0;
        for (size_t i = 0; *digits && i < nd; i++) {
            if (num[i] < '0' || num[i] > '9') *digits = 0;
            else v = v * 10 + (uint64_t)(num[i] - '0');
        }
        *index = v;
        return 1;
    }
    return 0;
}
