/* sweep_view.c — a sweep's root as `tandem status ROOT` shows it; see sweep_view.h. */
#include "util/term.h"
#include "cli/sweep_view.h"

#include <stdlib.h>
#include <string.h>

#include "deploy/sweep_root.h"
#include "util/json.h"

/* α* of a point as "name 0.1234 name ..." (empty when it has none). */
static void alpha_text(const sweep_point *p, char *out, size_t cap) {
    size_t at = 0;
    out[0] = '\0';
    for (int m = 0; p->have_mixture && m < p->mixture.M && at < cap; m++)
        at += (size_t)snprintf(out + at, cap - at, "%s%s %.4f", m ? " " : "", p->mixture.names[m],
                               p->mixture.alpha[m]);
}

int sweep_view_status(store *st, const char *url, FILE *j, int *is_sweep, tdm_err *e) {
    *is_sweep = 0;
    sweep sw;
    rec_sweep *rec = malloc(sizeof *rec);
    if (!rec) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = sweep_root_read(st, &sw, rec, e);
    if (rc == STORE_NOT_FOUND) {
        free(rec);
        return 0;
    }
    if (rc == STORE_CORRUPT) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        rc = err_set(e, ERR_STORE, "%s; the points' own stores are untouched (tandem status %s/<point>)", why, url);
    }
    if (rc) {
        free(rec);
        return rc;
    }
    *is_sweep = 1;
    int w = 5; /* the label column: as wide as the longest label */
    for (size_t i = 0; i < sw.npoints; i++) {
        char label[2048];
        sweep_label(&sw, i, label, sizeof label);
        if ((int)strlen(label) > w) w = (int)strlen(label);
    }
    size_t counts[5] = {0};
    sweep_point *p = malloc(sizeof *p);
    if (!p) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc && j) {
        fprintf(j, ",\"sweep\":{\"root\":");
        json_str(j, url);
        fprintf(j, ",\"texts\":[");
        for (int k = 0; k < rec->n; k++) {
            if (k) fputc(',', j);
            json_str(j, rec->text[k]);
        }
        fprintf(j, "],\"points\":[");
    } else if (!rc) {
        printf("sweep     %s: %zu points (", url, sw.npoints);
        for (int k = 0; k < rec->n; k++) printf("%s--sweep %s", k ? " " : "", rec->text[k]);
        printf(")\n  %5s  %-8s  %-9s  %-*s  %s\n", "point", "state", "episode", w, "label", "alpha*");
    }
    for (size_t i = 0; !rc && i < sw.npoints; i++) {
        rc = sweep_point_read(url, &sw, i, p, e);
        if (rc) break;
        counts[p->state]++;
        if (j) {
            fprintf(j, "%s{\"index\":%zu,\"label\":", i ? "," : "", i);
            json_str(j, p->label);
            fprintf(j, ",\"store\":");
            json_str(j, p->url);
            fprintf(j, ",\"state\":");
            json_str(j, sweep_point_state_name(p->state));
            if (p->state == SWEEP_POINT_PENDING) fprintf(j, ",\"episode\":null,\"episodes\":null,\"mixture\":");
            else fprintf(j, ",\"episode\":%llu,\"episodes\":%llu,\"mixture\":", (unsigned long long)p->episode,
                         (unsigned long long)p->episodes);
            if (p->have_mixture) {
                fputc('{', j);
                for (int m = 0; m < p->mixture.M; m++) {
                    if (m) fputc(',', j);
                    json_key(j, p->mixture.names[m]);
                    json_num(j, p->mixture.alpha[m]);
                }
                fputc('}', j);
            } else {
                fputs("null", j);
            }
            fprintf(j, ",\"problem\":");
            json_str(j, p->state == SWEEP_POINT_DAMAGED ? p->why : NULL);
            fputc('}', j);
        } else {
            char ep[48], alpha[1024];
            if (p->state == SWEEP_POINT_PENDING) snprintf(ep, sizeof ep, "-");
            else snprintf(ep, sizeof ep, "%llu/%llu", (unsigned long long)p->episode, (unsigned long long)p->episodes);
            alpha_text(p, alpha, sizeof alpha);
            char shown[2048]; /* the label holds a sweep's values (paths too): no escapes */
            term_copy(shown, sizeof shown, p->label);
            printf("  %5zu  %-8s  %-9s  %-*s  %s\n", i, sweep_point_state_name(p->state), ep, w, shown,
                   p->state == SWEEP_POINT_DAMAGED ? p->why : alpha);
        }
    }
    if (!rc && j) {
        fprintf(j, "],\"counts\":{");
        for (int s = 0; s < 5; s++) fprintf(j, "%s\"%s\":%zu", s ? "," : "", sweep_point_state_name((sweep_point_state)s), counts[s]);
        fprintf(j, "}}");
    } else if (!rc) {
        printf("points    %zu finished, %zu running, %zu stopped (run them again to resume), %zu pending, %zu damaged\n",
               counts[SWEEP_POINT_FINISHED], counts[SWEEP_POINT_RUNNING], counts[SWEEP_POINT_STOPPED],
               counts[SWEEP_POINT_PENDING], counts[SWEEP_POINT_DAMAGED]);
    }
    /* a damaged point is a fault (as a damaged RUN is for one run): the table is out, and
     * the exit says so (a script polling the sweep must not read it as healthy) */
    if (!rc && counts[SWEEP_POINT_DAMAGED])
        rc = err_set(e, ERR_STORE, "%zu of %zu points damaged (their rows say why); `tandem status %s/<label>` "
                     "says more of each", counts[SWEEP_POINT_DAMAGED], sw.npoints, url);
    free(p);
    free(rec);
    sweep_free(&sw);
    return rc;
}
