/* backend_caps — what each backend can do, known from its name alone, for
 * the checks that run before any backend exists (gpud's and the CLI's
 * option checks, gpud_check_device) and for the backends' own tables
 * (bk_ops_t.caps), so the two never disagree. Header only: the option
 * library (ddp_gpud_options) has no engine to link. */
#ifndef DDP_BACKEND_CAPS_H
#define DDP_BACKEND_CAPS_H

#include <string.h>

enum {
    BK_CAN_BF16 = 1u << 0,              /* --precision bf16 */
    BK_CAN_DEVICE_PER_RANK = 1u << 1,   /* one device per local rank (docs/CUDA.md) */
    /* bf16 on the tape, not only as the inference plan: --train
     * --precision bf16, DDPIPE_BF16_EVAL=tape */
    BK_CAN_BF16_TRAIN = 1u << 2,
    /* DDPIPE_BF16=emulated: bf16 values through fp32 kernels as a choice
     * (cuda has no such choice: its tape graphs always run that way, on
     * TF32 tensor cores, its inference plan natively: docs/CUDA.md) */
    BK_CAN_BF16_EMULATED = 1u << 3,
    /* --precision fp16 (docs/FP16.md): autocast's float16 values through
     * the fp32 kernels, eval and training (with loss scaling) */
    BK_CAN_FP16 = 1u << 4,
};

#define BK_CAPS_CPU (BK_CAN_BF16 | BK_CAN_BF16_TRAIN | BK_CAN_BF16_EMULATED | BK_CAN_FP16)
#define BK_CAPS_REF (BK_CAN_BF16 | BK_CAN_BF16_TRAIN | BK_CAN_BF16_EMULATED | BK_CAN_FP16)
#define BK_CAPS_CUDA (BK_CAN_BF16 | BK_CAN_BF16_TRAIN | BK_CAN_DEVICE_PER_RANK | BK_CAN_FP16)
/* ref kernels, emulated device arena (tests) */
#define BK_CAPS_REF_DEVICE \
    (BK_CAN_BF16 | BK_CAN_BF16_TRAIN | BK_CAN_BF16_EMULATED | BK_CAN_FP16)

/* BK_CAN_* of the backend called name, or -1 when there is no such backend
 * (whether this build has it is backend_new's answer). */
static inline int backend_caps(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "cpu") == 0)
        return BK_CAPS_CPU;
    if (strcmp(name, "ref") == 0)
        return BK_CAPS_REF;
    if (strcmp(name, "cuda") == 0)
        return BK_CAPS_CUDA;
    if (strcmp(name, "ref-device") == 0)
        return BK_CAPS_REF_DEVICE;
    return -1;
}

/* 1 when backend name exists and has every capability of cap. */
static inline int backend_can(const char *name, int cap)
{
    int c = backend_caps(name);
    return c >= 0 && (c & cap) == cap;
}

#endif
