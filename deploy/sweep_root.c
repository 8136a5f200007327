/* sweep_root.c — a sweep's root read back; see sweep_root.h. */
#include "deploy/sweep_root.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/run_config.h"
#include "ledger/audit.h"
#include "ledger/keys.h"
#include "ledger/read.h"

const char *sweep_point_state_name(sweep_point_state st) {
    static const char *const names[] = {"pending", "running", "stopped", "finished", "damaged"};
    return (unsigned)st < sizeof names / sizeof *names ? names[st] : "?";
}

/* Whether two parsed studies are the same: the same keys with the same values in order
 * (hence the same points, labels and stores). */
static int same_study(const sweep *a, const sweep *b) {
    if (a->nkeys != b->nkeys) return 0;
    for (int k = 0; k < a->nkeys; k++) {
        if (strcmp(a->key[k], b->key[k]) || a->nvals[k] != b->nvals[k]) return 0;
        for (int i = 0; i < a->nvals[k]; i++)
            if (strcmp(a->val[k][i], b->val[k][i])) return 0;
    }
    return 1;
}

/* The texts of a record joined as a command line would give them. */
static void texts_line(char *const *texts, int n, char *out, size_t cap) {
    size_t at = 0;
    out[0] = '\0';
    for (int k = 0; k < n && at < cap; k++)
        at += (size_t)snprintf(out + at, cap - at, "%s--sweep %s", k ? " " : "", texts[k]);
}

int sweep_root_read(store *root, sweep *s, rec_sweep *rec, tdm_err *e) {
    memset(s, 0, sizeof *s);
    rec_sweep *w = malloc(sizeof *w);
    if (!w) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = ledger_read(root, REC_KIND_SWEEP, LEDGER_SWEEP, NULL, w, e);
    if (!rc) {
        char *texts[REC_SWEEP_MAX_KEYS];
        for (int k = 0; k < w->n; k++) texts[k] = w->text[k];
        tdm_err pe = {0};
        if (sweep_parse(s, texts, w->n, &pe) || s->npoints != w->points) {
            sweep_free(s);
            rc = err_set(e, STORE_CORRUPT, "%s/%s: the study it records does not parse (%s)", store_url(root),
                         LEDGER_SWEEP, pe.code ? pe.msg : "its number of points does not match");
        }
    }
    if (!rc && rec) *rec = *w;
    free(w);
    return rc;
}

int sweep_root_record(store *root, const char *root_url, char *const *texts, int n, const sweep *s, tdm_err *e) {
    if (n > REC_SWEEP_MAX_KEYS) return err_set(e, ERR_USAGE, "--sweep: at most %d keys", REC_SWEEP_MAX_KEYS);
    rec_sweep *w = calloc(1, sizeof *w);
    if (!w) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = 0;
    for (int k = 0; !rc && k < n; k++) {
        if (strlen(texts[k]) >= REC_SWEEP_TEXT_MAX)
            rc = err_set(e, ERR_USAGE, "--sweep %.40s...: longer than %d bytes; split the study", texts[k],
                         REC_SWEEP_TEXT_MAX - 1);
        else snprintf(w->text[k], REC_SWEEP_TEXT_MAX, "%s", texts[k]);
    }
    w->n = n;
    w->points = s->npoints;
    size_t len = 0;
    void *data = rc ? NULL : rec_sweep_encode(w, &len);
    if (!rc && !data) rc = err_set(e, ERR_INTERNAL, "out of memory");
    /* a sweep's root holds its points only: not inside a run's store (its verify and gc
     * would never see the points) */
    int has_run = 0, has_sweep = 0;
    if (!rc) rc = store_exists(root, LEDGER_SWEEP, &has_sweep, e);
    if (!rc && !has_sweep) rc = store_exists(root, LEDGER_RUN, &has_run, e); /* a study begun: its points go on */
    if (!rc && has_run)
        rc = err_set(e, ERR_USAGE, "%s holds a run (RUN): a sweep's root holds only its points, in folders; give the "
                     "study a --store of its own", root_url);
    char runs[200];
    if (!rc && !has_sweep && run_config_compare_runs(root, runs, sizeof runs) > 0)
        rc = err_set(e, ERR_USAGE, "%s is the store of a tandem compare (its runs are in it as %s): give the study a "
                     "--store of its own", root_url, runs);
    int created = 0;
    if (!rc) rc = store_put(root, LEDGER_SWEEP, data, len, STORE_CREATE, e), created = !rc;
    free(data);
    /* a run begun into the same root at the same moment (it checked for SWEEP before this
     * put it): said, and this SWEEP taken back (the run does the same: at most one goes on) */
    if (created) {
        int raced = 0;
        tdm_err re;
        if (store_exists(root, LEDGER_RUN, &raced, &re) == 0 && raced) {
            store_delete(root, LEDGER_SWEEP, &re);
            rc = err_set(e, ERR_USAGE, "%s: a run began there while this study did: give the study a --store of its "
                         "own", root_url);
        }
    }
    if (rc == STORE_EXISTS) { /* another point wrote it: the same study? */
        sweep there;
        rec_sweep *got = malloc(sizeof *got);
        rc = got ? sweep_root_read(root, &there, got, e) : err_set(e, ERR_INTERNAL, "out of memory");
        if (rc == STORE_CORRUPT) {
            char why[sizeof e->msg];
            snprintf(why, sizeof why, "%s", e->msg);
            rc = err_set(e, ERR_STORE, "%s (the record of the study under %s: restore it from a copy, or "
                         "delete it and run a point again to write it anew)", why, root_url);
        }
        if (!rc) {
            if (!same_study(&there, s)) {
                char have[1024], want[1024], *gt[REC_SWEEP_MAX_KEYS];
                for (int k = 0; k < got->n; k++) gt[k] = got->text[k];
                texts_line(gt, got->n, have, sizeof have);
                texts_line(texts, n, want, sizeof want);
                rc = err_set(e, ERR_USAGE, "%s holds another study (%s), not this one (%s): give each study "
                             "its own --store", root_url, have, want);
            }
            sweep_free(&there);
        }
        free(got);
    }
    free(w);
    return rc;
}

