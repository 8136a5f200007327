/* progress.c — per-episode progress lines; see progress.h. */
#include "report/progress.h"

#include <unistd.h>

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <math.h>
#include <time.h>

#include "util/json.h"
#include "util/outfile.h"

/* `{"event":EVENT,"time":T` on stdout: the head of every JSON event (the caller closes) */
static void json_begin(const char *event) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stdout, "{\"event\":");
    json_str(stdout, event);
    fprintf(stdout, ",\"time\":%lld.%03ld", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
}

/* After each line: a stream that could not be written (a reader gone, a full disk) is
 * said once on stderr; the run goes on (its product is the store, not its output) and
 * its exit status says the output was lost (cli/main.c). */
static void progress_flush(FILE *f) {
    static int said[2];
    int err = outfile_stream_error(f), which = f == stdout ? 0 : 1;
    if (!err || said[which]) return;
    said[which] = 1;
    if (f == stdout)
        fprintf(stderr, "tandem: standard output can no longer be written (%s): the run's "
                        "events stop here; the run goes on and exits 1 if nothing else fails\n",
                strerror(err));
    /* stderr itself lost: nowhere left to say it */
}

static void json_end(void) {
    fprintf(stdout, "}\n");
    progress_flush(stdout);
}

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
        f = stdout;
        json_begin("episode");
        fprintf(f, ",\"episode\":%llu,\"episodes\":%llu,\"seq\":%llu",
                (unsigned long long)p->episode, (unsigned long long)p->episodes,
                (unsigned long long)p->seq);
        fprintf(f, ",\"domains\":[");
        for (int m = 0; m < p->M; m++) {
            if (m) fputc(',', f);
            json_str(f, p->names[m]);
        }
        fputc(']', f);
        json_doubles(f, "loss", p->loss, p->M);
        if (p->loss_u) json_doubles(f, "loss_u", p->loss_u, p->M);
        if (p->loss_w) json_doubles(f, "loss_w", p->loss_w, p->M);
        json_doubles(f, "alpha", p->alpha, p->M);
        fprintf(f, ",\"tokens_per_s\":");
        json_num(f, p->tokens_per_s);
        fprintf(f, ",\"since_commit_s\":");
        json_num(f, p->since_commit_s);
        fprintf(f, ",\"eta_s\":");
        json_num(f, p->eta_s);
        json_end();
        return;
    }
    char since[32], eta[32];
    duration(since, sizeof since, p->since_commit_s);
    duration(eta, sizeof eta, p->eta_s);
    if (mode == PROGRESS_BRIEF && p->episode >= p->episodes) {
        progress_tty_end(); /* the run's last episode: the line gives way to what follows */
        return;
    }
    if (mode == PROGRESS_BRIEF) {
        progress_tty("episode %llu/%llu | %.0f tok/s | ETA %s", (unsigned long long)p->episode,
                     (unsigned long long)p->episodes, p->tokens_per_s, eta);
        return;
    }
    fprintf(f, "episode %llu/%llu step %llu | loss", (unsigned long long)p->episode,
            (unsigned long long)p->episodes, (unsigned long long)p->seq);
    for (int m = 0; m < p->M; m++) fprintf(f, " %s %.3f", p->names[m], p->loss[m]);
    fprintf(f, " | alpha");
    for (int m = 0; m < p->M; m++) fprintf(f, " %.3f", p->alpha[m]);
    fprintf(f, " | %.0f tok/s | commit %s ago | ETA %s\n", p->tokens_per_s, since, eta);
    progress_flush(f);
}

void progress_event(FILE *f, int mode, const char *event, const char *message) {
    if (mode == PROGRESS_QUIET) return;
    if (mode == PROGRESS_JSON) {
        json_begin(event);
        fprintf(stdout, ",\"message\":");
        json_str(stdout, message);
        json_end();
        return;
    }
    if (mode == PROGRESS_BRIEF) progress_tty_end(); /* the status line gives way */
    fprintf(f, "%s\n", message);
    progress_flush(f);
}

void progress_commit(int mode, uint64_t seq, const char *state) {
    if (mode != PROGRESS_JSON) return;
    json_begin("commit");
    fprintf(stdout, ",\"seq\":%llu,\"state\":", (unsigned long long)seq);
    json_str(stdout, state);
    json_end();
}

void progress_error(int mode, int code, const char *message) {
    if (mode != PROGRESS_JSON) return;
    json_begin("error");
    fprintf(stdout, ",\"code\":%d,\"message\":", code);
    json_str(stdout, message);
    json_end();
}

void progress_end(int mode, int code, uint64_t episode, uint64_t episodes, uint64_t seq, int M,
                  const char *const *names, const double *mixture) {
    if (mode != PROGRESS_JSON) return;
    json_begin("end");
    fprintf(stdout, ",\"code\":%d,\"episode\":%llu,\"episodes\":%llu,\"seq\":%llu", code,
            (unsigned long long)episode, (unsigned long long)episodes, (unsigned long long)seq);
    if (mixture) {
        fprintf(stdout, ",\"mixture\":{");
        for (int m = 0; m < M; m++) {
            if (m) fputc(',', stdout);
            json_key(stdout, names[m]);
            json_num(stdout, mixture[m]);
        }
        fputc('}', stdout);
    }
    json_end();
}

int progress_on_terminal(void) { return isatty(STDERR_FILENO); }

void progress_tty(const char *fmt, ...) {
    if (!progress_on_terminal()) return;
    va_list ap;
    va_start(ap, fmt);
    fputc('\r', stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\033[K", stderr);
    va_end(ap);
    fflush(stderr);
}

void progress_tty_end(void) {
    if (!progress_on_terminal()) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}
