/* safetensors.c — the safetensors format; see safetensors.h. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/json_tree.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/outfile.h"

static const struct {
    const char *name;
    size_t size;
} DTYPES[ST_NDTYPES] = {
    [ST_F32] = {"F32", 4},       [ST_BF16] = {"BF16", 2}, [ST_F16] = {"F16", 2},
    [ST_F64] = {"F64", 8},       [ST_I64] = {"I64", 8},   [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2},       [ST_I8] = {"I8", 1},     [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1},     [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *safetensors_dtype_name(st_dtype d) { return d < ST_NDTYPES ? DTYPES[d].name : "?"; }
size_t safetensors_dtype_size(st_dtype d) { return d < ST_NDTYPES ? DTYPES[d].size : 0; }

/* One mapped file and its parsed header. */
typedef struct st_file {
    char *path;
    void *map;
    size_t len;
    tjson_doc *doc;
    const tjson *meta; /* "__metadata__" or NULL */
} st_file;

struct st_set {
    st_file *files;
    size_t nfiles;
    st_tensor *t; /* sorted by name */
    size_t n;
    char source[4200]; /* the file, or the index, it was opened from */
};

const char *safetensors_source(const st_set *s) { return s->source; }

void safetensors_close(st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nfiles; i++) {
        if (s->files[i].map) munmap(s->files[i].map, s->files[i].len);
        tjson_free(s->files[i].doc);
        free(s->files[i].path);
    }
    free(s->files);
    free(s->t);
    free(s);
}

size_t safetensors_count(const st_set *s) { return s->n; }
const st_tensor *safetensors_at(const st_set *s, size_t i) { return i < s->n ? &s->t[i] : NULL; }

static int by_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

const st_tensor *safetensors_find(const st_set *s, const char *name) {
    st_tensor key = {.name = name};
    return bsearch(&key, s->t, s->n, sizeof *s->t, by_name);
}

const char *safetensors_meta(const st_set *s, const char *key) {
    const tjson *v = s->nfiles ? tjson_get(s->files[0].meta, key) : NULL;
    return v && v->type == TJ_STR ? v->u.s : NULL;
}

/* A JSON number that is an integer in [0, 2^53]: into *out. */
static int as_count(const tjson *v, uint64_t *out) {
    if (!v || v->type != TJ_NUM || !(v->u.num >= 0) || v->u.num > 9007199254740992.0 || v->u.num != floor(v->u.num))
        return -1;
    *out = (uint64_t)v->u.num;
    return 0;
}

/* By start, then by end (as the reference library orders them): an empty tensor starting
 * where the next one starts sorts before it whatever qsort does with ties. */
static int by_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}


/* An upper bound on the JSON values in text[0..n) (every value but the first follows a
 * ',' or a ':' or opens a container), counted before parsing: each takes ~72 bytes parsed,
 * so that a header of 100 MB of "0,0,0,..." took 3.7 GB (a real model's header holds ~11
 * values a tensor). */
static uint64_t st_values_bound(const char *text, size_t n) {
    uint64_t k = 1;
    for (size_t i = 0; i < n; i++) k += text[i] == ',' || text[i] == ':' || text[i] == '[' || text[i] == '{';
    return k;
}

/* Maps `path` and appends its tensors to s (grown as needed). The whole header is
 * checked: types, shapes against byte ranges, and that the ranges tile the buffer. */
