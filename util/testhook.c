/* testhook.c — see testhook.h. */
#include "util/testhook.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct hook {
    const char *var; /* NULL: slot unused */
    char label[32];
    long target, count;
} hook;

static hook hooks[TESTHOOK_VARS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

int testhook_hit(const char *var, const char *label) {
    pthread_mutex_lock(&mu);
    hook *h = NULL;
    for (int i = 0; i < TESTHOOK_VARS && !h; i++) {
        if (hooks[i].var == var || (hooks[i].var && strcmp(hooks[i].var, var) == 0)) {
            h = &hooks[i];
        } else if (!hooks[i].var) {
            /* first use of this variable: parse "label:n" once */
            h = &hooks[i];
            h->var = var;
            h->target = -1;
            const char *v = getenv(var);
            const char *colon = v ? strchr(v, ':') : NULL;
            if (colon && (size_t)(colon - v) < sizeof h->label) {
                memcpy(h->label, v, (size_t)(colon - v));
                h->label[colon - v] = '\0';
                h->target = atol(colon + 1);
            }
        }
    }
    int hit = h && h->target > 0 && strcmp(h->label, label) == 0 && ++h->count == h->target;
    pthread_mutex_unlock(&mu);
    return hit;
}

void testhook_kill_at(const char *label) {
    if (testhook_hit("TANDEM_TEST_KILL_AT", label)) raise(SIGKILL);
}

void testhook_sleep(const char *var) {
    const char *v = getenv(var);
    long ms = v ? atol(v) : 0;
    if (ms > 0) { /* the whole time, a signal or not: a slow store does not hurry for one */
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

void testhook_stop_at(const char *label) {
    if (testhook_hit("TANDEM_TEST_STOP_AT", label)) raise(SIGSTOP);
    if (testhook_hit("TANDEM_TEST_STOP2_AT", label)) raise(SIGSTOP);
}