void sweep_point_url(const char *root_url, const sweep *s, size_t i, char *out, size_t cap) {
    char label[2048];
    sweep_label(s, i, label, sizeof label);
    size_t n = strlen(root_url);
    while (n > 0 && root_url[n - 1] == '/') n--;
    snprintf(out, cap, "%.*s/%s", (int)n, root_url, label);
}

int sweep_point_read(const char *root_url, const sweep *s, size_t i, sweep_point *p, tdm_err *e) {
    memset(p, 0, sizeof *p);
    p->index = i;
    sweep_label(s, i, p->label, sizeof p->label);
    sweep_point_url(root_url, s, i, p->url, sizeof p->url);
    p->state = SWEEP_POINT_PENDING;
    tdm_err oe = {0};
    store *st = store_open_existing(p->url, STORE_OPEN_READ_ONLY, &oe);
    if (!st) {
        if (oe.code == ERR_STORE && strstr(oe.msg, "no store at")) return 0; /* not started */
        /* something that is no store in the point's place (a file, a FIFO, a dangling
         * link): this point's problem, said in its row — the study's others still report
         * (before: results and status stopped at it, exit 3, no row at all) */
        p->state = SWEEP_POINT_DAMAGED;
        snprintf(p->why, sizeof p->why, "%s", oe.msg);
        return 0;
    }
    int health = RUN_CONFIG_OK;
    int rc = run_config_check(st, &health, e);
    if (!rc && health == RUN_CONFIG_NO_RUN) {
        store_close(st);
        return 0;
    }
    if (!rc && health != RUN_CONFIG_OK) {
        p->state = SWEEP_POINT_DAMAGED;
        snprintf(p->why, sizeof p->why, "%s", e->msg);
        store_close(st);
        return 0;
    }
    config *cfg = malloc(sizeof *cfg); /* ~95 KB: off the stack (ulimit -s 128) */
    char run_id[64];
    rec_head h;
    rec_state rs;
    int have = 0;
    if (!rc && !cfg) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = run_config_read(st, cfg, run_id, sizeof run_id, e);
    /* the run there must be this point's: its swept keys hold the point's values (another
     * run's store copied or run into the point's place was reported as the point, exit 0) */
    for (int k = 0; !rc && k < s->nkeys; k++) {
        config *want = malloc(sizeof *want);
        char got[CONFIG_STR_MAX], is[CONFIG_STR_MAX];
        const char *v = s->val[k][sweep_value_at(s, i, k)];
        tdm_err ve;
        int ok = want && (memcpy(want, cfg, sizeof *cfg), config_set(want, s->key[k], v, &ve) == 0) &&
                 !config_value_text(want, s->key[k], is, sizeof is) && !config_value_text(cfg, s->key[k], got, sizeof got);
        if (ok && strcmp(is, got)) {
            p->state = SWEEP_POINT_DAMAGED;
            if (config_key_noecho(s->key[k]))
                snprintf(p->why, sizeof p->why, "%.300s holds a run whose %.100s is not this point's: another run's "
                         "store; move it away and run the point", p->url, s->key[k]);
            else
                snprintf(p->why, sizeof p->why, "%.300s holds a run whose %.100s is %.200s, not this point's %.200s: "
                         "another run's store; move it away and run the point", p->url, s->key[k], got, is);
            free(want);
            goto out;
        }
        free(want);
    }
    char damage[1200] = "";
    if (!rc) {
        p->episodes = (uint64_t)(cfg->run.episodes > 0 ? cfg->run.episodes : 0);
        p->fixed = cfg->run.mode == CONFIG_MODE_FIXED;
        rc = audit_head_damage(st, &h, &rs, &have, damage, sizeof damage, e);
        if (rc) { /* HEAD or its state unreadable: the run's, not the store's failure */
            p->state = SWEEP_POINT_DAMAGED;
            snprintf(p->why, sizeof p->why, "%s", e->msg);
            rc = 0;
            have = 0;
            goto out;
        }
    }
    if (!rc && !have) {
        /* HEAD missing (a first commit cut off before HEAD moved, or HEAD lost) or unusable:
         * where a resume goes on from, as `tandem status STORE` says (seed only: a point's
         * store) */
        char key[64];
        size_t listed = 0;
        tdm_err le;
        if (audit_newest_listed(st, cfg->run.seed, NULL, damage[0] ? &h : NULL, &rs, key, sizeof key, &listed, &have,
                                &le))
            have = 0;
    }
    if (!rc && have) {
        p->episode = rs.episode;
        if (!strcmp(rs.step, "done")) p->state = SWEEP_POINT_FINISHED;
        rec_state_free(&rs);
    }
    if (!rc && p->state == SWEEP_POINT_FINISHED && !p->fixed) {
        int got = ledger_read(st, REC_KIND_MIXTURE, LEDGER_MIXTURE, NULL, &p->mixture, e);
        if (!got) p->have_mixture = 1;
        else if (got != STORE_NOT_FOUND && got != STORE_CORRUPT) rc = got;
    }
    if (!rc && p->state != SWEEP_POINT_FINISHED) {
        audit_lease l;
        rc = audit_lease_read(st, &l, e);
        if (!rc) p->state = l.state == AUDIT_LEASE_HELD ? SWEEP_POINT_RUNNING : SWEEP_POINT_STOPPED;
    }
out:
    free(cfg);
    store_close(st);
    return rc;
}
