/* loader.c — finds the CUDA backend: linked in, or tandem-cuda.so loaded on demand; see
 * gpu/plugin.h. Part of libtandem.a in every build (it is plain C). */
#include "gpu/plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Weak: resolved where the program carries the backend itself (test_gpu, bench_gpu, the
 * simulator), NULL in ./tandem, which loads the plugin instead. */
extern const gpu_plugin *gpu_plugin_table(void) __attribute__((weak));

static const gpu_plugin *g_plugin;

/* Checks the table of a loaded plugin against this build's expectations. */
static int check_table(const gpu_plugin *p, const char *where, tdm_err *e) {
    if (!p || p->abi != GPU_PLUGIN_ABI || p->model_ops_size != sizeof(model_ops) || !p->ops)
        return err_set(e, ERR_USAGE, "%s is a CUDA backend from another build of tandem (plugin "
                       "interface %d, this tandem needs %d): rebuild both with make, or copy "
                       "the tandem-cuda.so built beside this binary",
                       where, p ? p->abi : -1, GPU_PLUGIN_ABI);
    return 0;
}

#ifdef TANDEM_HAVE_CUDA
/* The folder of the running executable into dir (no trailing slash); 0 on success. */
static int exe_dir(char *dir, size_t cap) {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return -1;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash) return -1;
    *slash = '\0';
    return snprintf(dir, cap, "%s", path) >= (int)cap ? -1 : 0;
}

#endif

const gpu_plugin *gpu_plugin_load(tdm_err *e) {
    if (g_plugin) return g_plugin;
    if (gpu_plugin_table) {
        const gpu_plugin *p = gpu_plugin_table();
        if (check_table(p, "the linked-in backend", e)) return NULL;
        return g_plugin = p;
    }
#ifndef TANDEM_HAVE_CUDA
    err_set(e, ERR_USAGE, "run.device = cuda: this build has no CUDA backend (nvcc was not found "
            "when tandem was built; see docs/gpu.md); use run.device = cpu");
    return NULL;
#else
    char cand[3][PATH_MAX + 64];
    int n = 0;
    const char *env = getenv("TANDEM_CUDA_PLUGIN");
    if (env && *env) snprintf(cand[n++], sizeof cand[0], "%s", env);
    char dir[PATH_MAX];
    if (exe_dir(dir, sizeof dir) == 0) {
        snprintf(cand[n++], sizeof cand[0], "%s/%s", dir, GPU_PLUGIN_FILE);
        snprintf(cand[n++], sizeof cand[0], "%s/../lib/tandem/%s", dir, GPU_PLUGIN_FILE);
    }
    char tried[2048] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (access(cand[i], F_OK) != 0) {
            used += (size_t)snprintf(tried + used, used < sizeof tried ? sizeof tried - used : 0,
                                     "%s%s (absent)", used ? "; " : "", cand[i]);
            if (used >= sizeof tried) used = sizeof tried - 1;
            continue;
        }
        /* RTLD_LOCAL: the CUDA libraries' symbols stay out of the global scope; the plugin
         * resolves tandem's own functions (err_set, comm_bcast, ...) from this executable */
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            used += (size_t)snprintf(tried + used, used < sizeof tried ? sizeof tried - used : 0,
                                     "%s%s (%s)", used ? "; " : "", cand[i], why ? why : "dlopen failed");
            if (used >= sizeof tried) used = sizeof tried - 1;
            continue;
        }
        const gpu_plugin *(*table)(void);
        *(void **)&table = dlsym(h, "gpu_plugin_table");
        if (!table) {
            err_set(e, ERR_USAGE, "%s is not a tandem CUDA backend (no gpu_plugin_table)", cand[i]);
            dlclose(h);
            return NULL;
        }
        const gpu_plugin *p = table();
        if (check_table(p, cand[i], e)) {
            dlclose(h);
            return NULL;
        }
        return g_plugin = p; /* kept loaded for the life of the process */
    }
    err_set(e, ERR_USAGE, "run.device = cuda: the CUDA backend %s could not be loaded: %s. It is "
            "built beside tandem by make where nvcc exists; keep it next to the binary or set "
            "TANDEM_CUDA_PLUGIN (docs/gpu.md)", GPU_PLUGIN_FILE, n ? tried : "no path to try");
    return NULL;
#endif
}
