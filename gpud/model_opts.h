/* model_opts — what a model is opened with (model_new), apart from the
 * model itself so that the architectures (models/layers.h) can take it
 * without including the model API above them. */
#ifndef DDP_MODEL_OPTS_H
#define DDP_MODEL_OPTS_H

#include <stdint.h>

typedef struct {
    const char *arch;    /* "resnet18" | "resnet34" | "resnet50" | "wideresnet" |
                          * "densenet121" */
    int num_classes;     /* 0: take from the weights' fc */
    int in_channels;     /* 0: arch default (resnet18 3, wideresnet 1) */
    int channels[4];
    int n_channels;      /* wideresnet widths; 0: default 16,160,320,640 */
    int threads;         /* oneDNN/OpenMP threads, 0: all cores */
    int micro_batch;     /* 0: MODEL_DEFAULT_MICRO_BATCH */
    int bf16;            /* 1: --precision bf16 (backend.h, BK_BF16_EMULATED) */
    int fp16;            /* 1: --precision fp16 (backend.h, BK_FP16) */
    int train;           /* 1: also keep the unfolded parameters (model_train_step) */
    int init;            /* 1 with weights_path NULL: PyTorch-default initial weights */
    uint64_t init_seed;  /* init: the seed (same seed, same bytes; see models/init.c) */
} model_opts_t;

#define MODEL_DEFAULT_MICRO_BATCH 16
#define MODEL_MAX_MICRO_BATCH 256

#endif
