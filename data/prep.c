/* prep.c — text files into byte-level train/val/test shards behind `tandem prep`. */
#include "data/prep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/shard.h"
#include "util/fileio.h"
#include "util/rng.h"

/* Tokens are written from host uint16 values, which is only llm.c's little-endian format
 * on a little-endian host (as data/shard.c requires too). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data/prep.c writes little-endian shards from host integers; port it before building here"
#endif

#define PREP_READ_BYTES (1u << 20)    /* read buffer */
#define PREP_WRITE_TOKENS (1u << 18)  /* per-split token buffer (512 KiB) */
#define PREP_MAX_BLOCK_BYTES (1ull << 40)

/* ---- options and the block assignment ------------------------------------------------ */

void prep_opts_init(prep_opts *o) {
    memset(o, 0, sizeof *o);
    o->split[SPLIT_TRAIN] = 0.9;
    o->split[SPLIT_VAL] = 0.05;
    o->split[SPLIT_TEST] = 0.05;
    o->block_bytes = PREP_DEFAULT_BLOCK_BYTES;
    o->shard_tokens = PREP_DEFAULT_SHARD_TOKENS;
    o->seed = PREP_DEFAULT_SEED;
    o->report = stdout;
    o->progress = stderr;
    o->progress_bytes = PREP_DEFAULT_PROGRESS_BYTES;
}

int prep_check_split(const double f[3], tdm_err *e) {
    for (int s = 0; s < SPLIT_COUNT; s++)
        if (!isfinite(f[s]) || f[s] < 0 || f[s] > 1)
            return err_set(e, ERR_USAGE,
                           "split fraction %s = %g is not a number in [0, 1] (--split "
                           "train,val,test)",
                           dataset_split_name(s), f[s]);
    if (f[SPLIT_TRAIN] <= 0 || f[SPLIT_VAL] <= 0)
        return err_set(e, ERR_USAGE,
                       "split %g,%g,%g: train and val fractions must be > 0 (only test may "
                       "be 0)",
                       f[0], f[1], f[2]);
    double sum = f[0] + f[1] + f[2];
    if (fabs(sum - 1) > PREP_SPLIT_TOLERANCE)
        return err_set(e, ERR_USAGE,
                       "split fractions %g,%g,%g sum to %.9g, not 1; give train,val,test "
                       "fractions that add up to 1",
                       f[0], f[1], f[2], sum);
    return 0;
}

static double prep_block_u(uint64_t seed, int domain, uint64_t block) {
    rng_stream r;
    rng_stream_init(&r, seed, PREP_RNG_PURPOSE, (uint32_t)domain, (uint32_t)block,
                    (uint32_t)(block >> 32));
    return rng_uniform(&r);
}

/* Split s covers u in [lo, hi); the last split with a positive fraction reaches 1. */
static void prep_interval(const double f[3], int s, double *lo, double *hi) {
    double c0 = f[SPLIT_TRAIN], c1 = f[SPLIT_TRAIN] + f[SPLIT_VAL];
    if (s == SPLIT_TRAIN) *lo = 0, *hi = c0;
    else if (s == SPLIT_VAL) *lo = c0, *hi = f[SPLIT_TEST] > 0 ? c1 : 1;
    else *lo = c1, *hi = 1;
}

static int prep_split_of_u(double u, const double f[3]) {
    if (u < f[SPLIT_TRAIN]) return SPLIT_TRAIN;
    if (f[SPLIT_TEST] <= 0 || u < f[SPLIT_TRAIN] + f[SPLIT_VAL]) return SPLIT_VAL;
    return SPLIT_TEST;
}

int prep_block_split(uint64_t seed, int domain, uint64_t block, const double f[3]) {
    return prep_split_of_u(prep_block_u(seed, domain, block), f);
}

/* ---- domains and their files ---------------------------------------------------------- */

typedef struct prep_file {
    char *path;
    uint64_t size;
    dev_t dev;
    ino_t ino;
} prep_file;

typedef struct prep_dom {
    const char *name;
    int index;
    prep_file *files;
    size_t n_files, cap;
    uint64_t n_empty, n_skipped; /* empty files; symlinks and special files in directories */
    uint64_t bytes;              /* the stream: text plus separators */
    uint64_t n_blocks, last_len; /* last_len: bytes of the final (maybe short) block */
    uint64_t split_blocks[SPLIT_COUNT], split_bytes[SPLIT_COUNT], shards[SPLIT_COUNT];
    int n_moved; /* small-domain rescues: block moved[i] goes to moved_to[i] */
    uint64_t moved[SPLIT_COUNT];
    int moved_to[SPLIT_COUNT], moved_from[SPLIT_COUNT];
    char *dir;
} prep_dom;

static void prep_dom_free(prep_dom *d) {
    for (size_t i = 0; i < d->n_files; i++) free(d->files[i].path);
    free(d->files);
    free(d->dir);
    memset(d, 0, sizeof *d);
}