static int open_file(st_set *s, const char *path, tdm_err *e) {
    st_file *nf = realloc(s->files, (s->nfiles + 1) * sizeof *nf);
    if (!nf) return err_set(e, ERR_INTERNAL, "out of memory");
    s->files = nf;
    st_file *f = &s->files[s->nfiles++];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path))) return err_set(e, ERR_INTERNAL, "out of memory");
    int fd = fileio_open_regular(path); /* a FIFO would block open() for ever */
    if (fd < 0) return err_set(e, ERR_USAGE, "%s: cannot open: %s", path, fileio_strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(e, ERR_USAGE, "%s: not a regular file", path);
    }
    f->len = (size_t)sb.st_size;
    if (f->len < 8) {
        close(fd);
        return err_set(e, ERR_USAGE, "%s: %zu bytes, too short for a safetensors file (8-byte header length)",
                       path, f->len);
    }
    f->map = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return err_sys(e, ERR_USAGE, errno, "%s: cannot map", path);
    }
    const unsigned char *p = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > ST_MAX_HEADER || hlen > f->len - 8)
        return err_set(e, ERR_USAGE, "%s: header length %llu runs past the file (%zu bytes) or the %u MiB limit: "
                       "not a safetensors file, or a truncated one", path, (unsigned long long)hlen, f->len,
                       ST_MAX_HEADER >> 20);
    char why[256];
    const tjson *root;
    uint64_t values = st_values_bound((const char *)p + 8, (size_t)hlen);
    if (values > ST_MAX_VALUES)
        return err_set(e, ERR_USAGE, "%s: the header holds about %llu JSON values, more than the %u any model's "
                       "tensors need (a header of that many would take %llu MB to read): not a model's safetensors "
                       "file", path, (unsigned long long)values, ST_MAX_VALUES,
                       (unsigned long long)(values * 72 >> 20));
    f->doc = tjson_parse((const char *)p + 8, (size_t)hlen, &root, why, sizeof why);
    if (!f->doc) return err_set(e, ERR_USAGE, "%s: the header is not JSON: %s", path, why);
    if (root->type != TJ_OBJ) return err_set(e, ERR_USAGE, "%s: the header is %s, not an object", path, tjson_type_name(root));
    const unsigned char *buf = p + 8 + hlen;
    uint64_t buflen = f->len - 8 - hlen;
    size_t first = s->n;
    st_tensor *nt = realloc(s->t, (s->n + root->n) * sizeof *nt);
    if (!nt && root->n) return err_set(e, ERR_INTERNAL, "out of memory");
    s->t = nt;
    for (uint32_t i = 0; i < root->n; i++) {
        const tjson *v = &root->u.kids[i];
        if (!strcmp(v->key, "__metadata__")) {
            if (v->type != TJ_OBJ) return err_set(e, ERR_USAGE, "%s: __metadata__ is %s, not an object", path, tjson_type_name(v));
            for (uint32_t k = 0; k < v->n; k++)
                if (v->u.kids[k].type != TJ_STR)
                    return err_set(e, ERR_USAGE, "%s: __metadata__.%.100s is %s, not a string", path, v->u.kids[k].key,
                                   tjson_type_name(&v->u.kids[k]));
            f->meta = v;
            continue;
        }
        if (v->keylen != strlen(v->key) || !v->keylen)
            return err_set(e, ERR_USAGE, "%s: a tensor name is empty or holds a NUL byte", path);
        for (size_t k = 0; k < v->keylen; k++) /* every message prints the names: no escapes into a terminal */
            if ((unsigned char)v->key[k] < 0x20 || v->key[k] == 0x7f)
                return err_set(e, ERR_USAGE, "%s: a tensor name holds the control character 0x%02x at byte "
                               "%zu (no model names its tensors so)", path, (unsigned)(unsigned char)v->key[k], k);
        if (v->type != TJ_OBJ) return err_set(e, ERR_USAGE, "%s: tensor %.200s is %s, not an object", path, v->key, tjson_type_name(v));
        st_tensor *t = &s->t[s->n];
        memset(t, 0, sizeof *t);
        t->name = v->key;
        t->file = f->path;
        const tjson *dt = tjson_get(v, "dtype"), *sh = tjson_get(v, "shape"), *off = tjson_get(v, "data_offsets");
        if (!dt || dt->type != TJ_STR) return err_set(e, ERR_USAGE, "%s: tensor %.200s: no \"dtype\" string", path, v->key);
        int d = -1;
        for (int k = 0; k < ST_NDTYPES; k++)
            if (dt->n == strlen(DTYPES[k].name) && !strcmp(dt->u.s, DTYPES[k].name)) d = k; /* "F32\u0000x" is none */
        if (d < 0) {
            char shown[41];
            size_t k = 0;
            for (; k < 40 && dt->u.s[k]; k++) shown[k] = (unsigned char)dt->u.s[k] < 0x20 || dt->u.s[k] == 0x7f ? '?' : dt->u.s[k];
            shown[k] = '\0';
            return err_set(e, ERR_USAGE, "%s: tensor %.200s: unknown dtype \"%s\"", path, v->key, shown);
        }
        t->dtype = (st_dtype)d;
        if (!sh || sh->type != TJ_ARR || sh->n > ST_MAX_DIMS)
            return err_set(e, ERR_USAGE, "%s: tensor %.200s: \"shape\" is not an array of at most %d sizes", path,
                           v->key, ST_MAX_DIMS);
        t->ndim = (int)sh->n;
        t->numel = 1;
        for (uint32_t k = 0; k < sh->n; k++) {
            uint64_t dim;
            if (as_count(&sh->u.kids[k], &dim) || dim > INT64_MAX)
                return err_set(e, ERR_USAGE, "%s: tensor %.200s: shape[%u] is not a size", path, v->key, k);
            t->shape[k] = (int64_t)dim;
            if (dim && t->numel > UINT64_MAX / dim) return err_set(e, ERR_USAGE, "%s: tensor %.200s: shape overflows", path, v->key);
            t->numel *= dim;
        }
        uint64_t b, end;
        if (!off || off->type != TJ_ARR || off->n != 2 || as_count(&off->u.kids[0], &b) || as_count(&off->u.kids[1], &end) ||
            end < b)
            return err_set(e, ERR_USAGE, "%s: tensor %.200s: \"data_offsets\" is not [begin, end]", path, v->key);
        if (end > buflen)
            return err_set(e, ERR_USAGE, "%s: tensor %.200s: bytes %llu..%llu run past the data (%llu bytes): a truncated "
                           "file", path, v->key, (unsigned long long)b, (unsigned long long)end, (unsigned long long)buflen);
        t->nbytes = end - b;
        if (t->numel > UINT64_MAX / DTYPES[d].size || t->numel * DTYPES[d].size != t->nbytes)
            return err_set(e, ERR_USAGE, "%s: tensor %.200s: %llu bytes for %llu %s elements", path, v->key,
                           (unsigned long long)t->nbytes, (unsigned long long)t->numel, DTYPES[d].name);
        t->data = buf + b;
        s->n++;
    }
    /* the ranges must tile the buffer: no overlap (two tensors sharing bytes), no hole */
    size_t k = s->n - first;
    const st_tensor **order = malloc((k ? k : 1) * sizeof *order);
    if (!order) return err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < k; i++) order[i] = &s->t[first + i];
    qsort(order, k, sizeof *order, by_offset);
    uint64_t at = 0;
    int rc = 0;
    for (size_t i = 0; i < k && !rc; i++) {
        uint64_t b = (uint64_t)(order[i]->data - buf);
        if (b != at)
            rc = err_set(e, ERR_USAGE, "%s: tensor %.200s starts at byte %llu of the data, expected %llu (%s)", path,
                         order[i]->name, (unsigned long long)b, (unsigned long long)at,
                         b < at ? "it overlaps the tensor before it" : "a hole before it");
        at = b + order[i]->nbytes;
    }
    if (!rc && at != buflen)
        rc = err_set(e, ERR_USAGE, "%s: the tensors end at byte %llu of %llu bytes of data: trailing bytes", path,
                     (unsigned long long)at, (unsigned long long)buflen);
    free(order);
    return rc;
}

