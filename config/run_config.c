/* run_config.c — the configuration a run was created with and its recorded changes; see run_config.h. */
#include "config/run_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "config/compare_layout.h"
#include "data/dataset.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "storage/url.h"
#include "util/hex.h"
#include "util/testhook.h"

/* config_kv[] (fixed buffers) ↔ rec_kv[] (pointers into them). */
static rec_kv *as_rec(config_kv *kv, size_t n) {
    rec_kv *r = calloc(n ? n : 1, sizeof *r);
    for (size_t i = 0; r && i < n; i++) {
        r[i].key = kv[i].key;
        r[i].value = kv[i].value;
    }
    return r;
}

static int from_rec(const rec_kv *r, size_t n, config_kv **out, tdm_err *e) {
    config_kv *kv = calloc(n ? n : 1, sizeof *kv);
    if (!kv) return err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (strlen(r[i].key) >= sizeof kv[i].key || strlen(r[i].value) >= sizeof kv[i].value) {
            free(kv);
            return err_set(e, ERR_STORE, "RUN: pinned config entry '%.64s' is too long", r[i].key);
        }
        snprintf(kv[i].key, sizeof kv[i].key, "%s", r[i].key);
        snprintf(kv[i].value, sizeof kv[i].value, "%s", r[i].value);
    }
    *out = kv;
    return 0;
}

/* Whether two paths name one file or folder (one device and inode). */
static int same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Whether two S3 URLs name one prefix: trailing '/'s aside (the backend drops them). */
static int same_prefix(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    while (na > 5 && a[na - 1] == '/') na--;
    while (nb > 5 && b[nb - 1] == '/') nb--;
    return na == nb && !strncmp(a, b, na);
}

/* Whether a pinned path value and a given one name the same file or folder (one device
 * and inode; "hf:DIR" compared by its DIR; store URLs by what they name): the pinned one is
 * read from here, the directory a resume starts in (a relative path is as the first start
 * wrote it). */
static int same_path(const char *a, const char *b) {
    if (strstr(a, "://") || strstr(b, "://")) {
        /* a store URL (data.mixture_file of tandem compare's final runs names the DMO's
         * store): file:///x/dmo and /x/dmo are one store, and so are the spellings of an S3
         * URL that read as one (a trailing '/', S3://) */
        store_url_parts *ua = malloc(sizeof *ua), *ub = malloc(sizeof *ub);
        tdm_err ea, eb;
        int same = ua && ub && store_url_parse(a, ua, &ea) == 0 && store_url_parse(b, ub, &eb) == 0 &&
                   ua->kind == ub->kind &&
                   (ua->kind == STORE_URL_S3 ? same_prefix(ua->canon, ub->canon)
                                             : ua->path[0] == '/' && ub->path[0] == '/' &&
                                                   (!strcmp(ua->path, ub->path) || same_file(ua->path, ub->path)));
        free(ua);
        free(ub);
        return same;
    }
    size_t sa = 0, sb = 0;
    while (a[sa] >= 'a' && a[sa] <= 'z') sa++;
    while (b[sb] >= 'a' && b[sb] <= 'z') sb++;
    sa = a[sa] == ':' && sa ? sa + 1 : 0;
    sb = b[sb] == ':' && sb ? sb + 1 : 0;
    if (sa != sb || strncmp(a, b, sa) || !a[sa] || !b[sb]) return 0;
    return same_file(a + sa, b + sb);
}

static config_kv *find_kv(config_kv *kv, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0) return &kv[i];
    return NULL;
}

/* What a repair of RUN takes; appended to every message about a missing or damaged RUN. */
#define RUN_REPAIR                                                                          \
    "RUN (with configs/<n>.mp, the recorded changes) pins the configuration every state "   \
    "and alpha record was computed with; no other object holds it, so it cannot be rebuilt " \
    "and no run resumes without it: restore that object from a copy of this store "         \
    "(a backup, or the store this one was copied from; then check with tandem "       \
    "verify), or start the run over in a new store"

int run_config_run_state(store *st, int *has, char *found, size_t cap, tdm_err *e) {
    static const char *const objects[] = {"HEAD", "mixture.mp"};
    static const char *const prefixes[] = {"states/", "alpha/", "configs/", "superseded/"};
    *has = 0;
    found[0] = '\0';
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++) {
        int ex = 0;
        int rc = store_exists(st, objects[i], &ex, e);
        if (rc) return rc;
        if (ex) {
            snprintf(found, cap, "%s", objects[i]);
            *has = 1;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !*has; i++) {
        store_list l;
        int rc = store_list_prefix(st, prefixes[i], &l, e);
        if (rc) return rc;
        if (l.n) {
            snprintf(found, cap, "%s and %zu more under %s", l.keys[0], l.n - 1, prefixes[i]);
            *has = 1;
        }
        store_list_free(&l);
    }
    return 0;
}