/* a/b, without doubling a slash that `a` already ends with. */
static char *prep_join(const char *a, const char *b) {
    size_t la = strlen(a), n = la + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, la && a[la - 1] == '/' ? "" : "/", b);
    return p;
}

static int prep_oom(tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "out of memory");
}

static int prep_check_opts(const prep_opts *o, tdm_err *e) {
    if (!o->out || !o->out[0])
        return err_set(e, ERR_USAGE, "no output directory (--out DIR)");
    if (o->n_inputs < 1 || !o->inputs)
        return err_set(e, ERR_USAGE, "no input: give at least one --domain NAME=PATH");
    int rc = prep_check_split(o->split, e);
    if (rc) return rc;
    if (o->block_bytes < 1 || o->block_bytes > PREP_MAX_BLOCK_BYTES)
        return err_set(e, ERR_USAGE, "block bytes %llu is outside 1..%llu (--block-bytes)",
                       (unsigned long long)o->block_bytes, PREP_MAX_BLOCK_BYTES);
    if (o->shard_tokens < 1 || o->shard_tokens > SHARD_MAX_TOKENS)
        return err_set(e, ERR_USAGE, "shard tokens %llu is outside 1..%u (--shard-tokens)",
                       (unsigned long long)o->shard_tokens, SHARD_MAX_TOKENS);
    struct stat st;
    if (stat(o->out, &st) == 0 && !S_ISDIR(st.st_mode))
        return err_set(e, ERR_USAGE,
                       "output %s exists and is not a directory; choose another --out", o->out);
    return 0;
}

/* Maps each input to its domain (first appearance order); names are checked here. */
static int prep_group(const prep_opts *o, prep_dom *doms, int *n_doms, int *dom_of,
                      tdm_err *e) {
    for (int i = 0; i < o->n_inputs; i++) {
        const char *n = o->inputs[i].name, *p = o->inputs[i].path;
        if (!n || !dataset_name_ok(n) || !strcmp(n, ".") || !strcmp(n, ".."))
            return err_set(e, ERR_USAGE,
                           "domain name '%s' must be 1..%d characters of [A-Za-z0-9_.-] "
                           "(and not . or ..)",
                           n ? n : "", DATASET_NAME_MAX);
        if (!p || !p[0]) return err_set(e, ERR_USAGE, "domain '%s': empty path", n);
        int m = 0;
        while (m < *n_doms && strcmp(doms[m].name, n)) m++;
        if (m == *n_doms) {
            for (int k = 0; k < *n_doms; k++)
                if (!strcasecmp(doms[k].name, n))
                    return err_set(e, ERR_USAGE,
                                   "domain names '%s' and '%s' differ only in case; their "
                                   "directories would collide on a case-insensitive file "
                                   "system: rename one",
                                   doms[k].name, n);
            if (*n_doms == DATASET_MAX_DOMAINS)
                return err_set(e, ERR_USAGE, "more than %d domains (at '%s')",
                               DATASET_MAX_DOMAINS, n);
            doms[m].name = n;
            doms[m].index = m;
            (*n_doms)++;
        }
        dom_of[i] = m;
    }
    return 0;
}

/* Opens `path` to prove it readable and records it. Takes ownership of `path`. */
static int prep_add_file(prep_dom *d, char *path, int nofollow, tdm_err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = err_sys(e, ERR_USAGE, errno,
                         "domain '%s': cannot read %s (make it readable or leave it out)",
                         d->name, path);
        if (fd >= 0) close(fd);
        free(path);
        return rc;
    }
    close(fd);
    if (!S_ISREG(st.st_mode)) { /* replaced since it was listed */
        int rc = err_set(e, ERR_USAGE, "domain '%s': %s is not a regular file", d->name, path);
        free(path);
        return rc;
    }
    if (d->n_files == d->cap) {
        size_t nc = d->cap ? 2 * d->cap : 64;
        prep_file *nf = realloc(d->files, nc * sizeof *nf);
        if (!nf) {
            free(path);
            return prep_oom(e);
        }
        d->files = nf;
        d->cap = nc;
    }
    prep_file *f = &d->files[d->n_files++];
    f->path = path;
    f->size = (uint64_t)st.st_size;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    if (f->size == 0) d->n_empty++;
    return 0;
}

static int prep_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds every regular file below `dir`; symlinks and special files are counted, not
 * followed. The directory is read whole and closed before descending, so the depth of
 * the tree does not cost open descriptors. */
