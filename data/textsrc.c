/* textsrc.c — the files of a prep domain: walking, globs and excludes (textsrc.h). */
#include "data/textsrc.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *textsrc_reason_name(int reason) {
    static const char *const names[TEXTSRC_N_REASONS] = {
        "binary", "bad JSON", "no text field", "invalid UTF-8", "unreadable",
        "corrupt stream", "empty", "excluded", "symlink/special", "null", "too long", "hidden",
        "unsupported"};
    return reason >= 0 && reason < TEXTSRC_N_REASONS ? names[reason] : "?";
}

static int textsrc_oom(tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "out of memory");
}

/* a/b; b alone when a is empty (the current directory, named without "./"). */
static char *textsrc_join(const char *a, const char *b) {
    size_t la = strlen(a), n = la + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, la && a[la - 1] != '/' ? "/" : "", b);
    return p;
}

/* ---- matching ------------------------------------------------------------------------- */

#define TEXTSRC_MAX_COMPS 256

/* Splits a copy of path at '/' into at most TEXTSRC_MAX_COMPS non-empty components;
 * -1 when there are more (no file system path is that deep in practice). */
static int textsrc_split(char *copy, char **comp) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == TEXTSRC_MAX_COMPS) return -1;
        comp[n++] = t;
    }
    return n;
}

static int textsrc_match_comps(char **pc, int np, char **sc, int ns) {
    while (np > 0) {
        if (!strcmp(pc[0], "**")) {
            if (textsrc_match_comps(pc + 1, np - 1, sc, ns)) return 1; /* zero components */
            if (ns == 0 || sc[0][0] == '.') return 0;
            sc++, ns--; /* ... or one more, and try again */
            continue;
        }
        if (ns == 0 || fnmatch(pc[0], sc[0], FNM_PERIOD) != 0) return 0;
        pc++, np--, sc++, ns--;
    }
    return ns == 0;
}

/* Calls the component matcher on split copies of glob and path; mode 0: whole path,
 * 1: any run of consecutive components (the exclude rule). */
static int textsrc_match_mode(const char *glob, const char *path, int mode) {
    int abs = glob[0] == '/';
    if (mode == 0 && abs != (path[0] == '/')) return 0;
    char *g = strdup(glob), *p = strdup(path);
    char **pc = malloc(2 * TEXTSRC_MAX_COMPS * sizeof *pc), **sc = pc + TEXTSRC_MAX_COMPS;
    int hit = 0;
    if (g && p && pc) {
        int np = textsrc_split(g, pc), ns = textsrc_split(p, sc);
        if (np >= 0 && ns >= 0) {
            if (mode == 0 || abs) {
                hit = textsrc_match_comps(pc, np, sc, ns);
            } else {
                for (int i = 0; i < ns && !hit; i++)
                    for (int j = i + 1; j <= ns && !hit; j++)
                        hit = textsrc_match_comps(pc, np, sc + i, j - i);
            }
        }
    }
    free(g), free(p), free(pc);
    return hit;
}

int textsrc_match(const char *glob, const char *path) {
    return textsrc_match_mode(glob, path, 0);
}

int textsrc_excluded(const char *glob, const char *path) {
    return textsrc_match_mode(glob, path, 1);
}

int textsrc_is_glob(const char *s) {
    return strpbrk(s, "*?[") != NULL;
}

/* ---- listing -------------------------------------------------------------------------- */

typedef struct textsrc_walk {
    textsrc_list *l;
    const char *domain;
    const char *glob; /* NULL: every file */
    const char *const *ex;
    int n_ex;
    const textsrc_issues *is;
    uint64_t matched;
    int skip_out; /* a glob's walk passes over the output directory (out_dev, out_ino) */
    dev_t out_dev;
    ino_t out_ino;
} textsrc_walk;

static void textsrc_issue(const textsrc_issues *is, int reason, const char *path,
                          const char *what) {
    if (is && is->fn) is->fn(is->ctx, reason, path, 0, what);
}

/* Records a regular file (its identity for the duplicate check). Takes ownership of path. */
static int textsrc_push(textsrc_walk *w, char *path, const struct stat *st, tdm_err *e) {
    /* an absolute exclude against a file found by a relative path: its absolute forms, as
     * written from here and with links resolved (before: never matched, nothing said) */
    char *lexical = NULL, *canon = NULL;
    for (int i = 0; i < w->n_ex && path[0] != '/'; i++)
        if (w->ex[i][0] == '/') {
            char *cwd = getcwd(NULL, 0);
            lexical = cwd ? textsrc_join(cwd, path) : NULL;
            canon = textsrc_canon(path);
            free(cwd);
            break;
        }
    for (int i = 0; i < w->n_ex; i++)
        if (textsrc_excluded(w->ex[i], path) || (lexical && textsrc_excluded(w->ex[i], lexical)) ||
            (canon && textsrc_excluded(w->ex[i], canon))) {
            textsrc_issue(w->is, TEXTSRC_EXCLUDED, path, w->ex[i]);
            free(path), free(lexical), free(canon);
            return 0;
        }
    free(lexical), free(canon);
    textsrc_list *l = w->l;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        textsrc_file *nf = realloc(l->files, nc * sizeof *nf);
        if (!nf) {
            free(path);
            return textsrc_oom(e);
        }
        l->files = nf;
        l->cap = nc;
    }
    l->files[l->n++] = (textsrc_file){path, (uint64_t)st->st_size, st->st_dev, st->st_ino};
    w->matched++;
    return 0;
}

