/* finite — the one scan for NaN and infinities in the floats gpud takes in
 * (docs/TRAINING.md "Non-finite values"): a weights file (model_new), a
 * checkpoint on --resume and a joiner's STATE (checkpoint.c), the summed
 * gradients before an optimizer step and the parameters after it
 * (trainer.c). A non-finite weight is refused where it enters, never left
 * to a later layer (a fused conv+ReLU turns NaN into 0 and would hide it).
 *
 *   if (finite_check("fc.weight", w, n, err, sizeof err) < 0)
 *       ... err: "fc.weight: element 17 of 6400 is nan"
 */
#ifndef DDP_GPUD_FINITE_H
#define DDP_GPUD_FINITE_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first NaN or +-inf among the n F32 values at data (any
 * alignment: data may point into a mapped file), -1 when all are finite. */
int64_t finite_first_bad(const void *data, size_t n);

/* 0 when the n F32 values of tensor `name` are all finite; else -1 with
 * "name: element i of n is nan" (or inf, -inf) in err, i the first bad
 * element's row-major index. */
int finite_check(const char *name, const void *data, size_t n, char *err, size_t errlen);

#endif
