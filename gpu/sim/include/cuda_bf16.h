/* cuda_bf16.h — bfloat16 for gpu/sim/: the storage format and the two conversions the
 * kernels use (round to nearest even, as __float2bfloat16_rn). */
#ifndef TANDEM_GPU_SIM_CUDA_BF16_H
#define TANDEM_GPU_SIM_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    unsigned short x;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.x = (unsigned short)((u >> 16) | 0x40); /* NaN stays NaN */
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.x = (unsigned short)(u >> 16);
    return r;
}

inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