static int textsrc_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the regular files below dir ("" is the current directory) that the walk's glob
 * matches. The directory is read whole and closed before descending, so the depth of the
 * tree does not cost open descriptors; names are sorted so reports come in a fixed order. */
static int textsrc_walk_dir(textsrc_walk *w, const char *dir, tdm_err *e) {
    DIR *dp = opendir(dir[0] ? dir : ".");
    if (!dp) {
        char what[160];
        snprintf(what, sizeof what, "cannot read directory: %s", strerror(errno));
        textsrc_issue(w->is, TEXTSRC_UNREADABLE, dir[0] ? dir : ".", what);
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dp);
        if (!de) {
            if (errno)
                rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot list directory %s",
                             w->domain, dir);
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                rc = textsrc_oom(e);
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = textsrc_oom(e);
            break;
        }
        n++;
    }
    closedir(dp);
    if (!rc && n) qsort(names, n, sizeof *names, textsrc_cmp_str);
    for (size_t i = 0; !rc && i < n; i++) {
        char *child = textsrc_join(dir, names[i]);
        struct stat st;
        if (!child) rc = textsrc_oom(e);
        else if (!w->glob && names[i][0] == '.') /* a glob passes them over by its rules */
            textsrc_issue(w->is, TEXTSRC_HIDDEN, child, "hidden (a name starting with '.'), left out as a glob "
                          "leaves it: name it as a path or a glob of its own to read it");
        else if (lstat(child, &st) != 0)
            rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot stat %s", w->domain, child);
        else if (S_ISDIR(st.st_mode)) {
            if (!w->skip_out || st.st_dev != w->out_dev || st.st_ino != w->out_ino)
                rc = textsrc_walk_dir(w, child, e);
        }
        else if (!w->glob || textsrc_match(w->glob, child)) {
            if (S_ISREG(st.st_mode)) {
                rc = textsrc_push(w, child, &st, e);
                child = NULL; /* owned by the list now, or freed */
            } else {
                textsrc_issue(w->is, TEXTSRC_SPECIAL, child,
                              S_ISLNK(st.st_mode) ? "a symlink (not followed)"
                                                  : "not a regular file");
            }
        }
        free(child);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Whether canonical path `child` is `parent` or below it. */
static int textsrc_within(const char *child, const char *parent) {
    size_t n = strlen(parent);
    if (n == 1 && parent[0] == '/') return 1;
    return !strncmp(child, parent, n) && (child[n] == '\0' || child[n] == '/');
}

char *textsrc_canon(const char *path) {
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

/* The directory a glob walks: its leading components free of glob characters. */
static char *textsrc_glob_base(const char *glob) {
    size_t cut = 0;
    for (size_t i = 0; glob[i]; i++) {
        if (glob[i] == '/') cut = i == 0 ? 1 : i; /* "/x": the root */
        if (strchr("*?[", glob[i])) break;
    }
    return strndup(glob, cut);
}

int textsrc_add(textsrc_list *l, const char *domain, const char *include,
                const char *const *excludes, int n_excludes, const char *out_canon,
                const textsrc_issues *is, tdm_err *e) {
    textsrc_walk w = {l, domain, NULL, excludes, n_excludes, is, 0, 0, 0, 0};
    char *dir = NULL;
    struct stat st;
    if (textsrc_is_glob(include)) {
        w.glob = include;
        if (!(dir = textsrc_glob_base(include))) return textsrc_oom(e);
        if (dir[0] && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
            int rc = err_set(e, ERR_USAGE,
                             "domain '%s': glob '%s': %s is not a directory (check the path)",
                             domain, include, dir);
            free(dir);
            return rc;
        }
    } else {
        if (stat(include, &st) != 0)
            return err_sys(e, ERR_USAGE, errno, "domain '%s': cannot use %s (check the path)",
                           domain, include);
        if (S_ISREG(st.st_mode)) {
            char *p = strdup(include);
            return p ? textsrc_push(&w, p, &st, e) : textsrc_oom(e);
        }
        if (!S_ISDIR(st.st_mode))
            return err_set(e, ERR_USAGE,
                           "domain '%s': %s is neither a regular file nor a directory; give "
                           "text files, directories of them or a quoted glob",
                           domain, include);
        if (!(dir = strdup(include))) return textsrc_oom(e);
    }
    char *in_canon = realpath(dir[0] ? dir : ".", NULL);
    int rc = 0;
    if (!in_canon)
        rc = err_sys(e, ERR_USAGE, errno, "domain '%s': cannot resolve %s", domain, include);
    else if (w.glob && out_canon) { /* the glob's walk passes over the output */
        if (stat(out_canon, &st) == 0 && S_ISDIR(st.st_mode))
            w.skip_out = 1, w.out_dev = st.st_dev, w.out_ino = st.st_ino;
    } else if (out_canon && textsrc_within(out_canon, in_canon))
        rc = err_set(e, ERR_USAGE,
                     "output directory %s is inside input directory %s of domain '%s': prep "
                     "would read its own shards next time; choose an --out outside the inputs",
                     out_canon, dir[0] ? dir : ".", domain);
    free(in_canon);
    if (!rc) rc = textsrc_walk_dir(&w, dir, e);
    if (!rc && w.glob && w.matched == 0)
        rc = err_set(e, ERR_USAGE,
                     "domain '%s': glob '%s' matches no file%s (quote it so that tandem, not the "
                     "shell, expands it; ** matches any depth)",
                     domain, include, n_excludes ? " that no --exclude leaves out" : "");
    free(dir);
    return rc;
}

void textsrc_list_free(textsrc_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}