static int prep_walk(prep_dom *d, const char *dir, tdm_err *e) {
    DIR *dp = opendir(dir);
    if (!dp)
        return err_sys(e, ERR_USAGE, errno,
                       "domain '%s': cannot read directory %s (fix its permissions or leave "
                       "it out)",
                       d->name, dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dp);
        if (!de) {
            if (errno)
                rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot list directory %s",
                             d->name, dir);
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                rc = prep_oom(e);
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = prep_oom(e);
            break;
        }
        n++;
    }
    closedir(dp);
    if (!rc && n) qsort(names, n, sizeof *names, prep_cmp_str);
    for (size_t i = 0; !rc && i < n; i++) {
        char *child = prep_join(dir, names[i]);
        struct stat st;
        if (!child) rc = prep_oom(e);
        else if (lstat(child, &st) != 0)
            rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot stat %s", d->name, child);
        else if (S_ISDIR(st.st_mode))
            rc = prep_walk(d, child, e);
        else if (S_ISREG(st.st_mode)) {
            rc = prep_add_file(d, child, 1, e);
            child = NULL; /* owned by the domain now, or freed */
        } else
            d->n_skipped++;
        free(child);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Canonical absolute form of `path`, which need not exist: realpath of its longest
 * existing prefix, then the rest with ".", ".." and repeated slashes resolved. */
static char *prep_canon(const char *path) {
    size_t len = strlen(path), cut = len;
    char *base = NULL;
    for (;;) {
        char *pre = strndup(path, cut);
        if (!pre) return NULL;
        base = realpath(cut ? pre : (path[0] == '/' ? "/" : "."), NULL);
        free(pre);
        if (base || cut == 0) break;
        while (cut > 0 && path[cut - 1] != '/') cut--;
        while (cut > 0 && path[cut - 1] == '/') cut--;
    }
    if (!base) return NULL;
    size_t n = strlen(base) + (len - cut) + 2;
    char *out = malloc(n);
    if (!out) {
        free(base);
        return NULL;
    }
    size_t o = strlen(base);
    memcpy(out, base, o + 1);
    free(base);
    if (o == 1) o = 0; /* "/": components append as "/x" */
    for (const char *p = path + cut; *p;) {
        while (*p == '/') p++;
        const char *q = p;
        while (*q && *q != '/') q++;
        size_t cl = (size_t)(q - p);
        if (cl == 0 || (cl == 1 && p[0] == '.')) {
            /* nothing: "//" or "." */
        } else if (cl == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
        } else {
            out[o++] = '/';
            memcpy(out + o, p, cl);
            o += cl;
        }
        p = q;
    }
    if (o == 0) out[o++] = '/';
    out[o] = '\0';
    return out;
}

/* Whether canonical path `child` is `parent` or below it. */
static int prep_within(const char *child, const char *parent) {
    size_t n = strlen(parent);
    if (n == 1 && parent[0] == '/') return 1;
    return !strncmp(child, parent, n) && (child[n] == '\0' || child[n] == '/');
}

/* Adds one --domain path: a regular file, or a directory walked recursively. */
static int prep_list_input(prep_dom *d, const char *path, const char *out_canon, tdm_err *e) {
    struct stat st;
    if (stat(path, &st) != 0)
        return err_sys(e, ERR_USAGE, errno, "domain '%s': cannot use %s (check the path)",
                       d->name, path);
    char *p = strdup(path);
    if (!p) return prep_oom(e);
    if (S_ISREG(st.st_mode)) return prep_add_file(d, p, 0, e);
    if (!S_ISDIR(st.st_mode)) {
        free(p);
        return err_set(e, ERR_USAGE,
                       "domain '%s': %s is neither a regular file nor a directory; give "
                       "text files or directories of them",
                       d->name, path);
    }
    char *in_canon = realpath(path, NULL);
    int rc = 0;
    if (!in_canon)
        rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot resolve %s", d->name, path);
    else if (out_canon && prep_within(out_canon, in_canon))
        rc = err_set(e, ERR_USAGE,
                     "output directory %s is inside input directory %s of domain '%s': prep "
                     "would read its own shards next time; choose an --out outside the inputs",
                     out_canon, path, d->name);
    free(in_canon);
    if (!rc) rc = prep_walk(d, p, e);
    free(p);
    return rc;
}

static int prep_cmp_file(const void *a, const void *b) {
    return strcmp(((const prep_file *)a)->path, ((const prep_file *)b)->path);
}

typedef struct prep_ref {
    const prep_file *f;
    int dom;
} prep_ref;

static int prep_cmp_ref(const void *a, const void *b) {
    const prep_ref *x = a, *y = b;
    if (x->f->dev != y->f->dev) return x->f->dev < y->f->dev ? -1 : 1;
    if (x->f->ino != y->f->ino) return x->f->ino < y->f->ino ? -1 : 1;
    if (x->dom != y->dom) return x->dom < y->dom ? -1 : 1;
    return strcmp(x->f->path, y->f->path);
}

/* No file may be read twice: the same text in two places of a dataset (train and val, or
 * two domains) would make a validation loss partly a training loss. */
static int prep_check_duplicates(const prep_dom *doms, int n_doms, tdm_err *e) {
    size_t n = 0;
    for (int m = 0; m < n_doms; m++) n += doms[m].n_files;
    if (n < 2) return 0;
    prep_ref *r = malloc(n * sizeof *r);
    if (!r) return prep_oom(e);
    size_t k = 0;
    for (int m = 0; m < n_doms; m++)
        for (size_t i = 0; i < doms[m].n_files; i++) r[k++] = (prep_ref){&doms[m].files[i], m};
    qsort(r, n, sizeof *r, prep_cmp_ref);
    int rc = 0;
    for (size_t i = 1; !rc && i < n; i++) {
        const prep_ref *a = &r[i - 1], *b = &r[i];
        if (a->f->dev != b->f->dev || a->f->ino != b->f->ino) continue;
        if (a->dom == b->dom && !strcmp(a->f->path, b->f->path))
            rc = err_set(e, ERR_USAGE,
                         "domain '%s': %s is given twice (two --domain paths reach it); give "
                         "each file once",
                         doms[a->dom].name, a->f->path);
        else
            rc = err_set(e, ERR_USAGE,
                         "%s (domain '%s') and %s (domain '%s') are the same file; give each "
                         "file once so no text is in two places of the dataset",
                         a->f->path, doms[a->dom].name, b->f->path, doms[b->dom].name);
    }
    free(r);
    return rc;
}

/* ---- the plan: blocks per split, the small-domain rescue, shard counts ---------------- */

static int prep_assigned(const prep_dom *d, uint64_t seed, const double f[3], uint64_t k) {
    for (int i = 0; i < d->n_moved; i++)
        if (d->moved[i] == k) return d->moved_to[i];
    return prep_block_split(seed, d->index, k, f);
}

static uint64_t prep_ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

static const char *prep_plural(uint64_t n) {
    return n == 1 ? "" : "s";
}

static int prep_plan(const prep_opts *o, prep_dom *d, tdm_err *e) {
    const double *f = o->split;
    uint64_t B = o->block_bytes;
    int required = 2 + (f[SPLIT_TEST] > 0);
    d->bytes = 0;
    for (size_t i = 0; i < d->n_files; i++)
        d->bytes += d->files[i].size + (d->files[i].size > 0); /* text + separator */
    if (d->bytes == 0)
        return err_set(e, ERR_USAGE,
                       "domain '%s' has no text (%zu file%s, %llu empty): give it non-empty "
                       "files",
                       d->name, d->n_files, prep_plural(d->n_files),
                       (unsigned long long)d->n_empty);
    d->n_blocks = prep_ceil_div(d->bytes, B);
    d->last_len = d->bytes - (d->n_blocks - 1) * B;
    if (d->n_blocks < (uint64_t)required) {
        uint64_t need = (uint64_t)(required - 1) * B + 1;
        uint64_t fit = (d->bytes - 1) / (uint64_t)(required - 1); /* largest B that works */
        char hint[96] = "";
        if (fit >= 1)
            snprintf(hint, sizeof hint, " or lower --block-bytes to %llu or less",
                     (unsigned long long)fit);
        return err_set(e, ERR_USAGE,
                       "domain '%s' has %llu bytes of text and separators, %llu block%s of "
                       "%llu bytes; it needs at least %llu bytes so that train, val%s each get "
                       "a block: add text%s",
                       d->name, (unsigned long long)d->bytes, (unsigned long long)d->n_blocks,
                       prep_plural(d->n_blocks), (unsigned long long)B,
                       (unsigned long long)need, required == 3 ? " and test" : "", hint);
    }
    uint64_t *cnt = d->split_blocks;
    for (uint64_t k = 0; k < d->n_blocks; k++) cnt[prep_block_split(o->seed, d->index, k, f)]++;
    static const int order[SPLIT_COUNT] = {SPLIT_VAL, SPLIT_TEST, SPLIT_TRAIN};
    for (int i = 0; i < SPLIT_COUNT; i++) {
        int s = order[i];
        if (f[s] <= 0 || cnt[s] > 0) continue;
        double lo, hi, best_d = INFINITY;
        prep_interval(f, s, &lo, &hi);
        uint64_t best = 0;
        int best_from = -1;
        for (uint64_t k = 0; k < d->n_blocks; k++) {
            int t = prep_assigned(d, o->seed, f, k);
            if (cnt[t] < 2) continue; /* the donor keeps a block */
            double u = prep_block_u(o->seed, d->index, k);
            double dist = u < lo ? lo - u : u >= hi ? u - hi : 0;
            if (dist < best_d) best_d = dist, best = k, best_from = t;
        }
        if (best_from < 0) /* cannot happen: n_blocks >= required */
            return err_set(e, ERR_INTERNAL, "domain '%s': no block to move to %s", d->name,
                           dataset_split_name(s));
        d->moved[d->n_moved] = best;
        d->moved_from[d->n_moved] = best_from;
        d->moved_to[d->n_moved++] = s;
        cnt[best_from]--;
        cnt[s]++;
    }
    for (int s = 0; s < SPLIT_COUNT; s++) d->split_bytes[s] = cnt[s] * B;
    d->split_bytes[prep_assigned(d, o->seed, f, d->n_blocks - 1)] -= B - d->last_len;
    for (int s = 0; s < SPLIT_COUNT; s++)
        d->shards[s] = prep_ceil_div(d->split_bytes[s], o->shard_tokens);
    return 0;
}

/* ---- stale shards (as in data/corpus.c) ------------------------------------------------ */

/* Digits in shard numbers, at least 3, enough that names sort in shard order. */
static int prep_digits(uint64_t shards) {
    int dg = 1;
    for (uint64_t x = shards > 0 ? shards - 1 : 0; x >= 10; x /= 10) dg++;
    return dg < 3 ? 3 : dg;
}

/* Whether `file` is a shard name (*is_shard) and one this run writes (the return). */
static int prep_is_planned(const prep_dom *d, const char *file, int *is_shard) {
    int s, nd;
    uint64_t v;
    if (!(*is_shard = dataset_shard_match(file, &s, &v, &nd))) return 0;
    return nd == prep_digits(d->shards[s]) && v < d->shards[s];
}

static int prep_check_stale(const prep_dom *d, tdm_err *e) {
    DIR *dp = opendir(d->dir);
    if (!dp) {
        if (errno == ENOENT) return 0; /* not there yet */
        return err_sys(e, ERR_USAGE, errno, "cannot read output directory %s", d->dir);
    }
    /* All of them are counted and the first in name order is named, so the message does
     * not depend on readdir's order. */
    char first[256] = "";
    uint64_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        int is_shard;
        if (prep_is_planned(d, de->d_name, &is_shard) || !is_shard) continue;
        if (n++ == 0 || strcmp(de->d_name, first) < 0)
            snprintf(first, sizeof first, "%s", de->d_name);
    }
    closedir(dp);
    if (n == 1)
        return err_set(e, ERR_USAGE,
                       "%s/%s is from an earlier dataset and would be read as part of this "
                       "one; remove it or choose another --out",
                       d->dir, first);
    if (n > 1)
        return err_set(e, ERR_USAGE,
                       "%s/%s and %llu other shards are from an earlier dataset and would be "
                       "read as part of this one; remove them or choose another --out",
                       d->dir, first, (unsigned long long)(n - 1));
    return 0;
}

