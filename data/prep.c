/* prep.c — documents into byte-level train/val/test shards behind `tandem prep`: the
 * plan (two passes), the document split, the encoder, the shard writer, the summary. */
#include "data/prep.h"

#include <dirent.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/docread.h"
#include "data/prep_encode.h"
#include "data/shard.h"
#include "util/fileio.h"
#include "util/outfile.h"
#include "util/term.h"
#include "util/rng.h"

/* Tokens are written from host uint16/uint32 values, which is only llm.c's little-endian format
 * on a little-endian host (as data/shard.c requires too). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data/prep.c writes little-endian shards from host integers; port it before building here"
#endif

#define PREP_WRITE_TOKENS (1u << 18) /* per-split token buffer (512 KiB or 1 MiB) */


/* ---- options and the document split ------------------------------------------------- */

void prep_opts_init(prep_opts *o) {
    memset(o, 0, sizeof *o);
    o->split[SPLIT_TRAIN] = 0.9;
    o->split[SPLIT_VAL] = 0.05;
    o->split[SPLIT_TEST] = 0.05;
    o->text_field = PREP_DEFAULT_TEXT_FIELD;
    o->shard_tokens = PREP_DEFAULT_SHARD_TOKENS;
    o->seed = PREP_DEFAULT_SEED;
    o->report = stdout;
    o->warnings = stderr;
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

uint32_t prep_domain_key(const char *name) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

static double prep_doc_u(uint64_t seed, uint32_t key, uint64_t doc) {
    rng_stream r;
    rng_stream_init(&r, seed, PREP_RNG_PURPOSE, key, (uint32_t)doc, (uint32_t)(doc >> 32));
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

int prep_doc_split(uint64_t seed, const char *domain, uint64_t doc, const double f[3]) {
    return prep_split_of_u(prep_doc_u(seed, prep_domain_key(domain), doc), f);
}

/* ---- documents to tokens: the one place a tokenizer plugs in -------------------------- */

/* A growable token vector (what a tokenizer's encode appends to). */
typedef tok_ids prep_toks;

static int prep_oom(tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "out of memory");
}

/* Sets out to the tokens of a piece of a document's text that are final; `end` closes
 * the document and adds the end-of-text separator. Byte-level (x->k->t NULL): each byte
 * is its own token and the separator is the byte PREP_SEPARATOR, so pieces encode
 * independently. With a tokenizer (prep_encode.c) the pieces are buffered and encoded
 * at safe cuts, the result being tokenizer_encode of the whole text, then its end-of-text
 * id. Everything downstream (counts, split, shards) sees only tokens, and both passes
 * encode through here, so they count the same tokens. */
static int prep_encode(prep_enc *x, const char *p, size_t n, int end, prep_toks *out,
                       tdm_err *e) {
    if (x->k->t) return end ? prep_enc_end(x, out, e) : prep_enc_text(x, p, n, out, e);
    size_t need = n + (end != 0);
    if (need > out->cap) {
        size_t nc = out->cap ? out->cap : 4096;
        while (nc < need) nc *= 2;
        uint32_t *nv = realloc(out->v, nc * sizeof *nv);
        if (!nv) return prep_oom(e);
        out->v = nv;
        out->cap = nc;
    }
    for (size_t i = 0; i < n; i++) out->v[i] = (unsigned char)p[i];
    if (end) out->v[n] = PREP_SEPARATOR;
    out->n = need;
    return 0;
}

/* ---- domains ---------------------------------------------------------------------------- */

typedef struct prep_filestat {
    uint64_t docs, tokens; /* from the first pass; docs 0: the file is not read again */
} prep_filestat;

typedef struct prep_dom {
    const char *name;
    uint32_t key;
    textsrc_list list;
    prep_filestat *fs; /* per file of list */
    const char **ex;   /* its excludes */
    int n_ex;
    const char *field; /* its text field (--text-field NAME=FIELD), or the run's */
    prep_stats st;
    uint64_t shown[TEXTSRC_N_REASONS]; /* issues printed per reason */
    uint64_t moved[SPLIT_COUNT];       /* small-domain rescues: document moved[i] */
    int moved_to[SPLIT_COUNT], moved_from[SPLIT_COUNT];
    char *dir;
} prep_dom;

static void prep_dom_free(prep_dom *d) {
    textsrc_list_free(&d->list);
    free(d->fs);
    free(d->ex);
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

static const char *prep_plural(uint64_t n) {
    return n == 1 ? "" : "s";
}

static int prep_check_opts(const prep_opts *o, tdm_err *e) {
    if (!o->out || !o->out[0])
        return err_set(e, ERR_USAGE, "no output directory (--out DIR)");
    if (o->n_inputs < 1 || !o->inputs)
        return err_set(e, ERR_USAGE, "no input: give at least one --domain NAME=PATH");
    if (!o->text_field || !o->text_field[0])
        return err_set(e, ERR_USAGE, "empty JSON text field name (--text-field)");
    int rc = prep_check_split(o->split, e);
    if (rc) return rc;
    if (o->shard_tokens < PREP_MIN_SHARD_TOKENS || o->shard_tokens > SHARD_MAX_TOKENS)
        return err_set(e, ERR_USAGE, "shard tokens %llu is outside %d..%u (--shard-tokens; a training window of "
                       "train.seq + 1 tokens lies within one shard)",
                       (unsigned long long)o->shard_tokens, PREP_MIN_SHARD_TOKENS, SHARD_MAX_TOKENS);
    struct stat st;
    if (stat(o->out, &st) == 0 && !S_ISDIR(st.st_mode))
        return err_set(e, ERR_USAGE,
                       "output %s exists and is not a directory; choose another --out", o->out);
    return 0;
}

/* Maps each input to its domain (first appearance order) and gives each domain its
 * excludes; names are checked here. */
static int prep_group(const prep_opts *o, prep_dom *doms, int *n_doms, int *dom_of,
                      tdm_err *e) {
    for (int i = 0; i < o->n_inputs; i++) {
        const char *n = o->inputs[i].name, *p = o->inputs[i].path;
        if (!n || !dataset_name_ok(n) || !strcmp(n, ".") || !strcmp(n, ".."))
            return err_set(e, ERR_USAGE,
                           "domain name '%s' must be 1..%d characters of [A-Za-z0-9_.-] "
                           "(and not . or ..)",
                           n ? n : "", DATASET_NAME_MAX);
        if (dataset_name_reserved(n))
            return err_set(e, ERR_USAGE, "domain name '%s' " DATASET_RESERVED_WHY, n);
        if (dataset_folder_name_bad(n))
            return err_set(e, ERR_USAGE, "domain name '%s' %s", n, dataset_folder_name_bad(n));
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
            doms[m].key = prep_domain_key(n);
            doms[m].st.name = n;
            (*n_doms)++;
        }
        dom_of[i] = m;
    }
    for (int m = 0; m < *n_doms; m++) doms[m].field = o->text_field;
    for (int i = 0; i < o->n_text_fields; i++) {
        const char *n = o->text_fields[i].name, *f = o->text_fields[i].path;
        int m = 0;
        while (m < *n_doms && strcmp(doms[m].name, n ? n : "")) m++;
        if (m == *n_doms)
            return err_set(e, ERR_USAGE,
                           "--text-field '%s=%s': no --domain is named '%s' (give NAME=FIELD for a domain of "
                           "this run, or FIELD alone for all)",
                           n ? n : "", f ? f : "", n ? n : "");
        if (!f || !f[0]) return err_set(e, ERR_USAGE, "--text-field for domain '%s': empty field name", n);
        doms[m].field = f;
    }
    for (int i = 0; i < o->n_excludes; i++) {
        const char *n = o->excludes[i].name, *g = o->excludes[i].path;
        int m = 0;
        while (m < *n_doms && strcmp(doms[m].name, n ? n : "")) m++;
        if (m == *n_doms)
            return err_set(e, ERR_USAGE,
                           "--exclude '%s=%s': no --domain is named '%s' (give NAME=GLOB for a "
                           "domain of this run)",
                           n ? n : "", g ? g : "", n ? n : "");
        if (!g || !g[0]) return err_set(e, ERR_USAGE, "--exclude for domain '%s': empty glob", n);
        const char **nx = realloc(doms[m].ex, (size_t)(doms[m].n_ex + 1) * sizeof *nx);
        if (!nx) return prep_oom(e);
        nx[doms[m].n_ex++] = g;
        doms[m].ex = nx;
    }
    return 0;
}

static int prep_cmp_file(const void *a, const void *b) {
    return strcmp(((const textsrc_file *)a)->path, ((const textsrc_file *)b)->path);
}

typedef struct prep_ref {
    const textsrc_file *f;
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
    for (int m = 0; m < n_doms; m++) n += doms[m].list.n;
    if (n < 2) return 0;
    prep_ref *r = malloc(n * sizeof *r);
    if (!r) return prep_oom(e);
    size_t k = 0;
    for (int m = 0; m < n_doms; m++)
        for (size_t i = 0; i < doms[m].list.n; i++) r[k++] = (prep_ref){&doms[m].list.files[i], m};
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
    return nd == prep_digits(d->st.shards[s]) && v < d->st.shards[s];
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
 * the rename onto its name and an fsync of the directory. The format is the one
 * shard_write_tokens picks for the vocabulary (shard_width_for): uint16 tokens under
 * SHARD_MAGIC/SHARD_VERSION up to 65536, else uint32 under SHARD_MAGIC_U32/_VERSION_U32. */
typedef struct prep_writer {
    const char *dir;
    int split, digits;
    int width; /* bytes per token: 2 or 4 */
    uint64_t shard_tokens;
    uint64_t next;     /* number of the next shard to open */
    uint64_t in_shard; /* tokens in the open shard */
    uint64_t total;    /* tokens written so far */
    int fd;            /* open shard, or -1 */
    char *tmp, *final;
    int guard;         /* outfile_guard_add's slot for tmp: a stop signal removes it */
    size_t nbuf;
    union {
        uint16_t u16[PREP_WRITE_TOKENS];
        uint32_t u32[PREP_WRITE_TOKENS];
    } buf;
} prep_writer;

static void prep_writer_init(prep_writer *w, const char *dir, int split, uint64_t shards,
                             uint64_t shard_tokens, uint32_t vocab) {
    w->dir = dir;
    w->split = split;
    w->width = shard_width_for((int)vocab);
    w->digits = prep_digits(shards);
    w->shard_tokens = shard_tokens;
    w->next = w->in_shard = w->total = 0;
    w->fd = -1;
    w->tmp = w->final = NULL;
    w->guard = -1;
    w->nbuf = 0;
}

/* Drops an unfinished shard (its temporary file) after an error. */
static void prep_writer_abort(prep_writer *w) {
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    outfile_guard_drop(w->guard);
    w->guard = -1;
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
    /* a SIGTERM or SIGINT removes it (before: three shard-sized temporaries were left):
     * guarded before it is created (outfile.h says why) */
    for (int tries = 0; tries < 100 && w->fd < 0; tries++) {
        snprintf(w->tmp, tl, "%s.tmp.%ld.%u", w->final, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        w->guard = outfile_guard_add(w->tmp);
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        int err = errno;
        if (w->fd < 0) outfile_guard_drop(w->guard), w->guard = -1;
        errno = err;
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
    if (w->nbuf && fileio_write_all(w->fd, &w->buf, w->nbuf * (size_t)w->width) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", w->final, w->tmp);
    w->nbuf = 0;
    return 0;
}

/* Completes the open shard: header, fsync, rename onto its name, fsync of the directory. */
static int prep_writer_close(prep_writer *w, tdm_err *e) {
    int rc = prep_writer_flush(w, e);
    if (rc) return rc;
    int32_t header[SHARD_HEADER_INTS] = {w->width == 2 ? SHARD_MAGIC : SHARD_MAGIC_U32,
                                         w->width == 2 ? SHARD_VERSION : SHARD_VERSION_U32,
                                         (int32_t)w->in_shard};
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
    outfile_guard_drop(w->guard);
    w->guard = -1;
    free(w->tmp);
    w->tmp = NULL;
    if (fileio_fsync_parent(w->final) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync its directory", w->final);
    free(w->final);
    w->final = NULL;
    return 0;
}

/* Appends n tokens (each < the vocab, checked by the caller), opening and completing
 * shards as they fill. */
static int prep_writer_put(prep_writer *w, const uint32_t *p, size_t n, tdm_err *e) {
    while (n > 0) {
        int rc = 0;
        if (w->fd < 0 && (rc = prep_writer_open(w, e))) return rc;
        uint64_t take = n, room = w->shard_tokens - w->in_shard;
        if (take > room) take = room;
        if (take > PREP_WRITE_TOKENS - w->nbuf) take = PREP_WRITE_TOKENS - w->nbuf;
        if (w->width == 2)
            for (uint64_t i = 0; i < take; i++) w->buf.u16[w->nbuf + i] = (uint16_t)p[i];
        else
            memcpy(w->buf.u32 + w->nbuf, p, take * sizeof *p);
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


/* ---- what is left out: counted always, the first few of each reason printed ------------ */

typedef struct prep_pass prep_pass;

/* Counts one left-out thing of the domain and prints it while few of its reason were. */
static void prep_count_issue(const prep_opts *o, prep_dom *d, int reason, const char *path,
                             uint64_t line, const char *what) {
    d->st.skipped[reason]++;
    /* excluded and empty files are choices or harmless: counted only; a symlink that was
     * not followed is named (a user who linked a corpus in expects it read) */
    if (reason == TEXTSRC_EXCLUDED || reason == TEXTSRC_EMPTY) return;
    if (!o->warnings || d->shown[reason] >= PREP_ISSUES_SHOWN) return;
    d->shown[reason]++;
    /* the file's name as found (a crawled corpus names files anything): no escapes */
    fprintf(o->warnings, "prep: %s: ", d->name);
    term_text(o->warnings, path);
    if (line) fprintf(o->warnings, ":%" PRIu64, line);
    fputs(": ", o->warnings);
    term_text(o->warnings, what);
    fputc('\n', o->warnings);
}

typedef struct prep_listctx {
    const prep_opts *o;
    prep_dom *d;
} prep_listctx;

static void prep_list_issue(void *ctx, int reason, const char *path, uint64_t line,
                            const char *what) {
    prep_listctx *c = ctx;
    prep_count_issue(c->o, c->d, reason, path, line, what);
}

/* "2 binary, 1 bad JSON" for the reasons counted (n of them), into buf. */
static void prep_reasons(const prep_stats *st, char *buf, size_t cap, int *n) {
    size_t o = 0;
    buf[0] = '\0';
    *n = 0;
    for (int r = 0; r < TEXTSRC_N_REASONS; r++) {
        if (!st->skipped[r]) continue;
        int k = snprintf(buf + o, cap - o, "%s%" PRIu64 " %s", *n ? ", " : "", st->skipped[r],
                         textsrc_reason_name(r));
        if (k < 0 || (size_t)k >= cap - o) break;
        o += (size_t)k;
        (*n)++;
    }
}

/* ---- the passes over a domain's files ---------------------------------------------------- */

/* The counters a pass keeps; restored to a file's start when the file is dropped. */
typedef struct prep_count {
    uint64_t k; /* documents so far = the next document's index */
    uint64_t text_bytes, tokens, split_docs[SPLIT_COUNT], split_tokens[SPLIT_COUNT];
} prep_count;

struct prep_pass {
    const prep_opts *o;
    prep_dom *d;
    int mode; /* PREP_SCAN: counts and reports; PREP_RECOUNT: counts; PREP_WRITE: writes */
    prep_count c;
    prep_toks toks;
    prep_enc enc;            /* the open document's encoder state (enc.k: the tokenizer) */
    prep_batch batch;        /* short documents that ended, not yet encoded (threads != 1) */
    int open, cur;           /* a document is open, and its split */
    uint64_t doc_tokens, doc_bytes;
    prep_writer *w;          /* PREP_WRITE: one per split */
    size_t file;             /* index of the file being read */
    uint64_t read, next_mark; /* progress: bytes read (scan) or tokens written (write) */
};

enum { PREP_SCAN, PREP_RECOUNT, PREP_WRITE };

static int prep_assigned(const prep_dom *d, uint64_t seed, const double f[3], uint64_t k) {
    for (int i = 0; i < d->st.n_moved; i++)
        if (d->moved[i] == k) return d->moved_to[i];
    return prep_split_of_u(prep_doc_u(seed, d->key, k), f);
}

static void prep_progress_line(prep_pass *p) {
    const prep_opts *o = p->o;
    if (!o->progress || !o->progress_bytes || p->read < p->next_mark) return;
    const prep_dom *d = p->d;
    if (p->mode == PREP_SCAN)
        fprintf(o->progress,
                "prep: %s: reading: %" PRIu64 " bytes read, file %zu of %zu, %" PRIu64
                " documents so far\n",
                d->name, p->read, p->file + 1, d->list.n, p->c.k);
    else if (p->mode == PREP_WRITE)
        fprintf(o->progress,
                "prep: %s: writing: %" PRIu64 " of %" PRIu64 " tokens (%.0f%%); train %" PRIu64
                ", val %" PRIu64 ", test %" PRIu64 " so far\n",
                d->name, p->read, d->st.tokens, 100.0 * (double)p->read / (double)d->st.tokens,
                p->w[SPLIT_TRAIN].total, p->w[SPLIT_VAL].total, p->w[SPLIT_TEST].total);
    fflush(o->progress);
    p->next_mark = (p->read / o->progress_bytes + 1) * o->progress_bytes;
}

static void prep_on_read(void *ctx, uint64_t bytes) {
    prep_pass *p = ctx;
    if (p->mode != PREP_SCAN) return;
    p->read += bytes;
    prep_progress_line(p);
}

/* Tokens of the open document: counted, and written to its split in PREP_WRITE. */
static int prep_put(prep_pass *p, const prep_toks *t, tdm_err *e) {
    p->doc_tokens += t->n;
    if (p->mode != PREP_WRITE || !t->n) return 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i] >= p->enc.k->vocab)
            return err_set(e, ERR_INTERNAL, "token %u >= vocab %u", (unsigned)t->v[i],
                           (unsigned)p->enc.k->vocab);
    int rc = prep_writer_put(&p->w[p->cur], t->v, t->n, e);
    p->read += t->n;
    prep_progress_line(p);
    return rc;
}

/* Encodes the batched documents and emits them in order, as prep_on_end would have; the
 * open document's split and token count are kept. */
static int prep_flush(prep_pass *p, tdm_err *e) {
    prep_batch *b = &p->batch;
    if (!b->n) return 0;
    int rc = prep_batch_encode(b, p->enc.k, e);
    if (rc == ERR_USAGE) /* a piece too long to encode: the batch holds this file's documents */
        err_prefix(e, "domain '%s': %s: ", p->d->name, p->d->list.files[p->file].path);
    int cur = p->cur;
    uint64_t doc_tokens = p->doc_tokens;
    for (size_t i = 0; !rc && i < b->n; i++) {
        p->cur = b->split[i];
        p->doc_tokens = 0;
        rc = prep_put(p, &b->ids[i], e);
        p->c.tokens += p->doc_tokens;
        p->c.split_tokens[p->cur] += p->doc_tokens;
    }
    p->cur = cur;
    p->doc_tokens = doc_tokens;
    prep_batch_clear(b);
    return rc;
}

static int prep_on_text(void *ctx, const char *s, size_t n, tdm_err *e) {
    prep_pass *p = ctx;
    if (!p->open) {
        p->open = 1;
        p->cur = prep_assigned(p->d, p->o->seed, p->o->split, p->c.k);
        p->doc_tokens = p->doc_bytes = 0;
    }
    p->doc_bytes += n;
    int rc = prep_encode(&p->enc, s, n, 0, &p->toks, e);
    if (rc == ERR_USAGE) /* a document too long to hold whole: name where it is */
        err_prefix(e, "domain '%s': %s: ", p->d->name, p->d->list.files[p->file].path);
    if (!rc && p->enc.too_long) return 0; /* left out at its end */
    if (!rc && p->toks.n) rc = prep_flush(p, e); /* earlier documents' tokens come first */
    return rc ? rc : prep_put(p, &p->toks, e);
}

static int prep_on_end(void *ctx, int keep, tdm_err *e) {
    prep_pass *p = ctx;
    if (!p->open) return 0;
    p->open = 0;
    if (p->enc.too_long) { /* no place to cut it before held_max: left out, nothing written */
        if (keep && p->mode == PREP_SCAN) {
            char what[200];
            snprintf(what, sizeof what, "a document of more than %zu bytes with no place to cut it for the "
                     "tokenizer (it would be held whole): left out; split it", p->enc.k->held_max);
            prep_count_issue(p->o, p->d, TEXTSRC_TOO_LONG, p->d->list.files[p->file].path, 0, what);
        }
        keep = 0;
    }
    if (!keep) {
        prep_enc_drop(&p->enc);
        if (p->mode == PREP_WRITE && p->doc_tokens) /* the scan kept it: the file changed */
            return err_set(e, ERR_USAGE,
                           "domain '%s': %s changed since it was first read (a document "
                           "became invalid); rerun when the inputs are stable",
                           p->d->name, p->d->list.files[p->file].path);
        return 0;
    }
    int rc;
    if (p->enc.k->t && p->enc.k->threads != 1 && !p->enc.started) {
        /* a short document, whole in the buffer: encoded with others on many threads, its
         * tokens counted when the batch is (prep_flush) */
        rc = prep_batch_add(&p->batch, p->enc.buf, p->enc.len, p->cur, e);
        prep_enc_drop(&p->enc);
        if (!rc && p->batch.bytes >= PREP_BATCH_BYTES) rc = prep_flush(p, e);
        if (rc) return rc;
        p->c.k++;
        p->c.text_bytes += p->doc_bytes;
        p->c.split_docs[p->cur]++;
        return 0;
    }
    rc = prep_encode(&p->enc, "", 0, 1, &p->toks, e);
    if (rc == ERR_USAGE) err_prefix(e, "domain '%s': %s: ", p->d->name, p->d->list.files[p->file].path);
    if (!rc) rc = prep_flush(p, e);
    if (!rc) rc = prep_put(p, &p->toks, e);
    if (rc) return rc;
    p->c.k++;
    p->c.text_bytes += p->doc_bytes;
    p->c.tokens += p->doc_tokens;
    p->c.split_docs[p->cur]++;
    p->c.split_tokens[p->cur] += p->doc_tokens;
    return 0;
}

static void prep_on_issue(void *ctx, int reason, const char *path, uint64_t line,
                          const char *what) {
    prep_pass *p = ctx;
    if (p->mode == PREP_SCAN) prep_count_issue(p->o, p->d, reason, path, line, what);
}

/* One pass over the domain's files. The scan records each file's documents and tokens;
 * the later passes read only files that gave documents and must find the same. */
static int prep_pass_run(prep_pass *p, tdm_err *e) {
    prep_dom *d = p->d;
    docread_sink sink = {p, prep_on_text, prep_on_end, {p, prep_on_issue}, prep_on_read};
    p->next_mark = p->o->progress_bytes;
    int rc = 0;
    for (size_t i = 0; !rc && i < d->list.n; i++) {
        if (p->mode != PREP_SCAN && d->fs[i].docs == 0) continue;
        p->file = i;
        prep_count before = p->c;
        int dropped = 0;
        rc = docread_file(&d->list.files[i], d->field, &sink, &dropped, e);
        if (!rc) rc = prep_flush(p, e); /* the file's documents all counted */
        if (rc) break;
        uint64_t docs = p->c.k - before.k, tokens = p->c.tokens - before.tokens;
        if (p->mode == PREP_SCAN) {
            if (dropped) p->c = before, docs = tokens = 0;
            d->fs[i] = (prep_filestat){docs, tokens};
        } else if (dropped || docs != d->fs[i].docs || tokens != d->fs[i].tokens) {
            rc = err_set(e, ERR_USAGE,
                         "domain '%s': %s changed since it was first read (%" PRIu64
                         " documents and %" PRIu64 " tokens then, %" PRIu64 " and %" PRIu64
                         " now); rerun when the inputs are stable",
                         d->name, d->list.files[i].path, d->fs[i].docs, d->fs[i].tokens, docs,
                         tokens);
        }
    }
    return rc;
}

/* ---- the plan: documents per split, the small-domain rescue, shard counts ------------- */

static uint64_t prep_ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

/* Moves a document into each split with a fraction > 0 that the hash gave none. */
static int prep_rescue(const prep_opts *o, prep_dom *d, uint64_t cnt[SPLIT_COUNT], tdm_err *e) {
    const double *f = o->split;
    static const int order[SPLIT_COUNT] = {SPLIT_VAL, SPLIT_TEST, SPLIT_TRAIN};
    for (int i = 0; i < SPLIT_COUNT; i++) {
        int s = order[i];
        if (f[s] <= 0 || cnt[s] > 0) continue;
        double lo, hi, best_d = INFINITY;
        prep_interval(f, s, &lo, &hi);
        uint64_t best = 0;
        int best_from = -1;
        for (uint64_t k = 0; k < d->st.docs; k++) {
            int t = prep_assigned(d, o->seed, f, k);
            if (cnt[t] < 2) continue; /* the donor keeps a document */
            double u = prep_doc_u(o->seed, d->key, k);
            double dist = u < lo ? lo - u : u >= hi ? u - hi : 0;
            if (dist < best_d) best_d = dist, best = k, best_from = t;
        }
        if (best_from < 0) /* cannot happen: docs >= required */
            return err_set(e, ERR_INTERNAL, "domain '%s': no document to move to %s", d->name,
                           dataset_split_name(s));
        int n = d->st.n_moved++;
        d->moved[n] = best;
        d->moved_from[n] = best_from;
        d->moved_to[n] = s;
        cnt[best_from]--;
        cnt[s]++;
    }
    return 0;
}

/* The scan, then the plan: the counts per split and their shards. */
static int prep_plan(const prep_opts *o, const prep_tok *k, prep_dom *d, tdm_err *e) {
    prep_stats *st = &d->st;
    st->files = d->list.n;
    for (size_t i = 0; i < d->list.n; i++) st->input_bytes += d->list.files[i].size;
    if (d->list.n && !(d->fs = calloc(d->list.n, sizeof *d->fs))) return prep_oom(e);
    prep_pass p = {.o = o, .d = d, .mode = PREP_SCAN, .enc = {.k = k}};
    int rc = prep_pass_run(&p, e);
    for (int r = 0; !rc && o->warnings && r < TEXTSRC_N_REASONS; r++)
        if (d->shown[r] && st->skipped[r] > d->shown[r])
            fprintf(o->warnings, "prep: %s: ... and %" PRIu64 " more left out as %s\n", d->name,
                    st->skipped[r] - d->shown[r], textsrc_reason_name(r));
    if (rc) {
        free(p.toks.v);
        prep_enc_free(&p.enc);
        prep_batch_free(&p.batch);
        return rc;
    }
    st->docs = p.c.k;
    for (size_t i = 0; i < d->list.n; i++) st->files_used += d->fs[i].docs > 0;
    int required = 2 + (o->split[SPLIT_TEST] > 0);
    if (st->docs < (uint64_t)required) {
        char why[400];
        int n;
        prep_reasons(st, why, sizeof why, &n);
        free(p.toks.v);
        prep_enc_free(&p.enc);
        prep_batch_free(&p.batch);
        return err_set(e, ERR_USAGE,
                       "domain '%s' has %" PRIu64 " document%s from %zu file%s%s%s (left out: "
                       "%s); %s each need one: %s",
                       d->name, st->docs, prep_plural(st->docs), d->list.n,
                       prep_plural(d->list.n), d->list.n == 1 ? " " : "",
                       d->list.n == 1 ? d->list.files[0].path : "", n ? why : "nothing",
                       required == 3 ? "train, val and test" : "train and val",
                       st->docs == 0 ? "give it text files, or .jsonl, .json or .parquet files with the "
                                       "field (Parquet: the string column) --text-field names (see the "
                                       "messages above)"
                       : required == 3 ? "add documents, or give --split with test 0"
                                       : "add documents (--split gives test 0 already)");
    }
    uint64_t cnt[SPLIT_COUNT];
    memcpy(cnt, p.c.split_docs, sizeof cnt);
    rc = prep_rescue(o, d, cnt, e);
    if (!rc && st->n_moved) {
        /* the moved documents' tokens are known only by reading them again; small
         * domains only (a large one gives every split documents) */
        prep_pass again = {.o = o, .d = d, .mode = PREP_RECOUNT, .toks = p.toks, .enc = p.enc,
                           .batch = p.batch};
        rc = prep_pass_run(&again, e);
        p.toks = again.toks;
        p.enc = again.enc;
        p.batch = again.batch;
        p.c = again.c;
    }
    free(p.toks.v);
    prep_enc_free(&p.enc);
    prep_batch_free(&p.batch);
    if (rc) return rc;
    st->text_bytes = p.c.text_bytes;
    st->tokens = p.c.tokens;
    for (int s = 0; s < SPLIT_COUNT; s++) {
        st->split_docs[s] = p.c.split_docs[s];
        st->split_tokens[s] = p.c.split_tokens[s];
        st->shards[s] = prep_ceil_div(st->split_tokens[s], o->shard_tokens);
    }
    return 0;
}

/* ---- writing a domain ------------------------------------------------------------------ */

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


static int prep_domain(const prep_opts *o, const prep_tok *k, prep_dom *d, prep_writer *w,
                       tdm_err *e) {
    int rc = prep_make_dir(d->dir, e);
    if (rc) return rc;
    for (int s = 0; s < SPLIT_COUNT; s++)
        prep_writer_init(&w[s], d->dir, s, d->st.shards[s], o->shard_tokens, k->vocab);
    prep_pass p = {.o = o, .d = d, .mode = PREP_WRITE, .w = w, .enc = {.k = k}};
    rc = prep_pass_run(&p, e);
    free(p.toks.v);
    prep_enc_free(&p.enc);
    prep_batch_free(&p.batch);
    for (int s = 0; !rc && s < SPLIT_COUNT; s++)
        if (w[s].fd >= 0) rc = prep_writer_close(&w[s], e);
    for (int s = 0; !rc && s < SPLIT_COUNT; s++)
        if (w[s].total != d->st.split_tokens[s] || w[s].next != d->st.shards[s])
            rc = err_set(e, ERR_INTERNAL,
                         "domain '%s' %s: wrote %llu tokens in %llu shards, planned %llu in %llu",
                         d->name, dataset_split_name(s), (unsigned long long)w[s].total,
                         (unsigned long long)w[s].next, (unsigned long long)d->st.split_tokens[s],
                         (unsigned long long)d->st.shards[s]);
    for (int s = 0; s < SPLIT_COUNT; s++) prep_writer_abort(&w[s]);
    return rc;
}

/* ---- output: the summary table and dataset.yaml ---------------------------------------- */

/* One row per domain, then per domain what was left out and any rescue. */
static void prep_report(const prep_opts *o, const prep_dom *doms, int n_doms) {
    if (!o->report) return;
    FILE *f = o->report;
    int wn = 6;
    for (int m = 0; m < n_doms; m++)
        if ((int)strlen(doms[m].name) > wn) wn = (int)strlen(doms[m].name);
    fprintf(f, "%-*s %7s %9s %13s %13s", wn, "domain", "files", "documents", "text bytes",
            "tokens");
    int last = o->split[SPLIT_TEST] > 0 ? SPLIT_TEST : SPLIT_VAL; /* no padding after it */
    for (int s = 0; s <= last; s++)
        fprintf(f, "  %-*s%s", s == last ? 0 : 26, dataset_split_name(s),
                s == last ? " (documents/tokens/shards)" : "");
    fputc('\n', f);
    for (int m = 0; m < n_doms; m++) {
        const prep_stats *st = &doms[m].st;
        fprintf(f, "%-*s %7" PRIu64 " %9" PRIu64 " %13" PRIu64 " %13" PRIu64, wn, st->name,
                st->files_used, st->docs, st->text_bytes, st->tokens);
        for (int s = 0; s <= last; s++) {
            char cell[80];
            snprintf(cell, sizeof cell, "%" PRIu64 "/%" PRIu64 "/%" PRIu64, st->split_docs[s],
                     st->split_tokens[s], st->shards[s]);
            fprintf(f, "  %-*s", s == last ? 0 : 26, cell);
        }
        fputc('\n', f);
    }
    for (int m = 0; m < n_doms; m++) {
        const prep_dom *d = &doms[m];
        char why[400];
        int n;
        prep_reasons(&d->st, why, sizeof why, &n);
        fprintf(f, "%s: %" PRIu64 " of %" PRIu64 " file%s gave documents; left out: %s\n",
                d->name, d->st.files_used, d->st.files, prep_plural(d->st.files),
                n ? why : "nothing");
        for (int i = 0; i < d->st.n_moved; i++)
            fprintf(f, "%s: the hash gave %s no document, so document %" PRIu64
                       " moved there from %s\n",
                    d->name, dataset_split_name(d->moved_to[i]), d->moved[i],
                    dataset_split_name(d->moved_from[i]));
        /* whole documents go to one split each: with few or uneven ones a split can end far
         * from its share (a whole manual in val, a stub in test), and a run's figures on it
         * with it; said, not refused */
        for (int s = SPLIT_VAL; s <= last && d->st.tokens; s++) {
            double share = (double)d->st.split_tokens[s] / (double)d->st.tokens, asked = o->split[s];
            if (asked > 0 && (share > 3 * asked || share < asked / 3))
                fprintf(f, "%s: warning: %s holds %.1f%% of its tokens, against the %.1f%% asked: the domain's "
                           "documents are few or uneven (whole documents go to one split); its %s figures "
                           "rest on %s. More, smaller documents (or --split) even it out\n",
                        d->name, dataset_split_name(s), 100 * share, 100 * asked, dataset_split_name(s),
                        share > 3 * asked ? "text train does not have" : "little text");
        }
    }
    fflush(f);
}

static int prep_write_yaml(const prep_opts *o, const prep_tok *k, const prep_dom *doms,
                           int n_doms, const char *path, tdm_err *e) {
    char header[600];
    if (!k->t)
        snprintf(header, sizeof header,
                 "# dataset written by tandem prep: byte-level tokens (each byte one token), one\n"
                 "# document per text file or JSON record, each followed by '\\n', in sorted path\n"
                 "# order; documents split %g/%g/%g by Philox with seed %llu.\n",
                 o->split[0], o->split[1], o->split[2], (unsigned long long)o->seed);
    else
        snprintf(header, sizeof header,
                 "# dataset written by tandem prep: %s tokens (the tokenizer file's SHA-256\n"
                 "# below), one document per text file or JSON record, each followed by the\n"
                 "# end-of-text id %u, in sorted path order; documents split %g/%g/%g by Philox\n"
                 "# with seed %llu.\n",
                 tokenizer_kind(k->t), (unsigned)k->eot, o->split[0], o->split[1], o->split[2],
                 (unsigned long long)o->seed);
    dataset_yaml_domain yd[DATASET_MAX_DOMAINS];
    for (int m = 0; m < n_doms; m++) {
        yd[m].name = doms[m].name;
        snprintf(yd[m].comment, sizeof yd[m].comment, "%llu files, %llu documents, %llu tokens",
                 (unsigned long long)doms[m].st.files_used, (unsigned long long)doms[m].st.docs,
                 (unsigned long long)doms[m].st.tokens);
    }
    if (!k->t) /* byte-level: the file as before tokenizers, byte for byte */
        return dataset_write_yaml(path, header, PREP_VOCAB, yd, n_doms,
                                  o->split[SPLIT_TEST] > 0, e);
    dataset_yaml_meta meta = {(int)k->vocab, tokenizer_kind(k->t), tokenizer_digest(k->t),
                              (int)k->eot};
    return dataset_write_yaml_meta(path, header, &meta, yd, n_doms, o->split[SPLIT_TEST] > 0, e);
}

/* ---- the run --------------------------------------------------------------------------- */

/* Bytes of the regular files in dir (not below it): what the domain's new shards replace. */
static double prep_dir_bytes(const char *dir) {
    DIR *dp = opendir(dir);
    double n = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp))) {
        struct stat st;
        if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            n += (double)st.st_size;
    }
    if (dp) closedir(dp);
    return n;
}

/* Whether the planned shards fit the free space where --out goes (the shards they replace
 * counted as free): a corpus that cannot fit is refused before its first byte (before: a
 * small compressed file expanding to gigabytes filled the disk, then failed). */
static int prep_room(const prep_opts *o, const prep_tok *k, prep_dom *doms, int n_doms, tdm_err *e) {
    double need = 0, old = 0, per = k->vocab > 65536 ? 4.0 : 2.0;
    for (int m = 0; m < n_doms; m++) {
        need += per * (double)doms[m].st.tokens +
                SHARD_HEADER_BYTES * (3.0 + (double)doms[m].st.tokens / (double)(o->shard_tokens ? o->shard_tokens : 1));
        old += prep_dir_bytes(doms[m].dir);
    }
    char dir[PATH_MAX];
    struct statvfs fs;
    if (!fileio_existing_ancestor(o->out, dir) || statvfs(dir, &fs) != 0) return 0; /* the writes will say */
    double have = (double)fs.f_bavail * (double)fs.f_frsize + old;
    if (need <= have) return 0;
    return err_set(e, ERR_STORE, "the shards need %.2f GB and %s has %.2f GB free (with the shards they replace): "
                   "free some space, or give another --out", need / 1e9, o->out, have / 1e9);
}

/* Takes DIR/.tandem-prep.lock (made with DIR) for the writes: two preps or gen-corpus into
 * one --out at once would mix their shards under one description (before: both exit 0).
 * The descriptor, or -1 with e set. */
int prep_lock_out(const char *out, tdm_err *e) {
    char *path = prep_join(out, ".tandem-prep.lock");
    if (!path) return prep_oom(e), -1;
    /* the folder that cannot be made is the reason said (before: the lock file's ENOENT,
     * after its read-only retry, hid a permission denied on --out itself) */
    if (fileio_make_parents(path) != 0) {
        err_sys(e, ERR_USAGE, errno, "cannot create the folder %s (--out)", out);
        free(path);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    /* another user's lock file in a shared folder: a lock needs no write access to it */
    if (fd < 0 && errno == EACCES) {
        int err = errno;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT) errno = err; /* no lock there to share: the folder is not ours to write */
    }
    if (fd < 0) {
        err_sys(e, ERR_USAGE, errno, "cannot create %s", path);
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) { /* a file system without locks: unguarded, as before */
            free(path);
            return fd;
        }
        close(fd);
        if (err == EWOULDBLOCK)
            err_set(e, ERR_USAGE, "another tandem prep or gen-corpus is writing into %s (it holds %s): wait "
                    "for it to end, or give another --out", out, path);
        else
            err_sys(e, ERR_USAGE, err, "cannot lock %s", path);
        free(path);
        return -1;
    }
    free(path);
    return fd;
}

int prep_run(const prep_opts *o, tdm_err *e) {
    prep_dom doms[DATASET_MAX_DOMAINS];
    memset(doms, 0, sizeof doms);
    int n_doms = 0, *dom_of = NULL;
    char *out_canon = NULL, *yaml = NULL;
    prep_writer *w = NULL;
    int rc = prep_check_opts(o, e);
    if (!rc) {
        dom_of = malloc((size_t)o->n_inputs * sizeof *dom_of);
        out_canon = textsrc_canon(o->out);
        yaml = prep_join(o->out, "dataset.yaml");
        if (!dom_of || !yaml) rc = prep_oom(e);
        else if (!out_canon)
            rc = err_sys(e, ERR_USAGE, errno, "cannot resolve output directory %s", o->out);
    }
    if (!rc) rc = prep_group(o, doms, &n_doms, dom_of, e);
    /* Every check before the first write, so a refused run leaves nothing behind. */
    for (int i = 0; !rc && i < o->n_inputs; i++) {
        prep_dom *d = &doms[dom_of[i]];
        prep_listctx lc = {o, d};
        textsrc_issues is = {&lc, prep_list_issue};
        rc = textsrc_add(&d->list, d->name, o->inputs[i].path, d->ex, d->n_ex, out_canon, &is, e);
    }
    for (int m = 0; !rc && m < n_doms; m++)
        if (doms[m].list.n > 1)
            qsort(doms[m].list.files, doms[m].list.n, sizeof *doms[m].list.files, prep_cmp_file);
    if (!rc) rc = prep_check_duplicates(doms, n_doms, e);
    prep_tok k = {0};
    if (!rc) rc = prep_tok_load(o, &k, e);
    for (int m = 0; !rc && m < n_doms; m++) rc = prep_plan(o, &k, &doms[m], e);
    for (int m = 0; !rc && m < n_doms; m++) {
        doms[m].dir = prep_join(o->out, doms[m].name);
        rc = doms[m].dir ? prep_check_stale(&doms[m], e) : prep_oom(e);
    }
    if (!rc && !(w = malloc(SPLIT_COUNT * sizeof *w))) rc = prep_oom(e);
    if (!rc) rc = prep_room(o, &k, doms, n_doms, e);
    int lock = -1;
    if (!rc && (lock = prep_lock_out(o->out, e)) < 0) rc = e->code;
    /* again under the lock: another prep may have ended between the first look and it */
    for (int m = 0; !rc && m < n_doms; m++) rc = prep_check_stale(&doms[m], e);
    /* From here on the output changes: first retire the old description, and what an
     * earlier prep killed midway left (its shards' temporaries) */
    if (!rc && unlink(yaml) != 0 && errno != ENOENT)
        rc = err_sys(e, ERR_USAGE, errno, "cannot remove the old %s", yaml);
    for (int m = 0; !rc && m < n_doms; m++) fileio_sweep_dead_temporaries(doms[m].dir, dataset_shard_stem, 60.0);
    for (int m = 0; !rc && m < n_doms; m++) rc = prep_domain(o, &k, &doms[m], w, e);
    if (!rc) rc = prep_write_yaml(o, &k, doms, n_doms, yaml, e);
    prep_tok_free(&k);
    if (!rc) prep_report(o, doms, n_doms);
    if (!rc && o->stats) {
        for (int m = 0; m < n_doms; m++) o->stats[m] = doms[m].st;
        if (o->n_stats) *o->n_stats = n_doms;
    }
    if (lock >= 0) close(lock);
    for (int m = 0; m < n_doms; m++) prep_dom_free(&doms[m]);
    free(dom_of);
    free(out_canon);
    free(yaml);
    free(w);
    if (rc && e) err_prefix(e, "prep: ");
    return rc;
}
