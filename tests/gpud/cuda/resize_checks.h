/* resize_checks — cuda_resize_kernels.cu (--decode gpu's resize and crop)
 * against common/image's resize_region, bit for bit: part of gpud_cuemu
 * (test_cuemu.c, on the kernel emulator). */
#ifndef DDP_TEST_RESIZE_CHECKS_H
#define DDP_TEST_RESIZE_CHECKS_H

/* Images of 1 and 3 channels into samples of 1 and 3 (PIL's L, and gray
 * replicated), down and up, windows inside, across the border and wholly
 * outside the result, a source smaller than the filter. The number of
 * failed checks. */
int check_resize_kernels(void);

#endif
