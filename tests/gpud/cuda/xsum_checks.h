/* xsum_checks — bitwise training's exact sums on the device (the cuda
 * arena's xsum_* ops: gpud/cuda/cuda_xsum.c and its kernels) against
 * common/xsum.c's: shared by gpud_cuda_train_ops (on a GPU) and gpud_cuemu
 * (the same code on the kernel emulator). */
#ifndef DDP_TEST_XSUM_CHECKS_H
#define DDP_TEST_XSUM_CHECKS_H

/* The tops, every limb and the rounded sums bit for bit, in two orders of
 * the same adds; the number of checks that failed. */
int check_device_xsum(void);

#endif
