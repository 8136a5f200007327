/* progress.c — per-episode progress lines; see progress.h. */
#include "report/progress.h"

#include <unistd.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>

#include <math.h>
#include <time.h>

#include "util/json.h"
#include "util/outfile.h"

/* ------------------------------------------------------------ the gated streams */

/* One gated stream (progress_guard_streams): what passes goes on to the stream it
 * replaced, `inner`, which keeps its own error accounting (cli/main.c reads stdout's). */
typedef struct out_gate {
    FILE *inner, *outer; /* the stream replaced; the gated one in its place */
    int fd;              /* inner's descriptor, polled (a cookie stream has no fileno) */
    int stuck;           /* gave up after a stop: every later write is dropped, so that no
                          * line comes out torn after a dropped one */
    int waited_ms;       /* waited since the stop, against GATE_STOP_WAIT_MS */
    unsigned long long dropped_bytes, dropped_lines;
} out_gate;

#define GATE_SLICE_MS 100      /* how often a wait looks at the stop flag */
#define GATE_STOP_WAIT_MS 1000 /* the most a stream may hold a stopping run, in all */

static int (*gate_stop_pending)(void);
static out_gate gates[2]; /* stdout, stderr */
static int gate_depth;

/* Whether the next PIPE_BUF bytes may be written to g's descriptor without blocking: 1
 * once it takes them (or reports an error or hang-up, which the write then says, or
 * cannot be polled: written as before); 0 when a stop is pending and the stream has held
 * the run for GATE_STOP_WAIT_MS (then stuck). Called under the stream's lock (stdio holds
 * it around the cookie's write), which guards g. */
static int gate_ready(out_gate *g) {
    if (g->stuck) return 0;
    for (;;) {
        int stop = gate_stop_pending && gate_stop_pending();
        int left = GATE_STOP_WAIT_MS - g->waited_ms;
        int ms = !stop ? GATE_SLICE_MS : left > GATE_SLICE_MS ? GATE_SLICE_MS : left > 0 ? left : 0;
        struct pollfd p = {.fd = g->fd, .events = POLLOUT};
        int r = poll(&p, 1, ms);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 1;
        if (!stop || r < 0) continue; /* a signal (maybe the stop itself): look again */
        g->waited_ms += ms;
        if (g->waited_ms >= GATE_STOP_WAIT_MS) {
            g->stuck = 1;
            return 0;
        }
    }
}

/* The cookie's write: each piece of at most PIPE_BUF bytes passes the gate, then goes to
 * inner and is flushed there at once (so inner never holds bytes a later write would push
 * out unpolled). What the gate turns away is counted as written: the stream stays usable
 * for the stop's own path, and its lines simply do not appear. -1 (errno from inner's
 * write: EPIPE, ENOSPC) when inner fails. */
static ssize_t gate_write(void *cookie, const char *buf, size_t n) {
    out_gate *g = cookie;
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < PIPE_BUF ? n - done : PIPE_BUF;
        if (!gate_ready(g)) {
            g->dropped_bytes += n - done;
            for (size_t i = done; i < n; i++) g->dropped_lines += buf[i] == '\n';
            break;
        }
        if (fwrite(buf + done, 1, piece, g->inner) != piece || fflush(g->inner)) return -1;
        done += piece;
    }
    return (ssize_t)n;
}

/* A gated stream over `inner` (descriptor fd), buffered as `mode`; NULL when it cannot be
 * made (the stream is then left as it was). */
static FILE *gate_open(out_gate *g, FILE *inner, int fd, int mode) {
    memset(g, 0, sizeof *g);
    g->inner = inner, g->fd = fd;
    fflush(inner);
    FILE *f = fopencookie(g, "w", (cookie_io_functions_t){.write = gate_write});
    if (f) setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
    return g->outer = f;
}

void progress_guard_streams(int (*stop_pending)(void)) {
    if (gate_depth++) return;
    gate_stop_pending = stop_pending;
    /* stdout buffered as stdio buffers it (events are flushed one by one anyway); stderr
     * unbuffered, as it is */
    FILE *o = gate_open(&gates[0], stdout, STDOUT_FILENO, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
    FILE *e = gate_open(&gates[1], stderr, STDERR_FILENO, _IONBF);
    if (o) stdout = o;
    if (e) stderr = e;
}

void progress_release_streams(void) {
    if (!gate_depth || --gate_depth) return;
    for (int i = 0; i < 2; i++)
        if (gates[i].outer) fflush(gates[i].outer);
    /* said while stderr is still gated: a stuck stderr drops this too */
    static const char *const names[2] = {"standard output", "standard error"};
    for (int i = 0; i < 2; i++)
        if (gates[i].dropped_bytes && gates[1].outer && !gates[1].stuck)
            fprintf(stderr, "tandem: %s was not being read after the stop signal: %llu line%s "
                    "(%llu bytes) of the run's output dropped, so that the stop could commit in "
                    "its grace period\n", names[i], gates[i].dropped_lines,
                    gates[i].dropped_lines == 1 ? "" : "s", gates[i].dropped_bytes);
    if (gates[0].outer) stdout = gates[0].inner;
    if (gates[1].outer) stderr = gates[1].inner;
    for (int i = 0; i < 2; i++) {
        if (gates[i].outer) fclose(gates[i].outer); /* empty: nothing reaches inner */
        gates[i].outer = NULL;
    }
    gate_stop_pending = NULL;
}

/* A stream's first failed write's errno (outfile_stream_error), for a gated one that of
 * the stream it writes to, which keeps it (the gate passes only the failure on). */
static int progress_stream_error(FILE *f) {
    for (int i = 0; i < 2; i++)
        if (gates[i].outer && f == gates[i].outer) {
            if (fflush(f) == 0 && !ferror(f)) return 0;
            return outfile_stream_error(gates[i].inner);
        }
    return outfile_stream_error(f);
}

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
    int err = progress_stream_error(f), which = f == stdout ? 0 : 1;
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
    for (int m = 0; m < p->M; m++) {
        if (isnan(p->loss[m])) fprintf(f, " %s -", p->names[m]); /* no row of it this episode */
        else fprintf(f, " %s %.3f", p->names[m], p->loss[m]);
    }
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
