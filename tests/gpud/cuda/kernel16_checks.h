/* kernel16_checks — the 16-bit NHWC kernels' 8-wide element-wise paths
 * and the stem's space-to-depth moves (cuda_infer_kernels.cu,
 * cuda_train16_kernels.cu) against their formulas, bit for bit: part of
 * gpud_cuemu (test_cuemu.c, on the kernel emulator). */
#ifndef DDP_TEST_KERNEL16_CHECKS_H
#define DDP_TEST_KERNEL16_CHECKS_H

/* Each returns the number of its checks that failed (tcheck.h counts per
 * file: the caller adds them to its own tc_failures). */
/* add + ReLU, ReLU, its backward, the gradient accumulation: 8 elements a
 * thread and one (a view one element in) */
int check_elementwise16(void);
/* ckb_s2d_shape, ckb_s2d, ckb_weights_s2d and their backward */
int check_s2d(void);

#endif