/* Sorts the tensors by name; a name given twice (in one file or in two shards) is an
 * error naming both files. */
static int sort_unique(st_set *s, tdm_err *e) {
    qsort(s->t, s->n, sizeof *s->t, by_name);
    for (size_t i = 1; i < s->n; i++)
        if (!strcmp(s->t[i - 1].name, s->t[i].name))
            return err_set(e, ERR_USAGE, "tensor %.200s is given twice (%s and %s)", s->t[i].name, s->t[i - 1].file,
                           s->t[i].file);
    return 0;
}

/* The folder's index: every tensor it names must be in the file it names. */
static int open_index(st_set *s, const char *dir, const char *index, tdm_err *e) {
    buf_t text = {0};
    if (fileio_read_all(index, &text, ST_MAX_HEADER)) {
        int err = errno;
        buf_free(&text);
        return err_set(e, err == ENOMEM ? ERR_INTERNAL : ERR_USAGE, "%s: cannot read: %s", index,
                       fileio_strerror(err));
    }
    char why[256];
    const tjson *root;
    uint64_t values = st_values_bound(text.p ? text.p : "", text.n);
    if (values > ST_MAX_VALUES) {
        buf_free(&text);
        return err_set(e, ERR_USAGE, "%s: holds about %llu JSON values, more than the %u any model's tensors need: "
                       "not a model's index", index, (unsigned long long)values, ST_MAX_VALUES);
    }
    tjson_doc *doc = tjson_parse(text.p ? text.p : "", text.n, &root, why, sizeof why);
    buf_free(&text);
    if (!doc) return err_set(e, ERR_USAGE, "%s: not JSON: %s", index, why);
    const tjson *map = tjson_get(root, "weight_map");
    int rc = 0;
    if (!map || map->type != TJ_OBJ || !map->n)
        rc = err_set(e, ERR_USAGE, "%s: no \"weight_map\" object naming the tensors' files", index);
    /* each file once, in the order first named: against the files opened so far (a few
     * shards), not every earlier entry (quadratic in the entries: hours for a 100 MiB index) */
    const char **files = rc ? NULL : malloc(map->n * sizeof *files);
    size_t nfiles = 0;
    if (!rc && !files) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (uint32_t i = 0; !rc && i < map->n; i++) {
        const tjson *v = &map->u.kids[i];
        int ctl = 0; /* the names are printed in messages: no escapes into a terminal */
        for (const char *p = v->key; *p && !ctl; p++) ctl = (unsigned char)*p < 0x20 || *p == 0x7f;
        for (const char *p = v->type == TJ_STR ? v->u.s : ""; *p && !ctl; p++) ctl = (unsigned char)*p < 0x20 || *p == 0x7f;
        if (ctl)
            rc = err_set(e, ERR_USAGE, "%s: weight_map entry %u holds a control character", index, i);
        else if (v->type != TJ_STR || !v->n || strchr(v->u.s, '/') || !strcmp(v->u.s, "..") || v->n != strlen(v->u.s))
            rc = err_set(e, ERR_USAGE, "%s: weight_map.%.200s is not a file name in the folder", index, v->key);
        int seen = 0;
        for (size_t j = 0; !rc && !seen && j < nfiles; j++) seen = !strcmp(files[j], v->u.s);
        if (!rc && !seen) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, v->u.s);
            rc = open_file(s, path, e);
            files[nfiles++] = v->u.s;
        }
    }
    free(files);
    if (!rc) rc = sort_unique(s, e);
    for (uint32_t i = 0; !rc && i < map->n; i++) {
        const tjson *v = &map->u.kids[i];
        const st_tensor *t = safetensors_find(s, v->key);
        const char *base = t ? strrchr(t->file, '/') : NULL;
        if (!t)
            rc = err_set(e, ERR_USAGE, "%s: tensor %.200s is in no file (the index names %.200s)", index, v->key, v->u.s);
        else if (strcmp(base ? base + 1 : t->file, v->u.s))
            rc = err_set(e, ERR_USAGE, "%s: tensor %.200s is in %s, the index says %.200s", index, v->key, t->file, v->u.s);
    }
    tjson_free(doc);
    return rc;
}

