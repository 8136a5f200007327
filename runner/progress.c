/* progress.c — per-episode progress lines; see progress.h. */
#include "runner/progress.h"

#include <math.h>

#include "util/json.h"

static void duration(char *buf, size_t cap, double s) {
    if (s < 0 || !isfinite(s)) snprintf(buf, cap, "-");
    else if (s < 60) snprintf(buf, cap, "%.0fs", s);
    else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static void json_doubles(FILE *f, const char *key, const double *v, int M) {
    fputc(',', f);
    json_key(f, key);
    fputc('[', f);
    for (int m = 0; m < M; m++) {
        if (m) fputc(',', f);
        json_num(f, v[m]); /* a diverged loss (NaN, Inf) is null, not invalid JSON */
    }
    fputc(']', f);
}

void progress_print(FILE *f, int mode, const progress_line *p) {
    if (mode == PROGRESS_QUIET) return;
    if (mode == PROGRESS_JSON) {
        fprintf(f, "{\"event\":\"episode\",\"episode\":%llu,\"episodes\":%llu,\"seq\":%llu",
                (unsigned long long)p->episode, (unsigned long long)p->episodes,
                (unsigned long long)p->seq);
        fprintf(f, ",\"domains\":[");
        for (int m = 0; m < p->M; m++) {
            if (m) fputc(',', f);
            json_str(f, p->names[m]);
        }
        fputc(']', f);
        json_doubles(f, "loss", p->loss, p->M);
        json_doubles(f, "loss_u", p->loss_u, p->M);
        json_doubles(f, "loss_w", p->loss_w, p->M);
        json_doubles(f, "alpha", p->alpha, p->M);
        fprintf(f, ",\"tokens_per_s\":");
        json_num(f, p->tokens_per_s);
        fprintf(f, ",\"since_commit_s\":");
        json_num(f, p->since_commit_s);
        fprintf(f, ",\"eta_s\":");
        json_num(f, p->eta_s);
        fprintf(f, "}\n");
        fflush(f);
        return;
    }
    char since[32], eta[32];
    duration(since, sizeof since, p->since_commit_s);
    duration(eta, sizeof eta, p->eta_s);
    fprintf(f, "episode %llu/%llu step %llu | loss", (unsigned long long)p->episode,
            (unsigned long long)p->episodes, (unsigned long long)p->seq);
    for (int m = 0; m < p->M; m++) fprintf(f, " %s %.3f", p->names[m], p->loss[m]);
    fprintf(f, " | alpha");
    for (int m = 0; m < p->M; m++) fprintf(f, " %.3f", p->alpha[m]);
    fprintf(f, " | %.0f tok/s | commit %s ago | ETA %s\n", p->tokens_per_s, since, eta);
    fflush(f);
}

void progress_event(FILE *f, int mode, const char *event, const char *message) {
    if (mode == PROGRESS_QUIET) return;
    if (mode == PROGRESS_JSON) {
        fprintf(f, "{\"event\":");
        json_str(f, event);
        fprintf(f, ",\"message\":");
        json_str(f, message);
        fprintf(f, "}\n");
    } else {
        fprintf(f, "%s\n", message);
    }
    fflush(f);
}
