/* store_many.c — reading many small objects at once: store_get of each, a few at a time.
 * On an object store every read is a round trip; the α chain and the metrics rows, read
 * one record after another, made status, alpha, metrics and a run's start take one round
 * trip per episode each (a hunt at scale: 1000 episodes, 1000 sequential GETs). */
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>

#include "storage/store.h"

typedef struct many_job {
    store *s;
    store_got *items;
    size_t n, next; /* the next item to read, under mu */
    pthread_mutex_t mu;
} many_job;

static void *many_main(void *arg) {
    many_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next < j->n ? j->next++ : SIZE_MAX;
        pthread_mutex_unlock(&j->mu);
        if (i == SIZE_MAX) return NULL;
        store_got *g = &j->items[i];
        g->data = NULL;
        g->n = 0;
        g->rc = store_get(j->s, g->key, &g->data, &g->n, NULL, &g->err);
        if (g->rc) {
            free(g->data); /* a backend leaves nothing on failure; said, not assumed */
            g->data = NULL, g->n = 0;
        }
    }
}

void store_get_many(store *s, store_got *items, size_t n) {
    many_job j = {.s = s, .items = items, .n = n, .next = 0};
    pthread_mutex_init(&j.mu, NULL);
    size_t want = n < STORE_GET_THREADS ? n : STORE_GET_THREADS;
    pthread_t tids[STORE_GET_THREADS];
    int created[STORE_GET_THREADS] = {0};
    /* the calling thread reads too; a thread that cannot be made leaves its share to the
     * others (items are taken one by one), so every item is read */
    for (size_t w = 1; w < want; w++) created[w] = pthread_create(&tids[w], NULL, many_main, &j) == 0;
    many_main(&j);
    for (size_t w = 1; w < want; w++)
        if (created[w]) pthread_join(tids[w], NULL);
    pthread_mutex_destroy(&j.mu);
}