/* 1 with ERR_USAGE in e when path is a symbolic link that leads nowhere (dangling, or a
 * loop: a broken Hugging Face cache snapshot, whose files link into ../../blobs), else 0. */
static int broken_link(const char *path, tdm_err *e) {
    struct stat ls, ts;
    if (lstat(path, &ls) != 0 || !S_ISLNK(ls.st_mode) || stat(path, &ts) == 0) return 0;
    int err = errno;
    char to[4096];
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = '\0';
    err_set(e, ERR_USAGE, "%s is a broken symbolic link (to %s: %s), not weights that can be read; fetch the "
            "weights again (a Hugging Face cache whose blobs/ were lost, or a folder copied without its links' "
            "targets)", path, n > 0 ? to : "?", strerror(err));
    return 1;
}

int safetensors_open(const char *path, st_set **out, tdm_err *e) {
    *out = NULL;
    st_set *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, ERR_INTERNAL, "out of memory");
    struct stat sb;
    int rc = 0;
    if (stat(path, &sb) != 0) rc = err_sys(e, ERR_USAGE, errno, "%s", path);
    else if (S_ISDIR(sb.st_mode)) {
        char index[4200], single[4200];
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", path);
        snprintf(single, sizeof single, "%s/model.safetensors", path);
        /* model.safetensors first, as transformers loads a folder: with both there, it and
         * tandem read the same weights (the index was read first, another model than
         * transformers loads) */
        if (access(single, F_OK) == 0) rc = open_file(s, single, e), snprintf(s->source, sizeof s->source, "%s", single);
        else if (access(index, F_OK) == 0) rc = open_index(s, path, index, e), snprintf(s->source, sizeof s->source, "%s", index);
        else rc = broken_link(single, e) || broken_link(index, e)
                      ? e ? e->code : ERR_USAGE
                      : err_set(e, ERR_USAGE, "%s: holds neither model.safetensors nor model.safetensors.index.json",
                                path);
    } else {
        rc = open_file(s, path, e);
        snprintf(s->source, sizeof s->source, "%s", path);
    }
    if (!rc) rc = sort_unique(s, e);
    if (rc) {
        safetensors_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* IEEE half → float, exactly (subnormals, infinities and NaN included). */
static float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 31, man = h & 1023;
    float v;
    if (ex == 0) v = ldexpf((float)man, -24);
    else if (ex == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 1024), (int)ex - 25);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits |= sign;
    memcpy(&v, &bits, 4);
    return v;
}

