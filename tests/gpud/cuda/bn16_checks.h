/* bn16_checks — the 16-bit BatchNorm kernels on NHWC
 * (cuda_bn16_kernels.cu) on the kernel emulator, part of gpud_cuemu
 * (test_cuemu.c): the normalising pass and its backward against their
 * per-element formula, the channel sums against a host replica of their
 * order, and the per-channel finish inside the sums' last launch against
 * the unfused launches plus bn_math.h, bit for bit, bf16 and fp16. */
#ifndef DDP_TEST_BN16_CHECKS_H
#define DDP_TEST_BN16_CHECKS_H

/* Every check over 20, 40 and 264 channels and one or many slices; the
 * number that failed (tcheck.h counts per file). */
int check_bn16_all(void);

#endif