int run_config_nothing_computed(store *st) {
    int has = 1;
    char found[300];
    tdm_err e;
    return run_config_run_state(st, &has, found, sizeof found, &e) == 0 && !has;
}

/* The error for a store without RUN: a run that lost its RUN (ERR_STORE, with the repair;
 * *health RUN_CONFIG_MISSING) when the store holds run state, else "holds no run"
 * (RUN_CONFIG_NO_RUN; ERR_STORE as well: a path that holds no run is exit 3 for every
 * command, whether it is missing, empty or holds something else). A store error is
 * returned as it is. */
static int missing_run(store *st, int *health, tdm_err *e) {
    char found[300];
    int has = 0;
    int rc = run_config_run_state(st, &has, found, sizeof found, e);
    if (rc) return rc;
    *health = has ? RUN_CONFIG_MISSING : RUN_CONFIG_NO_RUN;
    if (has)
        return err_set(e, ERR_STORE,
                       "%s/RUN is missing, but the store holds a run (%s). " RUN_REPAIR,
                       store_url(st), found);
    /* `tandem compare`'s store holds its runs one level down: name them */
    char runs[200];
    if (run_config_compare_runs(st, runs, sizeof runs) > 0)
        return err_set(e, ERR_STORE, "%s holds no run itself: it is the store of a tandem compare, whose runs "
                       "are in it as %s; name one of them (%s/dmo), or run tandem compare CONFIG with this "
                       "--store again for its table", store_url(st), runs, store_url(st));
    return err_set(e, ERR_STORE, "%s holds no run (no RUN object); check the store URL",
                   store_url(st));
}

int run_config_compare_runs(store *st, char *out, size_t cap) {
    int n = 0;
    out[0] = '\0';
    for (int i = 0; i < COMPARE_NRUNS; i++) {
        char key[32];
        int there = 0;
        snprintf(key, sizeof key, "%s/RUN", compare_runs[i]);
        tdm_err ie = {0};
        if (store_exists(st, key, &there, &ie) == 0 && there) {
            size_t used = strlen(out);
            snprintf(out + used, cap - used, "%s%s", used ? ", " : "", compare_runs[i]);
            n++;
        }
    }
    return n;
}

/* Re-labels a decode failure of RUN or of a change record (ERR_STORE in e) as a damaged
 * RUN, with the repair; *health RUN_CONFIG_DAMAGED. */
static int damaged_run(store *st, int *health, tdm_err *e) {
    char was[sizeof e->msg];
    snprintf(was, sizeof was, "%s", e->msg);
    *health = RUN_CONFIG_DAMAGED;
    return err_set(e, ERR_STORE, "%.600s. The pinned configuration of the run in %s is damaged. "
                   RUN_REPAIR, was, store_url(st));
}

/* A key of a pinned config (RUN, or a change record `what`) that this tandem does not
 * know: the run was created or changed by a newer tandem, whose records are whole and
 * verify. ERR_USAGE saying so, and not "damaged": the remedy is the newer binary (a mixed
 * fleet), never a restore from a backup. 0 when every key is known. */
static int newer_key(const char *what, const char *key, tdm_err *e) {
    tdm_err ke;
    if (config_key_known(key, "", &ke) == 0) return 0;
    return err_set(e, ERR_USAGE, "%s holds the config key '%.60s', which this tandem does not know: the run "
                   "was created or changed by a newer tandem; run it with that version or a newer one "
                   "(nothing was changed)", what, key);
}

/* Reads RUN and applies configs/0.mp, 1.mp, ... to its canonical form; *gens (when not
 * NULL) gets each change's position. STORE_NOT_FOUND when there is no RUN; ERR_STORE with
 * *damaged = 1 when RUN or a change record is there but does not decode or verify (a
 * store that could not be read leaves *damaged 0). */
/* Whether RUN's entry kv is part of the run's identity: a key of what a run computes
 * (config_key_identity), and, where the key is younger than some RUNs, a value other than
 * the one they computed with — so that a RUN with the key and one without, computing
 * alike, name the same identity whichever tandem reads them. */
static int identity_entry(const rec_kv *kv) {
    const char *before = config_key_before(kv->key);
    return config_key_identity(kv->key) && !(before && !strcmp(before, kv->value));
}

