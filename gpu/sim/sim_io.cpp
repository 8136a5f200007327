/* sim_io.cpp — the simulator's copies, streams and events (see sim.cpp for the whole):
 * what the host may do with page-locked memory while the device works, made visible.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <mutex>
#include <vector>

cudaError_t sim_fail(cudaError_t e); /* sim.cpp: sets the last error */

/* ---------------------------------------------------------------- host waits, page-locked memory
 *
 * On a GPU a cudaMemcpyAsync into page-locked host memory lands when the stream gets
 * there, and one out of page-locked memory reads it then: the host may read the first, or
 * rewrite the second, only after a wait that covers the copy (cudaStreamSynchronize, or
 * cudaEventSynchronize on an event recorded after it). The simulator runs everything at
 * once, so it makes the rule visible instead: the destination of a copy into page-locked
 * memory holds NaN bytes until a wait covers the copy (the data waits in a shadow), and a
 * page-locked source that the host rewrote before a wait covered its copy stops the
 * program with a message. Copies into pageable memory, and cudaMemcpy, wait for the
 * device, as CUDA's do; both count as waits (gpu_sim_waits). */

struct sim_flight {
    unsigned long long seq; /* order of issue */
    void *dst;              /* device to host: where the shadow lands */
    const void *src;        /* host to device: the page-locked source */
    size_t n;
    std::vector<unsigned char> shadow;
    unsigned long long hash; /* host to device: the source's bytes at issue */
};

struct CUevent_st {
    unsigned long long seq; /* copies issued before the record */
};

static std::mutex g_io_mu;
static std::map<const char *, size_t> g_pinned;
static std::vector<sim_flight> g_flight;
static unsigned long long g_seq;
static long g_device_waits, g_event_waits;

static unsigned long long fnv1a(const void *p, size_t n) {
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
}

/* whether [p, p + n) lies inside one cudaMallocHost block (g_io_mu held) */
static bool pinned(const void *p, size_t n) {
    auto it = g_pinned.upper_bound((const char *)p);
    if (it == g_pinned.begin()) return false;
    --it;
    return (const char *)p + n <= it->first + it->second;
}

/* completes the copies issued up to seq (g_io_mu held) */
static void retire(unsigned long long seq) {
    std::vector<sim_flight> keep;
    for (sim_flight &f : g_flight) {
        if (f.seq > seq) {
            keep.push_back(std::move(f));
        } else if (f.dst) {
            memcpy(f.dst, f.shadow.data(), f.n);
        } else if (fnv1a(f.src, f.n) != f.hash) {
            fprintf(stderr, "gpu sim: the host rewrote page-locked memory at %p (%zu bytes) while a "
                    "copy from it to the device was in flight: wait on an event recorded after "
                    "the copy first\n", f.src, f.n);
            abort();
        }
    }
    g_flight.swap(keep);
}

extern "C" void gpu_sim_waits(long *device_waits, long *event_waits) {
    std::lock_guard<std::mutex> lock(g_io_mu);
    if (device_waits) *device_waits = g_device_waits;
    if (event_waits) *event_waits = g_event_waits;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = NULL;
    if (bytes == 0) return sim_fail(cudaErrorInvalidValue);
    void *q = malloc(bytes);
    if (!q) return sim_fail(cudaErrorMemoryAllocation);
    memset(q, 0xff, bytes);
    std::lock_guard<std::mutex> lock(g_io_mu);
    g_pinned[(const char *)q] = bytes;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> lock(g_io_mu);
    auto it = g_pinned.find((const char *)p);
    if (it == g_pinned.end()) return sim_fail(cudaErrorInvalidValue);
    retire(~0ULL); /* as CUDA's, it waits for the device first */
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    (void)kind;
    std::lock_guard<std::mutex> lock(g_io_mu);
    retire(~0ULL);
    g_device_waits++;
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
    (void)s;
    if (!n) return cudaSuccess;
    std::lock_guard<std::mutex> lock(g_io_mu);
    if (kind == cudaMemcpyDeviceToHost && pinned(dst, n)) {
        sim_flight f{++g_seq, dst, NULL, n, std::vector<unsigned char>((const unsigned char *)src,
                                                                       (const unsigned char *)src + n), 0};
        memset(dst, 0xff, n);
        g_flight.push_back(std::move(f));
        return cudaSuccess;
    }
    if (kind == cudaMemcpyDeviceToHost) { /* into pageable memory: the host waits */
        retire(~0ULL);
        g_device_waits++;
    } else if (kind == cudaMemcpyHostToDevice && pinned(src, n)) {
        g_flight.push_back(sim_flight{++g_seq, NULL, src, n, {}, fnv1a(src, n)});
    }
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    (void)s;
    if (n) memset(p, v, n);
    return cudaSuccess;
}

struct CUstream_st {
    int unused;
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = new CUstream_st();
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    std::lock_guard<std::mutex> lock(g_io_mu);
    retire(~0ULL);
    g_device_waits++;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
    (void)flags;
    *ev = new CUevent_st();
    (*ev)->seq = 0;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
    (void)s;
    std::lock_guard<std::mutex> lock(g_io_mu);
    ev->seq = g_seq;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    std::lock_guard<std::mutex> lock(g_io_mu);
    retire(ev->seq);
    g_event_waits++;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    delete ev;
    return cudaSuccess;
}

