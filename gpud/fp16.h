/* fp16 — IEEE half-precision numerics held in float (--precision fp16,
 * docs/FP16.md).
 *
 * An fp16 value is a float that fp16_math.h's rounding leaves unchanged:
 * 10 bits of mantissa, finite up to 65504, subnormal below 2^-14. The
 * engine rounds to it where PyTorch's CUDA autocast makes a float16 tensor
 * (the same points as bf16's, gpud/bf16.h), so every backend computes
 * autocast's fp16 numbers with its fp32 kernels (fp32 accumulation, as
 * cuDNN's fp16 convolutions on tensor cores). Training with it needs loss
 * scaling (gpud/loss_scale.h): gradients below 2^-24 would become 0. */
#ifndef DDP_FP16_H
#define DDP_FP16_H

#include <stddef.h>

/* y[i] = x[i] rounded to fp16 as torch's .to(torch.float16) (fp16_math.h:
 * ties to even, overflow to +-inf, subnormals kept, NaN stays NaN). y == x
 * is allowed. */
void fp16_round(float *y, const float *x, size_t n);

#endif