int run_config_identity(const rec_run *run, sha256_digest *out) {
    static const char tag[] = "tandem run identity 1";
    size_t n = sizeof tag; /* its NUL included, as after each key and value */
    for (size_t i = 0; i < run->nconfig; i++)
        if (identity_entry(&run->config[i]))
            n += strlen(run->config[i].key) + strlen(run->config[i].value) + 2;
    char *buf = malloc(n), *p = buf;
    if (!buf) return -1;
    memcpy(p, tag, sizeof tag), p += sizeof tag;
    for (size_t i = 0; i < run->nconfig; i++) {
        if (!identity_entry(&run->config[i])) continue;
        size_t k = strlen(run->config[i].key) + 1, v = strlen(run->config[i].value) + 1;
        memcpy(p, run->config[i].key, k), p += k;
        memcpy(p, run->config[i].value, v), p += v;
    }
    sha256(buf, n, out);
    free(buf);
    return 0;
}

static int read_pinned(store *st, config_kv **kv_out, size_t *n_out, ckpt_gens *gens, char *run_id,
                       size_t cap, sha256_digest *identity, int *damaged, tdm_err *e) {
    *damaged = 0;
    char what[600];
    snprintf(what, sizeof what, "%s/RUN", store_url(st));
    rec_run run;
    int rc = ledger_read(st, REC_KIND_RUN, LEDGER_RUN, what, &run, e);
    if (rc == STORE_CORRUPT) *damaged = 1, rc = ERR_STORE;
    if (rc) return rc;
    if (run_id) snprintf(run_id, cap, "%s", run.run_id);
    if (identity && run_config_identity(&run, identity)) {
        rec_run_free(&run);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    config_kv *kv = NULL;
    rc = from_rec(run.config, run.nconfig, &kv, e);
    size_t nkv = run.nconfig;
    rec_run_free(&run);
    if (rc) {
        *damaged = rc == ERR_STORE;
        return rc;
    }
    for (size_t i = 0; i < nkv; i++)
        if (memchr(kv[i].key, '\0', sizeof kv[i].key) && (rc = newer_key(what, kv[i].key, e))) {
            free(kv);
            return rc;
        }
    /* RUN's own config must be valid before any change applies: otherwise the fault is
     * RUN's, and a change record is blamed only for what it changed */
    /* on the heap, as every config here: ~94 KB, a frame that overflowed a 128 KiB stack
     * (ulimit -s 128: SIGSEGV in every command that reads a store's config) */
    config *probe = malloc(sizeof *probe);
    if (!probe) {
        free(kv);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    if (config_from_canonical(probe, kv, nkv, e)) {
        err_prefix(e, "%s: ", what);
        *damaged = 1;
        free(kv);
        free(probe);
        return ERR_STORE;
    }
    /* the complete form: a key younger than the run is absent from RUN, and takes the value
     * the run computed with (config_from_canonical's before-key table). Changes apply to it
     * and the resume compares against it, so a younger key can be named, changed and
     * recorded like any other. RUN's own texts are kept as they are: a change record's
     * old value is compared with them byte for byte */
    config_kv *full;
    size_t nfull;
    rc = config_canonical(probe, &full, &nfull, e);
    if (rc) {
        free(kv);
        free(probe);
        return rc;
    }
    for (size_t i = 0; i < nfull; i++) {
        const config_kv *own = find_kv(kv, nkv, full[i].key);
        if (own) full[i] = *own;
    }
    free(kv);
    kv = full;
    nkv = nfull;
    uint64_t k = 0;
    for (;; k++) {
        char key[64];
        ledger_config_key(key, sizeof key, k);
        snprintf(what, sizeof what, "%s/%s", store_url(st), key);
        rec_change ch;
        rc = ledger_read(st, REC_KIND_CHANGE, key, what, &ch, e);
        if (rc == STORE_NOT_FOUND) {
            rc = 0;
            break;
        }
        if (rc == STORE_CORRUPT) *damaged = 1, rc = ERR_STORE;
        if (rc) break;
        if (gens && ckpt_gens_add(gens, ch.seq)) rc = err_set(e, ERR_INTERNAL, "out of memory");
        for (size_t i = 0; i < ch.n && !rc; i++) {
            config_kv *t = find_kv(kv, nkv, ch.new_values[i].key);
            if (!t && (rc = newer_key(what, ch.new_values[i].key, e))) {
                /* a newer tandem's change: not damage */
            } else if (!t || strlen(ch.new_values[i].value) >= sizeof t->value) {
                rc = err_set(e, ERR_STORE, "%s: changes unknown key '%s'", what, ch.new_values[i].key);
                *damaged = 1;
            } else if (strcmp(t->value, ch.old_values[i].value) != 0) {
                /* a change starts from the config as the records before it left it */
                rc = err_set(e, ERR_STORE, "%s: changes %s from '%.60s', but the pinned config "
                             "held '%.60s' (the record is damaged, or not this run's)", what,
                             t->key, ch.old_values[i].value, t->value);
                *damaged = 1;
            } else {
                snprintf(t->value, sizeof t->value, "%s", ch.new_values[i].value);
            }
        }
        rec_change_free(&ch);
        if (!rc && config_from_canonical(probe, kv, nkv, e)) {
            err_prefix(e, "%s: ", what);
            rc = ERR_STORE;
            *damaged = 1;
        }
        if (rc) break;
    }
    free(probe);
    if (rc) {
        free(kv);
        return rc;
    }
    *kv_out = kv;
    *n_out = nkv;
    return 0;
}

/* run_config_read, with the health of RUN in *health (RUN_CONFIG_OK when 0 is returned). */
static int read_config(store *st, config *cfg, char *run_id, size_t cap, int *health, tdm_err *e) {
    config_kv *kv;
    size_t n;
    int damaged;
    *health = RUN_CONFIG_OK;
    int rc = read_pinned(st, &kv, &n, NULL, run_id, cap, NULL, &damaged, e);
    if (rc == STORE_NOT_FOUND) return missing_run(st, health, e);
    if (damaged) return damaged_run(st, health, e);
    if (rc) return rc;
    rc = config_from_canonical(cfg, kv, n, e);
    free(kv);
    if (rc) {
        err_prefix(e, "%s/RUN: ", store_url(st));
        return damaged_run(st, health, e);
    }
    return 0;
}

int run_config_read(store *st, config *cfg, char *run_id, size_t cap, tdm_err *e) {
    int health;
    return read_config(st, cfg, run_id, cap, &health, e);
}

int run_config_pinned(store *st, config *cfg, int *have, tdm_err *e) {
    char id[64];
    int health;
    *have = 0;
    int rc = read_config(st, cfg, id, sizeof id, &health, e);
    if (health != RUN_CONFIG_OK) return 0; /* none yet; a missing or damaged RUN: run_config_open's to say */
    if (!rc) *have = 1;
    return rc;
}

int run_config_check(store *st, int *health, tdm_err *e) {
    config *cfg = malloc(sizeof *cfg); /* ~94 KB: not on a small stack */
    char id[64];
    *health = RUN_CONFIG_OK;
    if (!cfg) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = read_config(st, cfg, id, sizeof id, health, e);
    free(cfg);
    return *health == RUN_CONFIG_OK ? rc : 0;
}

int run_config_require_run(store *st, tdm_err *e) {
    int health;
    tdm_err ce;
    int rc = run_config_check(st, &health, &ce);
    if (rc || health == RUN_CONFIG_NO_RUN) *e = ce;
    return rc ? rc : health == RUN_CONFIG_NO_RUN ? ce.code : 0;
}

int run_config_read_run(store *st, rec_run *run, tdm_err *e) {
    int health;
    char what[600];
    snprintf(what, sizeof what, "%s/RUN", store_url(st));
    int rc = ledger_read(st, REC_KIND_RUN, LEDGER_RUN, what, run, e);
    if (rc == STORE_NOT_FOUND) return missing_run(st, &health, e);
    if (rc == STORE_CORRUPT) return damaged_run(st, &health, e);
    return rc;
}

static int create_run(store *st, const config *cfg, const char *const *domains, int M,
                      run_config_result *out, tdm_err *e) {
    /* a run inside a sweep's root would sit beside its points (verify and gc of the one
     * never see the others): the root holds points only */
    int sweep_root = 0;
    int src = store_exists(st, LEDGER_SWEEP, &sweep_root, e);
    if (src) return src;
    if (sweep_root)
        return err_set(e, ERR_USAGE, "%s is the root of a sweep (it holds SWEEP; its points are in %s/<label>): run "
                       "a point with the study's --sweep and --point I, or give this run a --store of its own",
                       store_url(st), store_url(st));
    /* nor inside a comparison's (its RUN beside dmo/ and the finals made the finished
     * comparison refuse to report, "holds a run") */
    char runs[200];
    if (run_config_compare_runs(st, runs, sizeof runs) > 0)
        return err_set(e, ERR_USAGE, "%s is the store of a tandem compare (its runs are in it as %s): give this run "
                       "a --store of its own", store_url(st), runs);
    /* a new run only: a run begun before the name was reserved resumes, and is read */
    for (int m = 0; m < M; m++)
        if (dataset_name_reserved(domains[m]))
            return err_set(e, ERR_USAGE, "domain name '%s' " DATASET_RESERVED_WHY " in the dataset before starting a run", domains[m]);
    config_kv *kv;
    size_t n;
    int rc = config_canonical(cfg, &kv, &n, e);
    if (rc) return rc;
    rec_run run = {.created = (uint64_t)time(NULL), .nconfig = n, .M = M};
    for (int m = 0; m < M && m < REC_MAX_DOMAINS; m++)
        snprintf(run.domains[m], REC_DOMAIN_MAX, "%s", domains[m]);
    unsigned char rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
        memcpy(rnd, &t, sizeof rnd);
    }
    char hex[2 * sizeof rnd + 1];
    hex_lower(rnd, sizeof rnd, hex);
    snprintf(run.run_id, sizeof run.run_id, "run-%s", hex);
    run.config = as_rec(kv, n);
    if (!run.config) {
        free(kv);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    rec_config_hash(run.config, n, &run.config_sha);
    if (run_config_identity(&run, &out->identity)) {
        free(run.config);
        free(kv);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    out->has_identity = 1;
    size_t len;
    void *data = rec_run_encode(&run, &len);
    /* a test freezes a start here: RUN read as absent, not yet created */
    testhook_stop_at("run-create");
    rc = store_put(st, LEDGER_RUN, data, len, STORE_CREATE, e);
    free(run.config);
    free(kv);
    if (rc == STORE_EXISTS) { /* another tandem created the run at the same moment: run_config_open judges it */
        free(data);
        return rc;
    }
    /* read back once: an endpoint that answers a PUT 200 and keeps nothing (a proxy, a
     * broken S3-compatible server) left a run whose every later start said "RUN is
     * missing ... start the run over in a new store" */
    void *back = NULL;
    size_t bn = 0;
    int got = rc ? 0 : store_get(st, LEDGER_RUN, &back, &bn, NULL, e);
    int same = !rc && got == 0 && bn == len && !memcmp(back, data, len);
    free(back);
    free(data);
    if (rc) return rc;
    if (!same && (got == 0 || got == STORE_NOT_FOUND))
        return err_set(e, ERR_STORE, "%s: the store acknowledged the write of RUN but %s it: the endpoint "
                       "loses or changes writes (check the endpoint, or a proxy in front of it); nothing of the "
                       "run was written after it", store_url(st), got == STORE_NOT_FOUND ? "does not hold" : "holds other bytes in");
    if (got) return got;
    /* a study begun into the same root at the same moment (its SWEEP checked for RUN
     * before this put it): both looked before either wrote. Said, and this RUN taken back
     * (the study does the same on its side: at most one goes on) */
    int raced = 0;
    tdm_err re;
    if (store_exists(st, LEDGER_SWEEP, &raced, &re) == 0 && raced) {
        store_delete(st, LEDGER_RUN, &re);
        return err_set(e, ERR_USAGE, "%s became the root of a sweep while this run began there: give this run a "
                       "--store of its own", store_url(st));
    }
    out->created = 1;
    snprintf(out->run_id, sizeof out->run_id, "%s", run.run_id);
    return 0;
}

/* A pinned or given value for a refusal's list: whole when it fits `cap`, else its head and
 * its tail (two values differing at the end, as caps lists do, stay told apart). */
static void value_shown(const char *v, char *out, size_t cap) {
    size_t n = strlen(v);
    if (n < cap) {
        memcpy(out, v, n + 1);
        return;
    }
    size_t part = (cap - 4) / 2;
    snprintf(out, cap, "%.*s...%s", (int)part, v, v + n - part);
}

/* The options that resume with the pinned values of the keys that differ: "--set K=V" for
 * each (a value of other characters than [A-Za-z0-9._:+,-] in single quotes; path keys
 * and values too long to read left out: sets empty then), into sets; the keys, comma-
 * separated, into keyl (for --allow-change; empty when they do not fit). */
static void pinned_as_sets(const char *const *keys, size_t nk, config_kv *pinned, size_t npinned, char *sets,
                           size_t cap, char *keyl, size_t kcap) {
    size_t used = 0, kused = 0;
    sets[0] = keyl[0] = '\0';
    int ok = 1;
    for (size_t i = 0; i < nk && ok; i++) {
        const config_kv *a = find_kv(pinned, npinned, keys[i]);
        if (!a || config_key_path(keys[i]) || strlen(a->value) > 100 || strchr(a->value, '\'')) {
            ok = 0;
            break;
        }
        int plain = a->value[0] && strspn(a->value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+,-") ==
                                    strlen(a->value);
        int w = snprintf(sets + used, cap - used, plain ? "%s--set %s=%s" : "%s--set '%s=%s'", used ? " " : "",
                         keys[i], a->value);
        if (w < 0 || (size_t)w >= cap - used) ok = 0;
        else used += (size_t)w;
    }
    if (!ok) sets[0] = '\0';
    for (size_t i = 0; i < nk; i++) {
        int w = snprintf(keyl + kused, kcap - kused, "%s%s", kused ? "," : "", keys[i]);
        if (w < 0 || (size_t)w >= kcap - kused) {
            keyl[0] = '\0';
            break;
        }
        kused += (size_t)w;
    }
}

/* The seed the run's states were made with: HEAD's state, else the newest state that
 * decodes. 0 with *seed and the state's key in which; -1 when no state can be read. */
static int states_seed(store *st, uint64_t *seed, char *which, size_t cap) {
    tdm_err e;
    rec_head h;
    rec_state s;
    if (ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &e) == 0 &&
        ledger_read(st, REC_KIND_STATE, h.state, NULL, &s, &e) == 0) {
        *seed = s.seed;
        snprintf(which, cap, "%s", h.state);
        rec_state_free(&s);
        return 0;
    }
    store_list l;
    if (store_list_prefix(st, LEDGER_STATES, &l, &e)) return -1;
    int found = -1;
    uint64_t best = 0;
    for (size_t i = 0; i < l.n; i++) {
        uint64_t q;
        if (ledger_key_index(l.keys[i], LEDGER_STATES, &q) || (found == 0 && q <= best)) continue;
        if (ledger_read(st, REC_KIND_STATE, l.keys[i], NULL, &s, &e) == 0) {
            *seed = s.seed;
            best = q;
            snprintf(which, cap, "%s", l.keys[i]);
            found = 0;
            rec_state_free(&s);
        }
    }
    store_list_free(&l);
    return found;
}

int run_config_seed_mismatch(store *st, uint64_t pinned, uint64_t *seed, char *which, size_t cap) {
    return states_seed(st, seed, which, cap) == 0 && *seed != pinned;
}

static int allowed_key(const char *key, char *const *allowed, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(allowed[i], key) == 0) return 1;
    return 0;
}

int run_config_open(store *st, const config *cfg, const char *const *domains, int M, char *const *allowed,
                    int n_allowed, int store_defaulted, run_config_result *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    config_kv *pinned;
    size_t npinned;
    int damaged;
    int rc = read_pinned(st, &pinned, &npinned, &out->gens, out->run_id,
                         sizeof out->run_id, &out->identity, &damaged, e);
    out->has_identity = rc == 0;
    if (rc == STORE_NOT_FOUND) {
        /* a new run only where there is none: a store that holds a run's objects but lost
         * its RUN must not silently become another run (with whatever config is given) */
        char found[300];
        int has = 0, health;
        /* a test freezes a start here: RUN read as absent */
        testhook_stop_at("run-read");
        rc = run_config_run_state(st, &has, found, sizeof found, e);
        if (rc) return rc;
        if (!has) {
            rc = create_run(st, cfg, domains, M, out, e);
            if (rc != STORE_EXISTS) return rc;
        }
        /* another tandem created the run since RUN was read as absent (two starts at the
         * same instant: the put found RUN there, or the run's objects were there by the
         * time they were looked for — "RUN is missing" was false then): its RUN is judged
         * as any RUN found is — the same config goes on with it (the lease decides who
         * writes), another one is refused */
        ckpt_gens_free(&out->gens);
        memset(out, 0, sizeof *out);
        rc = read_pinned(st, &pinned, &npinned, &out->gens, out->run_id, sizeof out->run_id, &out->identity,
                         &damaged, e);
        out->has_identity = rc == 0;
        if (rc == STORE_NOT_FOUND && has) return missing_run(st, &health, e);
        if (rc == STORE_NOT_FOUND) /* created and gone again at once: nothing to go on from */
            return err_set(e, ERR_STORE, "%s: another tandem created this run at the same moment and its RUN "
                           "is gone again; run again", store_url(st));
    }
    int health;
    if (damaged) return damaged_run(st, &health, e);
    if (rc) return rc;
    config *pc = malloc(sizeof *pc); /* ~94 KB: on the heap, not on a small stack (ulimit -s) */
    if (!pc) {
        free(pinned);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    rc = config_from_canonical(pc, pinned, npinned, e);
    if (rc) {
        free(pinned);
        free(pc);
        err_prefix(e, "%s/RUN: ", store_url(st));
        return damaged_run(st, &health, e);
    }
    /* where the run lives is not part of what it is */
    snprintf(pc->store, sizeof pc->store, "%s", cfg->store);
    const char **keys = NULL;
    size_t nk = 0;
    rc = config_diff(pc, cfg, &keys, &nk, e);
    /* what says where or how the run executes, not what it computes, may change on a
     * resume (a requeue onto other hardware, another log directory, retention, the grace
     * or how a commit reaches the store: the same bytes either way); the schema says which */
    size_t kept = 0;
    /* model.attention picks the GPU's attention in bf16; on the CPU and in fp32 every value
     * runs the same kernels (the same bits), so there a difference changes nothing: a run
     * pinned before the key existed (builtin) resumes with today's default on the CPU */
    int attention_matters = cfg->run.device == CONFIG_DEVICE_CUDA && cfg->run.precision == CONFIG_PRECISION_BF16;
    /* the keys flagged F_DMO_ONLY (tandem.alpha_cut, overfit_cap, start_epochs, skip_pinned)
     * bound, start or skip the α step and its probe, which a fixed run never takes: a final
     * run pinned before alpha_cut existed (any) resumes with today's default, and one given
     * overfit_cap or start_epochs in its config (as the DMO's) computes the same either way */
    int dmo_matters = cfg->run.mode != CONFIG_MODE_FIXED || pc->run.mode != CONFIG_MODE_FIXED;
    config_kv *now = NULL;
    size_t nnow = 0;
    if (!rc && nk) rc = config_canonical(cfg, &now, &nnow, e);
    for (size_t i = 0; !rc && i < nk; i++) {
        /* a path spelled another way (./cfg.yaml, the config's absolute path in a rendered
         * job, a link) that names the same file is no change: what it holds is pinned by
         * content anyway (data.mp, model.mp) */
        config_kv *a = find_kv(pinned, npinned, keys[i]), *b = find_kv(now, nnow, keys[i]);
        if (config_key_path(keys[i]) && a && b && same_path(a->value, b->value)) continue;
        if (config_key_pinned(keys[i]) && (attention_matters || strcmp(keys[i], "model.attention")) &&
            (dmo_matters || !config_key_dmo_only(keys[i])))
            keys[kept++] = keys[i];
    }
    nk = kept;
    if (rc || nk == 0) {
        free(now);
        free(keys);
        free(pinned);
        free(pc);
        return rc;
    }
    char list[2048] = "";
    int refused = 0, relative_hint = 0;
    for (size_t i = 0; i < nk; i++) {
        config_kv *a = find_kv(pinned, npinned, keys[i]), *b = find_kv(now, nnow, keys[i]);
        size_t used = strlen(list);
        char va[130], vb[130];
        value_shown(a ? a->value : "?", va, sizeof va);
        value_shown(b ? b->value : "?", vb, sizeof vb);
        snprintf(list + used, sizeof list - used, "%s  %s: %s -> %s", used ? "\n" : "", keys[i], va, vb);
        if (!allowed_key(keys[i], allowed, n_allowed)) refused = 1;
        if (config_key_path(keys[i]) && a && a->value[0] && a->value[0] != '/' && !strstr(a->value, "://") &&
            strcmp(a->value, "random") && !relative_hint) {
            relative_hint = 1;
            used = strlen(list);
            snprintf(list + used, sizeof list - used, "\n  (%s is pinned as the first start wrote it, relative to "
                     "the directory it was started in: resumed from there, any spelling of the same file is "
                     "the same)", keys[i]);
        }
    }
    uint64_t made = 0;
    char which[REC_KEY_MAX];
    if (refused && pc->run.seed != cfg->run.seed &&
        run_config_seed_mismatch(st, pc->run.seed, &made, which, sizeof which) && made == cfg->run.seed) {
        /* the states were made with the seed given, not the pinned one: RUN is the odd one
         * out (another run's RUN put in its place, or a damaged one) */
        rc = err_set(e, ERR_STORE,
                     "%s/RUN pins run.seed = %llu, but the run's states were made with seed %llu "
                     "(%s): RUN is not this run's pinned config (another run's RUN, or a damaged one). "
                     RUN_REPAIR, store_url(st), (unsigned long long)pc->run.seed,
                     (unsigned long long)made, which);
    } else if (pc->run.seed != cfg->run.seed) {
        /* never recorded, even when allowed: every state, α record and data position of
         * the run derives from its seed, so no resume could continue it with another (the
         * change was recorded, then the load refused the states: the run was stranded) */
        rc = err_set(e, ERR_USAGE,
                     "the run in %s was created with run.seed = %llu; a run cannot change its seed "
                     "(everything it computed derives from it), also with --allow-change. For another "
                     "seed give another store (--store URL); these keys differ:\n%s",
                     store_url(st), (unsigned long long)pc->run.seed, list);
    } else if (refused && store_defaulted) {
        rc = err_set(e, ERR_USAGE,
                     "%s, the default store, holds a run created with another configuration; these "
                     "keys differ:\n%s\n  Give this run a store of its own with --store URL (e.g. "
                     "--store file://./runs/NAME), or resume that run with its pinned values",
                     store_url(st), list);
    } else if (refused) {
        char sets[1024], keyl[1024];
        pinned_as_sets(keys, nk, pinned, npinned, sets, sizeof sets, keyl, sizeof keyl);
        rc = err_set(e, ERR_USAGE,
                     "the run in %s was created with another configuration; these keys differ:\n%s\n"
                     "  Resume with the pinned values%s%s%s (a default that changed since the run began "
                     "keeps its pinned value so), or pass --allow-change %s to change them (the change is "
                     "recorded in the store)",
                     store_url(st), list, sets[0] ? ": add " : "", sets, sets[0] ? " to the command" : "",
                     keyl[0] ? keyl : "KEY[,KEY...]");
    } else {
        /* owned copies: written by run_config_record_change once the lease is held */
        rec_change *ch = &out->pending;
        ch->old_values = calloc(nk, sizeof *ch->old_values);
        ch->new_values = calloc(nk, sizeof *ch->new_values);
        ch->n = ch->old_values && ch->new_values ? nk : 0;
        for (size_t i = 0; i < ch->n; i++) {
            config_kv *a = find_kv(pinned, npinned, keys[i]), *b = find_kv(now, nnow, keys[i]);
            if (!a || !b) {
                /* both forms are complete (read_pinned, config_canonical): a key missing
                 * from either is a fault of this program, reported rather than followed */
                rc = err_set(e, ERR_INTERNAL, "config change: key '%s' missing from the %s form",
                             keys[i], a ? "current" : "pinned");
                break;
            }
            ch->old_values[i] = (rec_kv){strdup(a->key), strdup(a->value)};
            ch->new_values[i] = (rec_kv){strdup(b->key), strdup(b->value)};
            if (!ch->old_values[i].key || !ch->old_values[i].value || !ch->new_values[i].key ||
                !ch->new_values[i].value)
                rc = err_set(e, ERR_INTERNAL, "out of memory");
        }
        if (!ch->n) {
            free(ch->old_values);
            free(ch->new_values);
            memset(ch, 0, sizeof *ch);
            rc = err_set(e, ERR_INTERNAL, "out of memory");
        }
        snprintf(out->pending_list, sizeof out->pending_list, "%s", list);
        if (rc) run_config_result_free(out);
    }
    free(now);
    free(keys);
    free(pinned);
    free(pc);
    return rc;
}

/* Whether two change records change the same keys from the same values to the same
 * values (in the same order: both come from one comparison of the same configs). */
static int same_change(const rec_change *a, const rec_change *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->old_values[i].key, b->old_values[i].key) || strcmp(a->old_values[i].value, b->old_values[i].value) ||
            strcmp(a->new_values[i].key, b->new_values[i].key) || strcmp(a->new_values[i].value, b->new_values[i].value))
            return 0;
    return 1;
}

int run_config_record_change(store *st, ledger *ld, run_config_result *out, uint64_t at_seq, tdm_err *e) {
    if (!out->pending.n) return 0;
    out->pending.seq = at_seq;
    out->pending.created = (uint64_t)time(NULL);
    size_t len;
    void *data = rec_change_encode(&out->pending, &len);
    char key[64];
    ledger_config_key(key, sizeof key, out->gens.n);
    /* a writer taken over since it read the generations records nothing: its change
     * record would end the generation the new writer computes under, and everything that
     * writer commits would look fenced out */
    int rc = !data ? err_set(e, ERR_INTERNAL, "out of memory") : ld ? ledger_check_lease(ld, e) : 0;
    if (!rc) rc = store_put(st, key, data, len, STORE_CREATE, e);
    free(data);
    uint64_t seq = at_seq;
    if (rc == STORE_EXISTS) {
        /* written since this writer read the generations under its lease: by a writer that
         * checked its lease just before this one took it over. The very change this one
         * records (two identical starts at the same instant) is taken as recorded; any
         * other is not this writer's to judge */
        char what[600];
        snprintf(what, sizeof what, "%s/%s", store_url(st), key);
        rec_change there;
        tdm_err re;
        int same = 0;
        if (ledger_read(st, REC_KIND_CHANGE, key, what, &there, &re) == 0) {
            same = same_change(&there, &out->pending);
            seq = there.seq;
            rec_change_free(&there);
        }
        rc = same ? 0
                  : err_set(e, ERR_STORE, "%s: another writer recorded a different config change as %s at the "
                            "same moment; only one tandem may run on a store: run again (the pinned config "
                            "then includes that change)", store_url(st), key);
        if (same)
            fprintf(stderr, "tandem: %s already records this configuration change (another writer started with it "
                    "at the same moment)\n", what);
    } else if (!rc) {
        fprintf(stderr, "tandem: configuration change recorded as configs/%llu.mp:\n%s\n",
                (unsigned long long)out->gens.n, out->pending_list);
    }
    if (!rc) {
        out->changed = 1;
        if (ckpt_gens_add(&out->gens, seq)) rc = err_set(e, ERR_INTERNAL, "out of memory");
        rec_change_free(&out->pending);
    }
    return rc;
}

void run_config_result_free(run_config_result *out) {
    rec_change_free(&out->pending);
    ckpt_gens_free(&out->gens);
}
