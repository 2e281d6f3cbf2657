/* arena_checks — the cuda device arena's ops and its optimizer step
 * (gpud/cuda/cuda_arena.c, cuda_optim.c) against the host's: shared by gpud_cuda_train_ops
 * (on a GPU) and gpud_cuemu (the same code on the kernel emulator, here). */
#ifndef DDP_TEST_ARENA_CHECKS_H
#define DDP_TEST_ARENA_CHECKS_H

/* Each returns the number of its checks that failed (tcheck.h counts per
 * file: the caller adds them to its own tc_failures). */
/* write/read, device copy, zero, and the non-finite scan */
int check_device_arena(void);
/* SGD (momentum; nesterov), Adam, AdamW + amsgrad, NovoGrad: 3 steps each
 * against gpud/optim/optim.c (bit for bit; NovoGrad's norm within 1e-6) */
int check_device_optims(void);
/* the arena's optimizer step (one multi-tensor launch; per parameter when
 * the parameters' steps diverge) against the host arena's, bit for bit */
int check_arena_optims(void);

#endif