/* ---- streaming shard writer ------------------------------------------------------------ */

/* Writes one split's shards: each goes to a temporary file beside its final name (header
 * first as zeros, then tokens as they come), and on completion gets its header, an fsync,
 * the rename onto its name and an fsync of the directory. */
typedef struct prep_writer {
    const char *dir;
    int split, digits;
    uint64_t shard_tokens;
    uint64_t next;     /* number of the next shard to open */
    uint64_t in_shard; /* tokens in the open shard */
    uint64_t total;    /* tokens written so far */
    int fd;            /* open shard, or -1 */
    char *tmp, *final;
    size_t nbuf;
    uint16_t buf[PREP_WRITE_TOKENS];
} prep_writer;

static void prep_writer_init(prep_writer *w, const char *dir, int split, uint64_t shards,
                             uint64_t shard_tokens) {
    w->dir = dir;
    w->split = split;
    w->digits = prep_digits(shards);
    w->shard_tokens = shard_tokens;
    w->next = w->in_shard = w->total = 0;
    w->fd = -1;
    w->tmp = w->final = NULL;
    w->nbuf = 0;
}

/* Drops an unfinished shard (its temporary file) after an error. */
static void prep_writer_abort(prep_writer *w) {
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->final);
    w->fd = -1;
    w->tmp = w->final = NULL;
}

