/* plugin.cu — the table through which ./tandem reaches the CUDA backend once it has loaded
 * tandem-cuda.so (gpu/plugin.h says why the backend is a plugin). Linked into the plugin,
 * and into the programs that carry the backend themselves (test_gpu, bench_gpu, the
 * simulator's builds), where gpu_plugin_load() finds this table without loading anything. */
extern "C" {
#include "comm/comm_impl.h"
#include "gpu/cuda.h"
#include "gpu/plugin.h"
}

static const gpu_plugin TABLE = {
    GPU_PLUGIN_ABI,
    sizeof(model_ops),
    &model_cuda_ops,
    model_cuda_device_count,
    model_cuda_set_precision,
    model_cuda_describe,
    model_cuda_free_memory,
#ifdef TANDEM_HAVE_NCCL
    comm_nccl_enable,
    comm_nccl_allreduce,
    comm_nccl_close,
#else
    nullptr,
    nullptr,
    nullptr,
#endif
    model_cuda_set_attention,
};

extern "C" const gpu_plugin *gpu_plugin_table(void) { return &TABLE; }
