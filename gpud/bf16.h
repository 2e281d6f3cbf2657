/* bf16 — bfloat16 numerics held in float (--precision bf16, docs/BF16.md).
 *
 * A bf16 value is a float whose low 16 bits are zero: 8 bits of mantissa,
 * float's exponent range. The engine (backend_train.c) rounds to it where
 * PyTorch's CPU autocast (1.13) makes a bfloat16 tensor, so a backend
 * without bf16 instructions still computes PyTorch's bf16 numbers with its
 * fp32 kernels (fp32 accumulation, as oneDNN's bf16 primitives). */
#ifndef DDP_BF16_H
#define DDP_BF16_H

#include <stddef.h>

/* y[i] = x[i] rounded to bf16 as torch's .to(torch.bfloat16): round to
 * nearest, ties to even, on the bits (subnormals included, no flush);
 * +-inf stay, a finite value past bf16's largest becomes +-inf, every NaN
 * becomes 0xffff0000 (the NaN torch 1.13's vectorised CPU conversion
 * gives; c10's scalar one gives 0x7fc00000: both are NaN to every later
 * op). y == x is allowed. */
void bf16_round(float *y, const float *x, size_t n);

#endif