static int prep_writer_open(prep_writer *w, tdm_err *e) {
    static atomic_uint counter;
    char file[64];
    dataset_shard_name(w->split, w->next, w->digits, file);
    w->final = prep_join(w->dir, file);
    size_t tl = w->final ? strlen(w->final) + 48 : 0;
    w->tmp = w->final ? malloc(tl) : NULL;
    if (!w->tmp) return prep_oom(e);
    for (int tries = 0; tries < 100 && w->fd < 0; tries++) {
        snprintf(w->tmp, tl, "%s.tmp.%ld.%u", w->final, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd < 0 && errno != EEXIST) break;
    }
    if (w->fd < 0) {
        int rc = err_sys(e, ERR_USAGE, errno, "%s: cannot create temporary file %s", w->final,
                         w->tmp);
        free(w->tmp); /* nothing was created */
        w->tmp = NULL;
        return rc;
    }
    static const unsigned char zeros[SHARD_HEADER_BYTES];
    if (fileio_write_all(w->fd, zeros, sizeof zeros) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", w->final, w->tmp);
    w->next++;
    w->in_shard = 0;
    return 0;
}

static int prep_writer_flush(prep_writer *w, tdm_err *e) {
    if (w->nbuf && fileio_write_all(w->fd, w->buf, w->nbuf * sizeof *w->buf) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", w->final, w->tmp);
    w->nbuf = 0;
    return 0;
}

/* Completes the open shard: header, fsync, rename onto its name, fsync of the directory. */
static int prep_writer_close(prep_writer *w, tdm_err *e) {
    int rc = prep_writer_flush(w, e);
    if (rc) return rc;
    int32_t header[SHARD_HEADER_INTS] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)w->in_shard};
    const unsigned char *h = (const unsigned char *)header;
    for (size_t off = 0; off < sizeof header;) {
        ssize_t n = pwrite(w->fd, h + off, sizeof header - off, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", w->final, w->tmp);
        off += (size_t)n;
    }
    if (fsync(w->fd) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync %s", w->final, w->tmp);
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot close %s", w->final, w->tmp);
    if (rename(w->tmp, w->final) != 0)
        return err_sys(e, ERR_USAGE, errno, "%s: cannot rename %s over it", w->final, w->tmp);
    free(w->tmp);
    w->tmp = NULL;
    if (fileio_fsync_parent(w->final) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync its directory", w->final);
    free(w->final);
    w->final = NULL;
    return 0;
}

/* Appends n byte tokens, opening and completing shards as they fill. */
static int prep_writer_put(prep_writer *w, const unsigned char *p, size_t n, tdm_err *e) {
    while (n > 0) {
        int rc = 0;
        if (w->fd < 0 && (rc = prep_writer_open(w, e))) return rc;
        uint64_t take = n, room = w->shard_tokens - w->in_shard;
        if (take > room) take = room;
        if (take > PREP_WRITE_TOKENS - w->nbuf) take = PREP_WRITE_TOKENS - w->nbuf;
        for (uint64_t i = 0; i < take; i++) w->buf[w->nbuf + i] = p[i];
        w->nbuf += take;
        w->in_shard += take;
        w->total += take;
        p += take;
        n -= take;
        if (w->nbuf == PREP_WRITE_TOKENS && (rc = prep_writer_flush(w, e))) return rc;
        if (w->in_shard == w->shard_tokens && (rc = prep_writer_close(w, e))) return rc;
    }
    return 0;
}

/* ---- streaming a domain ---------------------------------------------------------------- */

typedef struct prep_stream {
    const prep_opts *o;
    const prep_dom *d;
    prep_writer *w[SPLIT_COUNT];
    uint64_t pos;        /* stream bytes emitted */
    uint64_t block;      /* current block */
    uint64_t left;       /* bytes left in it */
    int cur;             /* its split */
    uint64_t next_report; /* stream position of the next progress line, 0: none */
} prep_stream;

static void prep_progress(prep_stream *st) {
    const prep_dom *d = st->d;
    while (st->next_report && st->pos >= st->next_report) {
        fprintf(st->o->progress,
                "prep: %s: %llu of %llu bytes (%.0f%%); train %llu, val %llu, test %llu "
                "tokens so far\n",
                d->name, (unsigned long long)st->pos, (unsigned long long)d->bytes,
                100.0 * (double)st->pos / (double)d->bytes,
                (unsigned long long)st->w[SPLIT_TRAIN]->total,
                (unsigned long long)st->w[SPLIT_VAL]->total,
                (unsigned long long)st->w[SPLIT_TEST]->total);
        fflush(st->o->progress);
        st->next_report += st->o->progress_bytes;
        if (st->next_report >= d->bytes) st->next_report = 0;
    }
}

/* Sends stream bytes to the split of the block they fall in. */
static int prep_emit(prep_stream *st, const unsigned char *p, size_t n, tdm_err *e) {
    const prep_dom *d = st->d;
    while (n > 0) {
        if (st->pos >= d->bytes)
            return err_set(e, ERR_INTERNAL, "domain '%s': more bytes than planned", d->name);
        size_t take = n < st->left ? n : (size_t)st->left;
        int rc = prep_writer_put(st->w[st->cur], p, take, e);
        if (rc) return rc;
        p += take;
        n -= take;
        st->pos += take;
        st->left -= take;
        if (st->left == 0 && st->pos < d->bytes) {
            st->block++;
            st->left = d->bytes - st->pos < st->o->block_bytes ? d->bytes - st->pos
                                                                 : st->o->block_bytes;
            st->cur = prep_assigned(d, st->o->seed, st->o->split, st->block);
        }
    }
    prep_progress(st);
    return 0;
}

/* Streams one file (exactly the size planned for it) into the domain's stream. */
static int prep_stream_file(prep_stream *st, const prep_file *f, unsigned char *buf,
                            tdm_err *e) {
    const char *dn = st->d->name;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_sys(e, ERR_USAGE, errno, "domain '%s': cannot open %s", dn, f->path);
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0)
        rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot stat %s", dn, f->path);
    else if (sb.st_dev != f->dev || sb.st_ino != f->ino || (uint64_t)sb.st_size != f->size)
        rc = err_set(e, ERR_USAGE,
                     "domain '%s': %s changed since prep listed it (%llu bytes then, %llu now); "
                     "rerun when the inputs are stable",
                     dn, f->path, (unsigned long long)f->size, (unsigned long long)sb.st_size);
#ifdef POSIX_FADV_SEQUENTIAL
    if (!rc) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    uint64_t got = 0;
    while (!rc && got <= f->size) {
        /* one read past the planned size to see that the file did not grow */
        size_t want = f->size - got < PREP_READ_BYTES ? (size_t)(f->size - got) : PREP_READ_BYTES;
        if (want == 0) want = 1;
        ssize_t r = read(fd, buf, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot read %s", dn, f->path);
        } else if (r == 0) {
            if (got < f->size)
                rc = err_set(e, ERR_USAGE,
                             "domain '%s': %s shrank while being read (%llu of %llu bytes); "
                             "rerun when the inputs are stable",
                             dn, f->path, (unsigned long long)got, (unsigned long long)f->size);
            break;
        } else if (got == f->size) {
            rc = err_set(e, ERR_USAGE,
                         "domain '%s': %s grew while being read (planned %llu bytes); rerun "
                         "when the inputs are stable",
                         dn, f->path, (unsigned long long)f->size);
        } else {
            got += (uint64_t)r;
            rc = prep_emit(st, buf, (size_t)r, e);
        }
    }
    close(fd);
    if (!rc && f->size > 0) {
        static const unsigned char sep = PREP_SEPARATOR;
        rc = prep_emit(st, &sep, 1, e);
    }
    return rc;
}

static int prep_make_dir(const char *dir, tdm_err *e) {
    char *p = prep_join(dir, "");
    if (!p) return prep_oom(e);
    int rc = fileio_make_parents(p) != 0
                 ? err_sys(e, ERR_USAGE, errno, "cannot create directory %s", dir)
                 : 0;
    free(p);
    struct stat st;
    if (!rc && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = err_set(e, ERR_USAGE, "%s exists and is not a directory", dir);
    return rc;
}

static int prep_domain(const prep_opts *o, prep_dom *d, prep_writer *w, unsigned char *buf,
                       tdm_err *e) {
    int rc = prep_make_dir(d->dir, e);
    if (rc) return rc;
    prep_stream st = {.o = o, .d = d};
    for (int s = 0; s < SPLIT_COUNT; s++) {
        prep_writer_init(&w[s], d->dir, s, d->shards[s], o->shard_tokens);
        st.w[s] = &w[s];
    }
    st.left = d->bytes < o->block_bytes ? d->bytes : o->block_bytes;
    st.cur = prep_assigned(d, o->seed, o->split, 0);
    if (o->progress && o->progress_bytes && d->bytes > o->progress_bytes)
        st.next_report = o->progress_bytes;
    for (size_t i = 0; !rc && i < d->n_files; i++) rc = prep_stream_file(&st, &d->files[i], buf, e);
    for (int s = 0; !rc && s < SPLIT_COUNT; s++)
        if (w[s].fd >= 0) rc = prep_writer_close(&w[s], e);
    for (int s = 0; !rc && s < SPLIT_COUNT; s++)
        if (w[s].total != d->split_bytes[s] || w[s].next != d->shards[s])
            rc = err_set(e, ERR_INTERNAL,
                         "domain '%s' %s: wrote %llu tokens in %llu shards, planned %llu in %llu",
                         d->name, dataset_split_name(s), (unsigned long long)w[s].total,
                         (unsigned long long)w[s].next, (unsigned long long)d->split_bytes[s],
                         (unsigned long long)d->shards[s]);
    for (int s = 0; s < SPLIT_COUNT; s++) prep_writer_abort(&w[s]);
    return rc;
}

/* ---- output: summary lines and dataset.yaml ------------------------------------------- */

static void prep_report(const prep_opts *o, const prep_dom *d) {
    if (!o->report) return;
    FILE *f = o->report;
    fprintf(f, "%s: %zu file%s (%llu empty", d->name, d->n_files, prep_plural(d->n_files),
            (unsigned long long)d->n_empty);
    if (d->n_skipped)
        fprintf(f, ", %llu symlink%s/special file%s skipped", (unsigned long long)d->n_skipped,
                prep_plural(d->n_skipped), prep_plural(d->n_skipped));
    fprintf(f, "), %llu tokens in %llu block%s of %llu bytes:", (unsigned long long)d->bytes,
            (unsigned long long)d->n_blocks, prep_plural(d->n_blocks),
            (unsigned long long)o->block_bytes);
    for (int s = 0; s < SPLIT_COUNT; s++) {
        if (s == SPLIT_TEST && o->split[SPLIT_TEST] <= 0) continue;
        fprintf(f, "%s %s %llu (%llu block%s, %llu shard%s)", s ? "," : "",
                dataset_split_name(s), (unsigned long long)d->split_bytes[s],
                (unsigned long long)d->split_blocks[s], prep_plural(d->split_blocks[s]),
                (unsigned long long)d->shards[s], prep_plural(d->shards[s]));
    }
    for (int i = 0; i < d->n_moved; i++)
        fprintf(f, "; the hash gave %s no block, so block %llu moved there from %s",
                dataset_split_name(d->moved_to[i]), (unsigned long long)d->moved[i],
                dataset_split_name(d->moved_from[i]));
    fputc('\n', f);
    fflush(f);
}

static int prep_write_yaml(const prep_opts *o, const prep_dom *doms, int n_doms,
                           const char *path, tdm_err *e) {
    char header[400];
    snprintf(header, sizeof header,
             "# dataset written by tandem prep: byte-level tokens (each byte one token), files\n"
             "# in sorted path order, each non-empty file followed by '\\n', cut into blocks of\n"
             "# %llu bytes split %g/%g/%g by Philox with seed %llu.\n",
             (unsigned long long)o->block_bytes, o->split[0], o->split[1], o->split[2],
             (unsigned long long)o->seed);
    dataset_yaml_domain yd[DATASET_MAX_DOMAINS];
    for (int m = 0; m < n_doms; m++) {
        yd[m].name = doms[m].name;
        snprintf(yd[m].comment, sizeof yd[m].comment, "%zu files, %llu tokens", doms[m].n_files,
                 (unsigned long long)doms[m].bytes);
    }
    return dataset_write_yaml(path, header, PREP_VOCAB, yd, n_doms, o->split[SPLIT_TEST] > 0, e);
}

/* ---- the run --------------------------------------------------------------------------- */

int prep_run(const prep_opts *o, tdm_err *e) {
    prep_dom doms[DATASET_MAX_DOMAINS];
    memset(doms, 0, sizeof doms);
    int n_doms = 0, *dom_of = NULL;
    char *out_canon = NULL, *yaml = NULL;
    unsigned char *buf = NULL;
    prep_writer *w = NULL;
    int rc = prep_check_opts(o, e);
    if (!rc) {
        dom_of = malloc((size_t)o->n_inputs * sizeof *dom_of);
        out_canon = prep_canon(o->out);
        yaml = prep_join(o->out, "dataset.yaml");
        if (!dom_of || !yaml) rc = prep_oom(e);
        else if (!out_canon)
            rc = err_sys(e, ERR_USAGE, errno, "cannot resolve output directory %s", o->out);
    }
    if (!rc) rc = prep_group(o, doms, &n_doms, dom_of, e);
    /* Every check before the first write, so a refused run leaves nothing behind. */
    for (int i = 0; !rc && i < o->n_inputs; i++)
        rc = prep_list_input(&doms[dom_of[i]], o->inputs[i].path, out_canon, e);
    for (int m = 0; !rc && m < n_doms; m++)
        if (doms[m].n_files > 1)
            qsort(doms[m].files, doms[m].n_files, sizeof *doms[m].files, prep_cmp_file);
    if (!rc) rc = prep_check_duplicates(doms, n_doms, e);
    for (int m = 0; !rc && m < n_doms; m++) rc = prep_plan(o, &doms[m], e);
    for (int m = 0; !rc && m < n_doms; m++) {
        doms[m].dir = prep_join(o->out, doms[m].name);
        rc = doms[m].dir ? prep_check_stale(&doms[m], e) : prep_oom(e);
    }
    if (!rc) {
        buf = malloc(PREP_READ_BYTES);
        w = malloc(SPLIT_COUNT * sizeof *w);
        if (!buf || !w) rc = prep_oom(e);
    }
    /* From here on the output changes: first retire the old description. */
    if (!rc && unlink(yaml) != 0 && errno != ENOENT)
        rc = err_sys(e, ERR_USAGE, errno, "cannot remove the old %s", yaml);
    for (int m = 0; !rc && m < n_doms; m++) {
        rc = prep_domain(o, &doms[m], w, buf, e);
        if (!rc) prep_report(o, &doms[m]);
    }
    if (!rc) rc = prep_write_yaml(o, doms, n_doms, yaml, e);
    for (int m = 0; m < n_doms; m++) prep_dom_free(&doms[m]);
    free(dom_of);
    free(out_canon);
    free(yaml);
    free(buf);
    free(w);
    if (rc && e) err_prefix(e, "prep: ");
    return rc;
}
