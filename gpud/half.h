/* half — the 16-bit float a graph rounds its values to: bf16 (gpud/bf16.h,
 * --precision bf16) or fp16 (gpud/fp16.h, --precision fp16), and its host
 * rounding. The engine's rounding points are the same for both (autocast's);
 * only the format differs. */
#ifndef DDP_HALF_H
#define DDP_HALF_H

#include <stddef.h>

#include "gpud/bf16.h"
#include "gpud/fp16.h"

typedef enum { BK_HALF_BF16 = 0, BK_HALF_FP16 = 1 } bk_half_t;

static inline const char *half_name(bk_half_t fmt)
{
    return fmt == BK_HALF_FP16 ? "fp16" : "bf16";
}

/* y[i] = x[i] rounded to fmt (y == x allowed). */
static inline void half_round(bk_half_t fmt, float *y, const float *x, size_t n)
{
    if (fmt == BK_HALF_FP16)
        fp16_round(y, x, n);
    else
        bf16_round(y, x, n);
}

#endif
