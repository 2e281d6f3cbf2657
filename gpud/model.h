/* model — the classifier gpud runs: architecture + weights + backend.
 *
 *   model_opts_t o = {.arch = "resnet18"};
 *   model_t *m = model_new(&o, "cpu", "resnet18.safetensors", err, sizeof err);
 *   model_forward_u8(m, pixels, n, 3, 224, 224, imagenet_mean, imagenet_std,
 *                    logits, err, sizeof err);
 *   model_topk_ce(logits, n, model_num_classes(m), labels, 5, topk, loss);
 *   model_destroy(&m);
 *
 * Weights are safetensors files with PyTorch state_dict names. Every tensor
 * the architecture needs must be present with the right shape, and every
 * tensor in the file must be used (BatchNorm's num_batches_tracked may be
 * absent); otherwise model_new fails naming the tensor and both shapes.
 *
 * EXACTNESS: the logits of a sample depend only on that sample, the weights
 * and the micro-batch size — not on n, on the other samples of the call,
 * on the sample's position, or on the thread count. The network always runs
 * on fixed micro-batches (n is split; the last one is zero-filled and its
 * extra outputs dropped), so every worker of a job must use the same
 * micro_batch (leave it 0).
 *
 * A model_t is used by one thread at a time.
 */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct model model_t;

typedef struct {
    const char *arch;    /* "resnet18" | "wideresnet" */
    int num_classes;     /* 0: take from the weights' fc */
    int in_channels;     /* 0: arch default (resnet18 3, wideresnet 1) */
    int channels[4];
    int n_channels;      /* wideresnet widths; 0: default 16,160,320,640 */
    int threads;         /* oneDNN/OpenMP threads, 0: all cores */
    int micro_batch;     /* 0: MODEL_DEFAULT_MICRO_BATCH */
} model_opts_t;

#define MODEL_DEFAULT_MICRO_BATCH 16
#define MODEL_MAX_MICRO_BATCH 256

model_t *model_new(const model_opts_t *o, const char *backend /* "cpu" | "ref" */,
                   const char *weights_path, char *err, size_t errlen);
void model_destroy(model_t **m);

int model_in_channels(const model_t *m);
int model_num_classes(const model_t *m);
/* Natural input size in *h, *w (resnet18 224x224, wideresnet 28x28).
 * Returns 0 if other sizes are accepted too (resnet18: adaptive pooling),
 * 1 if the model needs exactly that size (wideresnet: AvgPool2d(7) must
 * leave 1x1 for the fc). */
int model_input_hw(const model_t *m, int *h, int *w);
const char *model_arch(const model_t *m);
int model_micro_batch(const model_t *m);

/* pixels: n samples of uint8 CHW (c, h, w); x = (p/255 - mean[c]) / std[c]
 * computed in float exactly as torchvision's ToTensor + Normalize
 * (mean/std NULL: plain ToTensor). logits: n * num_classes floats.
 * Returns 0, or -1 with the reason in err. */
int model_forward_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                     const float *mean, const float *std, float *logits, char *err,
                     size_t errlen);
/* x: NCHW float, already normalised. */
int model_forward_f32(model_t *m, const float *x, int n, int c, int h, int w, float *logits,
                      char *err, size_t errlen);

/* Per-sample top-k class ids (best first; ties: lower class id first; NaN
 * ranks last; ids past num_classes are -1) and cross-entropy
 * (log-sum-exp - logit[label], in double; label < 0 or >= num_classes: NAN).
 * topk: n*k, loss: n; either may be NULL. */
void model_topk_ce(const float *logits, int n, int num_classes, const int32_t *labels, int k,
                   int32_t *topk, float *loss);

#endif
