/* fake_dnn_layout — element access for the cuDNN fakes (fake_dnn.c's legacy
 * calls, fake_dnn_graph.c's graphs): a 4-d tensor of float, bf16 or fp16 in
 * NCHW or NHWC, read into NCHW floats and written back rounded as gpud
 * rounds (bf16.c, fp16_math.h: to nearest even). */
#ifndef DDP_FAKE_DNN_LAYOUT_H
#define DDP_FAKE_DNN_LAYOUT_H

#include <cudnn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/bf16.h"
#include "gpud/half_bits.h"

static inline float get(const void *p, cudnnDataType_t dt, size_t i)
{
    if (dt == CUDNN_DATA_HALF)
        return fp16_unpack(((const uint16_t *)p)[i]);
    if (dt == CUDNN_DATA_BFLOAT16) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return ((const float *)p)[i];
}

static inline void put(void *p, cudnnDataType_t dt, size_t i, float v)
{
    if (dt == CUDNN_DATA_HALF) {   /* rounded as gpud/fp16_math.h (cuDNN: to nearest even) */
        ((uint16_t *)p)[i] = fp16_pack(v);
        return;
    }
    if (dt == CUDNN_DATA_BFLOAT16) {
        float r;
        uint32_t u;
        bf16_round(&r, &v, 1);
        memcpy(&u, &r, sizeof u);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        return;
    }
    ((float *)p)[i] = v;
}

/* element (a, b, y, x) of an NCHW-logical 4-d array of dims d[4] in format f */
static inline size_t at(cudnnTensorFormat_t f, const int d[4], int a, int b, int y, int x)
{
    if (f == CUDNN_TENSOR_NHWC)
        return (((size_t)a * d[2] + y) * d[3] + x) * d[1] + b;
    return (((size_t)a * d[1] + b) * d[2] + y) * d[3] + x;
}

/* a tensor or filter as NCHW floats (malloc'd), or back */
static inline float *to_nchw(const void *p, cudnnTensorFormat_t f, cudnnDataType_t dt, const int d[4])
{
    size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
    float *o = malloc((n ? n : 1) * sizeof *o);
    for (int a = 0; o && a < d[0]; a++)
        for (int b = 0; b < d[1]; b++)
            for (int y = 0; y < d[2]; y++)
                for (int x = 0; x < d[3]; x++)
                    o[at(CUDNN_TENSOR_NCHW, d, a, b, y, x)] = get(p, dt, at(f, d, a, b, y, x));
    return o;
}

static inline void from_nchw(void *p, cudnnTensorFormat_t f, cudnnDataType_t dt, const int d[4],
                      const float *v)
{
    for (int a = 0; a < d[0]; a++)
        for (int b = 0; b < d[1]; b++)
            for (int y = 0; y < d[2]; y++)
                for (int x = 0; x < d[3]; x++)
                    put(p, dt, at(f, d, a, b, y, x), v[at(CUDNN_TENSOR_NCHW, d, a, b, y, x)]);
}

#endif