/* A weight that is not finite: a damaged or mis-exported file. A model started from it
 * fails its first probe with a NaN loss, which reads like divergence; said here instead,
 * naming the tensor. */
static int finite_or_error(const st_tensor *t, const float *out, tdm_err *e) {
    for (uint64_t i = 0; i < t->numel; i++)
        if (!isfinite(out[i]))
            return err_set(e, ERR_USAGE, "%s: tensor %s holds a non-finite value (%s) at element %llu: no model "
                           "can start from it (a damaged or mis-exported file; export the weights again)",
                           t->file, t->name, isnan(out[i]) ? "NaN" : "inf", (unsigned long long)i);
    return 0;
}

/* Element i of t as a float (F32, BF16, F16; 0 otherwise), read from the file's bytes. */
static float value_at(const st_tensor *t, uint64_t i) {
    const unsigned char *p = t->data;
    uint32_t b;
    float v = 0;
    switch (t->dtype) {
    case ST_F32:
        b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        memcpy(&v, &b, 4);
        return v;
    case ST_BF16:
        b = ((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8) << 16;
        memcpy(&v, &b, 4);
        return v;
    case ST_F16: return half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    default: return 0;
    }
}

int safetensors_check_finite(const st_tensor *t, tdm_err *e) {
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16) return 0;
    for (uint64_t i = 0; i < t->numel; i++) {
        float v = value_at(t, i);
        if (!isfinite(v))
            return err_set(e, ERR_USAGE, "%s: tensor %s holds a non-finite value (%s) at element %llu: no model "
                           "can start from it (a damaged or mis-exported file; export the weights again)",
                           t->file, t->name, isnan(v) ? "NaN" : "inf", (unsigned long long)i);
    }
    return 0;
}

int safetensors_same_values(const st_tensor *a, const st_tensor *b) {
    if (a->numel != b->numel) return 0;
    if (a->dtype == b->dtype && a->nbytes == b->nbytes) return !memcmp(a->data, b->data, (size_t)a->nbytes);
    for (uint64_t i = 0; i < a->numel; i++) {
        float x = value_at(a, i), y = value_at(b, i);
        if (memcmp(&x, &y, 4)) return 0;
    }
    return 1;
}

int safetensors_to_f32(const st_tensor *t, float *out, tdm_err *e) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case ST_F32:
        for (uint64_t i = 0; i < t->numel; i++) {
            uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            memcpy(&out[i], &b, 4);
        }
        return finite_or_error(t, out, e);
    case ST_BF16:
        for (uint64_t i = 0; i < t->numel; i++) {
            uint32_t b = ((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &b, 4);
        }
        return finite_or_error(t, out, e);
    case ST_F16:
        for (uint64_t i = 0; i < t->numel; i++) out[i] = half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return finite_or_error(t, out, e);
    default:
        return err_set(e, ERR_USAGE, "%s: tensor %s is %s: only F32, BF16 and F16 weights can be loaded", t->file,
                       t->name, DTYPES[t->dtype].name);
    }
}

uint16_t safetensors_f32_to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* a quiet NaN */
    b += 0x7fffu + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* The header's JSON text for t[0..n) with their offsets (8-byte aligned by padding with
 * spaces, as the reference writer does). */
