/* cuda_sync16 — SyncBatchNorm's per-channel sums and its gradient pass on
 * the 16-bit NHWC activations of cuda_train16.c's table (bk_kernels_t
 * chan_sums, bn_grad_sums, bn_grad_apply: the host all-reduces the sums
 * between them): the centres and coefficients go up and the double sums
 * come down through the backend's scratch, counted as BatchNorm's bytes as
 * cuda_train.c's are (tape_copies.c plans them); the kernels are the 16-bit
 * ones of bn_train_* (cuda_bn16_kernels.h). */
#ifndef DDP_CUDA_SYNC16_H
#define DDP_CUDA_SYNC16_H

#include "gpud/backend_impl.h"

void cu16_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                    double *out);
void cu16_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                       const int s[4], int relu, float gscale, const float *center,
                       double *out);
void cu16_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y, const void *gy,
                        const int s[4], int relu, float gscale, const float *center,
                        const float *scale, const float *a, const float *b);

#endif
