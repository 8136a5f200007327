/* test_gpu_sim_io.cpp — the simulator's rules for page-locked memory (gpu/sim/sim_io.cpp),
 * which test_gpu's one-wait-per-step case leans on: a copy into page-locked memory shows
 * NaN bytes until a wait covers it (a stream sync, or an event recorded after it; an event
 * recorded before it does not), a copy into pageable memory waits at once, every wait is
 * counted, and a page-locked source that the host rewrites while its upload is in flight
 * stops the program with a message (checked in a child process). Simulator only.
 */
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_passed, g_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            g_passed++;                                                                    \
        } else {                                                                           \
            g_failed++;                                                                    \
            printf("  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);             \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
        }                                                                                  \
    } while (0)

static bool all_bytes(const void *p, size_t n, unsigned char b) {
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != b) return false;
    return true;
}

static long waits(long *events = NULL) {
    long w, ev;
    gpu_sim_waits(&w, &ev);
    if (events) *events = ev;
    return w;
}

int main(void) {
    const size_t n = 4096;
    cudaStream_t s;
    cudaEvent_t before, after;
    unsigned char *dev = NULL, *pin = NULL, src[4096], page[4096];
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaEventCreateWithFlags(&before, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&after, cudaEventDisableTiming) == cudaSuccess,
          "events");
    CHECK(cudaMalloc((void **)&dev, n) == cudaSuccess && cudaMallocHost((void **)&pin, n) == cudaSuccess,
          "memory");
    memset(src, 0x2a, n);
    CHECK(cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s) == cudaSuccess, "upload");

    /* a download into page-locked memory lands at the wait, not before */
    long w0 = waits();
    CHECK(cudaEventRecord(before, s) == cudaSuccess, "record");
    CHECK(cudaMemcpyAsync(pin, dev, n, cudaMemcpyDeviceToHost, s) == cudaSuccess, "download");
    CHECK(cudaEventRecord(after, s) == cudaSuccess, "record");
    CHECK(all_bytes(pin, n, 0xff), "the page-locked destination holds data before any wait");
    CHECK(cudaEventSynchronize(before) == cudaSuccess, "event sync");
    CHECK(all_bytes(pin, n, 0xff), "an event recorded before the copy released it");
    long ev = 0;
    CHECK(waits(&ev) == w0, "an event wait counted as a device wait");
    CHECK(ev >= 1, "the event wait was not counted");
    CHECK(cudaEventSynchronize(after) == cudaSuccess, "event sync");
    CHECK(all_bytes(pin, n, 0x2a), "an event recorded after the copy did not release it");

    /* the same with a stream sync, counted */
    memset(pin, 0, n);
    CHECK(cudaMemcpyAsync(pin, dev, n, cudaMemcpyDeviceToHost, s) == cudaSuccess, "download");
    CHECK(all_bytes(pin, n, 0xff), "the page-locked destination holds data before the sync");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    CHECK(all_bytes(pin, n, 0x2a), "the stream sync did not release the copy");
    CHECK(waits() == w0 + 1, "the stream sync counted %ld waits", waits() - w0);

    /* into pageable memory: the host waits at once */
    memset(page, 0, n);
    CHECK(cudaMemcpyAsync(page, dev, n, cudaMemcpyDeviceToHost, s) == cudaSuccess, "download");
    CHECK(all_bytes(page, n, 0x2a), "a pageable download did not land at once");
    CHECK(waits() == w0 + 2, "a pageable download counted %ld waits", waits() - w0 - 1);

    /* an upload from page-locked memory: rewriting the source after an event wait is
     * fine; before it (in a child) stops the program */
    memset(pin, 7, n);
    CHECK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, s) == cudaSuccess, "upload");
    CHECK(cudaEventRecord(after, s) == cudaSuccess && cudaEventSynchronize(after) == cudaSuccess, "wait");
    memset(pin, 8, n);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync after a rewrite that waited");
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, s);
        memset(pin, 9, n); /* no wait: the upload may not have read it yet */
        cudaStreamSynchronize(s);
        _exit(0);
    }
    close(fds[1]);
    char msg[512] = {0};
    ssize_t got = read(fds[0], msg, sizeof msg - 1);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "a rewrite in flight did not stop the program (status %d)", st);
    CHECK(got > 0 && strstr(msg, "rewrote page-locked memory"), "no message: %s", msg);

    cudaFreeHost(pin);
    cudaFree(dev);
    cudaEventDestroy(before);
    cudaEventDestroy(after);
    cudaStreamDestroy(s);
    printf("test_gpu_sim_io: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
