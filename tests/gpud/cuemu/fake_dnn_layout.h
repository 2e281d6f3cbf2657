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

/* Another summation order, emulated (CUEMU_DNN_JITTER=K, default 0: off):
 * each of a convolution's n fp32 sums moved by -K..K units in the last place,
 * the amount a hash of the element's index and value (the same inputs give
 * the same bits, as cuDNN's deterministic engines do). cuDNN sums in orders
 * of its own, so its results differ from the reference's in the last bits,
 * and a 16-bit output then rounds the other way now and then: tests run
 * under it hold their tolerances to what a GPU will do (fp32 sums over a
 * few hundred terms differ by a few units in the last place). */
static inline void fake_sum_order(float *v, size_t n)
{
    static int k = -1;
    if (k < 0) {
        const char *e = getenv("CUEMU_DNN_JITTER");
        k = e && atoi(e) > 0 ? atoi(e) : 0;
    }
    for (size_t i = 0; k && i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], sizeof b);
        if ((b & 0x7fffffffu) == 0 || (b & 0x7f800000u) == 0x7f800000u)
            continue;   /* zeros, infinities and NaNs stay */
        uint32_t h = (b ^ (uint32_t)i * 0x9e3779b1u) * 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
        int d = (int)(h % (uint32_t)(2 * k + 1)) - k;
        uint32_t m = b & 0x7fffffffu;
        if ((d < 0 && m <= (uint32_t)-d) || m + (uint32_t)(d > 0 ? d : 0) >= 0x7f800000u)
            continue;   /* would cross zero or reach infinity */
        b = (b & 0x80000000u) | (uint32_t)((int64_t)m + d);
        memcpy(&v[i], &b, sizeof b);
    }
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