static int header_text(buf_t *h, const st_out *t, size_t n, const char *const *meta, size_t nmeta, tdm_err *e) {
    buf_putc(h, '{');
    if (nmeta) {
        buf_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; i < nmeta; i++) {
            buf_printf(h, "%s", i ? "," : "");
            for (int k = 0; k < 2; k++) {
                buf_putc(h, '"');
                for (const unsigned char *c = (const unsigned char *)meta[2 * i + k]; *c; c++) {
                    if (*c == '"' || *c == '\\') buf_printf(h, "\\%c", *c);
                    else if (*c < 0x20) buf_printf(h, "\\u%04x", *c);
                    else buf_putc(h, (char)*c);
                }
                buf_puts(h, k ? "\"" : "\":");
            }
        }
        buf_putc(h, '}');
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].dtype != ST_F32 && t[i].dtype != ST_BF16)
            return err_set(e, ERR_USAGE, "tensor %s: only F32 and BF16 are written", t[i].name);
        if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS)
            return err_set(e, ERR_USAGE, "tensor %s: %d dimensions", t[i].name, t[i].ndim);
        uint64_t numel = 1;
        buf_printf(h, "%s\"", nmeta || i ? "," : "");
        for (const unsigned char *c = (const unsigned char *)t[i].name; *c; c++) {
            if (*c == '"' || *c == '\\') buf_printf(h, "\\%c", *c);
            else if (*c < 0x20) buf_printf(h, "\\u%04x", *c);
            else buf_putc(h, (char)*c);
        }
        buf_printf(h, "\":{\"dtype\":\"%s\",\"shape\":[", DTYPES[t[i].dtype].name);
        for (int k = 0; k < t[i].ndim; k++) {
            if (t[i].shape[k] < 0) return err_set(e, ERR_USAGE, "tensor %s: shape[%d] < 0", t[i].name, k);
            numel *= (uint64_t)t[i].shape[k];
            buf_printf(h, "%s%lld", k ? "," : "", (long long)t[i].shape[k]);
        }
        uint64_t bytes = numel * DTYPES[t[i].dtype].size;
        buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at, (unsigned long long)(at + bytes));
        at += bytes;
    }
    buf_putc(h, '}');
    while ((h->n + 8) % 8) buf_putc(h, ' ');
    return h->oom ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
}

int safetensors_write(const char *path, const st_out *t, size_t n, const char *const *meta, size_t nmeta,
                      tdm_err *e) {
    if (!n) return err_set(e, ERR_USAGE, "%s: no tensors to write", path);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name)) return err_set(e, ERR_USAGE, "%s: tensor %s given twice", path, t[i].name);
    buf_t h = {0};
    int rc = header_text(&h, t, n, meta, nmeta, e);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
    /* a SIGTERM or SIGINT while it is written removes it (export keeps their default: the
     * temporary, as large as the model, was left): guarded before it is created */
    int guard = rc ? -1 : outfile_guard_add(tmp);
    int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int open_err = errno;
    if (fd < 0) outfile_guard_drop(guard), guard = -1;
    if (!rc && fd < 0) rc = err_sys(e, ERR_USAGE, open_err, "%s: cannot create", tmp);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    if (!rc && (fileio_write_all(fd, len8, 8) || fileio_write_all(fd, h.p, h.n)))
        rc = err_sys(e, ERR_USAGE, errno, "%s: write failed", tmp);
    /* the values, little-endian, in pieces: on the heap (64 KiB on the stack crashed an
     * export under ulimit -s 128 about one time in three, by where the stack began) */
    enum { PIECE = 1 << 16 };
    unsigned char *piece = rc ? NULL : malloc(PIECE);
    if (!rc && !piece) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        uint64_t numel = 1;
        for (int k = 0; k < t[i].ndim; k++) numel *= (uint64_t)t[i].shape[k];
        size_t es = DTYPES[t[i].dtype].size, per = PIECE / es;
        for (uint64_t at = 0; !rc && at < numel; at += per) {
            size_t m = numel - at < per ? (size_t)(numel - at) : per;
            for (size_t k = 0; k < m; k++) {
                uint32_t b;
                memcpy(&b, &t[i].data[at + k], 4);
                if (t[i].dtype == ST_BF16) {
                    uint16_t v = safetensors_f32_to_bf16(t[i].data[at + k]);
                    piece[2 * k] = (unsigned char)v, piece[2 * k + 1] = (unsigned char)(v >> 8);
                } else {
                    for (int q = 0; q < 4; q++) piece[4 * k + q] = (unsigned char)(b >> (8 * q));
                }
            }
            if (fileio_write_all(fd, piece, m * es)) rc = err_sys(e, ERR_USAGE, errno, "%s: write failed", tmp);
        }
    }
    free(piece);
    if (!rc && fsync(fd) != 0) rc = err_sys(e, ERR_USAGE, errno, "%s: fsync failed", tmp);
    if (fd >= 0 && close(fd) != 0 && !rc) rc = err_sys(e, ERR_USAGE, errno, "%s: close failed", tmp);
    if (!rc && rename(tmp, path) != 0) rc = err_sys(e, ERR_USAGE, errno, "%s: rename failed", path);
    if (!rc) fileio_fsync_parent(path);
    if (rc && fd >= 0) unlink(tmp);
    outfile_guard_drop(guard);
    buf_free(&h);
    return rc;
}
