/* plugin.h — the CUDA backend as a library loaded on demand (tandem-cuda.so).
 *
 * Why a plugin: cuBLASLt, cuBLAS, cudart and NCCL are ~800 MB of shared objects. Linked
 * into ./tandem they made every start-up page in hundreds of MB before main() ran (0.5–0.8 s
 * on a cold machine), so a preemption's SIGTERM in that window killed the run with 143
 * instead of a committed exit 75, and a binary built where nvcc exists could not even
 * start on a CPU node without the CUDA libraries. Now ./tandem links none of them; the
 * first `run.device = cuda` loads tandem-cuda.so (gpu/ and comm/comm_nccl.cu, linked
 * against the CUDA libraries) and reaches the backend through the table below.
 *
 * Where it is looked for, in order: $TANDEM_CUDA_PLUGIN (a path); beside the running
 * executable; ../lib/tandem/ from the executable's folder. Programs that link the backend
 * themselves (test_gpu, bench_gpu, the simulator's builds) use their own copy and never
 * load a second one.
 */
#ifndef TANDEM_GPU_PLUGIN_H
#define TANDEM_GPU_PLUGIN_H

#include <stddef.h>

#include "model/model.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the table or a type it passes (model_ops, struct comm, tdm_err) changes
 * shape: a plugin from another build is refused instead of called wrongly. */
#define GPU_PLUGIN_ABI 5

#define GPU_PLUGIN_FILE "tandem-cuda.so"

struct comm; /* comm/comm.h: the plugin's NCCL half works on the runner's ranks */

typedef struct gpu_plugin {
    int abi;               /* GPU_PLUGIN_ABI of the plugin's build */
    size_t model_ops_size; /* sizeof(model_ops) there: a second guard on the layout */
    const model_ops *ops;  /* model_cuda_ops */
    /* gpu/cuda.h */
    int (*device_count)(char *why, size_t cap);
    int (*set_precision)(const char *name, tdm_err *e);
    int (*describe)(char *buf, size_t cap, tdm_err *e);
    int (*free_memory)(size_t *free_bytes, size_t *total, tdm_err *e);
    /* comm/comm_nccl.cu; NULL where the plugin was built without NCCL */
    int (*nccl_enable)(struct comm *c, tdm_err *e);
    int (*nccl_allreduce)(struct comm *c, float *buf, size_t n, tdm_err *e);
    void (*nccl_close)(struct comm *c, int abort_it);
    /* gpu/cuda.h: model.attention (auto | cudnn | builtin) */
    int (*set_attention)(const char *name, tdm_err *e);
} gpu_plugin;

/* Defined by the plugin (gpu/plugin.cu): its table. */
const gpu_plugin *gpu_plugin_table(void);

/* The CUDA backend's table: the copy linked into this program if there is one, else
 * tandem-cuda.so loaded once (later calls return the same table). NULL with ERR_USAGE
 * when this build has no CUDA backend or the plugin cannot be found or loaded (the
 * message names every path tried and the loader's reason). Thread-compatible, not
 * thread-safe: the runner calls it from its main thread. */
const gpu_plugin *gpu_plugin_load(tdm_err *e);

#ifdef __cplusplus
}
#endif

#endif
