/* host16_kernels — bk_ops_t.train16 for a backend whose fp32 kernels work
 * in host memory: 16-bit activation buffers, converted around the fp32
 * kernels (host16_kernels.c). The reference backend's. */
#ifndef DDP_HOST16_KERNELS_H
#define DDP_HOST16_KERNELS_H

#include "gpud/backend_impl.h"

extern const bk_kernels_t HOST16_KERNELS;

#endif
