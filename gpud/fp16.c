/* fp16 — round-to-nearest-even to IEEE binary16, as torch's tensor conversion. */
#include "gpud/fp16.h"

#include "gpud/fp16_math.h"
#include "gpud/simd_clones.h"

/* Lane-wise: each value is rounded alone, so the clones give the same bits. */
SIMD_CLONES void fp16_round(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fp16_round1(x[i]);
}
