/* layers — what architectures share: loading state_dict tensors with
 * name/shape checks, BatchNorm folding, and the arch table. */
#ifndef DDP_MODELS_LAYERS_H
#define DDP_MODELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"
#include "gpud/backend.h"
#include "gpud/model_opts.h"

/* ------------------------------------------------ init (record) mode
 *
 * A model without a weights file is initialised (init.c) by running the
 * arch's own loader once in record mode: every wl_take records the tensor
 * (name, shape) and hands out zeros, so the tensor list comes from the same
 * code that loads real weights and cannot drift from it. */
typedef struct {
    char name[128];
    int ndim;
    int64_t shape[4];
    int is_i64;             /* num_batches_tracked: an I64 scalar */
} wl_rec_t;

typedef struct {
    wl_rec_t *e;
    size_t n, cap;
    int failed;             /* out of memory or a name/rank too long */
} wl_record_t;

void wl_record_free(wl_record_t *r);

/* Where a loader's tensors come from: a weights file, or a recording
 * (file NULL): then each wl_take is recorded and answered with zeros. */
typedef struct {
    const safetensors_t *file;
    wl_record_t *record;
} wl_source_t;

/* ------------------------------------------------------- weight loading */

/* Hands out the tensors of a safetensors file by name and remembers which
 * were taken, so that leftovers can be reported. The first error sticks. */
typedef struct wloader wloader_t;

/* src: the file, or the recording (init.c); NULL when it has neither.
 * arch names the model in messages; hint ends shape errors (e.g.
 * "check --channels"), changeable with wl_hint (e.g. before the fc). */
wloader_t *wloader_new(const wl_source_t *src, const char *arch, const char *hint);
void wl_hint(wloader_t *wl, const char *hint);
void wloader_destroy(wloader_t **wl);
/* malloc'd float copy of tensor `name`, which must have exactly `shape`.
 * NULL on error (message in wloader_error). */
float *wl_take(wloader_t *wl, const char *name, int ndim, const int64_t *shape);
/* Shape of tensor `name` in the file, or -1 (missing; error recorded). */
int wl_shape(wloader_t *wl, const char *name, int64_t *shape, int max_dims);
/* Mark an optional tensor (e.g. num_batches_tracked) as used. */
void wl_optional(wloader_t *wl, const char *name);
/* Error if any tensor of the file was never taken. Returns 0 or -1. */
int wl_finish(wloader_t *wl);
const char *wloader_error(const wloader_t *wl);

/* -------------------------------------------------- conv + folded BN */

/* A convolution ready for the backend: BatchNorm folded in, post-ops set
 * by the architecture when it builds the graph. */
typedef struct {
    bk_conv_t p;
    float *w, *b;   /* owned: [oc, ic, kh, kw], [oc] or NULL */
} fconv_t;

#define BN_EPS 1e-5f

/* Load conv `conv` (conv.weight, conv.bias if has_bias) followed by
 * BatchNorm2d `bn` (may be NULL: no BN) and fold the BN in:
 *   s = gamma / sqrt(var + eps);  w' = w * s;  b' = (b - mean) * s + beta.
 * Returns 0 or -1 (error in the loader). */
int fconv_load(fconv_t *c, wloader_t *wl, const char *conv, int has_bias, const char *bn,
               int oc, int ic, int k, int stride, int pad);
void fconv_free(fconv_t *c);
/* The fold itself (double arithmetic), exposed for tests: w [oc, per_oc],
 * bias [oc] (in/out, must exist). */
void bn_fold(float *w, float *bias, int oc, size_t per_oc, const float *gamma,
             const float *beta, const float *mean, const float *var, float eps);

/* Build c on g: post-ops as given (n of them), residual for a SUM. */
bk_tensor_t *fconv_apply(bk_graph_t *g, const fconv_t *c, const char *name, bk_tensor_t *x,
                         bk_tensor_t *residual, int n_post, const bk_postop_t *post);

/* ------------------------------------------------ training parameters */

/* The unfolded state_dict for training: every tensor of the weights file
 * (as float), by name. weight/bias tensors are trainable and get a
 * gradient array; running_mean/var are buffers (updated by BN in training
 * mode); num_batches_tracked is counted by the model, not stored here. */
typedef struct {
    char name[128];
    float *w, *g;           /* value; gradient (NULL: buffer or frozen) */
    size_t n;
    int ndim;
    int64_t shape[4];
    int trainable;
    int frozen;             /* trainable but excluded: no gradient computed */
    int bn_eval;            /* on BN running_mean: that BN runs in eval mode
                             * in training steps (model_freeze_bn) */
} pentry_t;

typedef struct {
    pentry_t *e;
    size_t n;
} pstore_t;

/* NULL on error (message in err). */
pstore_t *pstore_load(const safetensors_t *st, char *err, size_t errlen);
void pstore_destroy(pstore_t **ps);
pentry_t *pstore_find(const pstore_t *ps, const char *name);

/* Training-graph layers by state_dict prefix; they fail the graph naming
 * the tensor when it is missing or has the wrong shape. */
bk_tvar_t *tl_conv(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x, int oc,
                   int k, int stride, int pad, int has_bias);
bk_tvar_t *tl_bn(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x);
/* relu(bn(x)) as one fused op */
bk_tvar_t *tl_bn_relu(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x);
bk_tvar_t *tl_linear(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x,
                     int out);

/* ------------------------------------------------------------ arch table */

typedef struct {
    int in_channels, num_classes;
    int nat_h, nat_w, hw_fixed;
} arch_info_t;

typedef struct {
    const char *name;
    /* Load and fold weights; fill info. NULL on error (err set). */
    void *(*load)(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                  char *err, size_t errlen);
    /* Append the network to g; returns the logits tensor (n, classes, 1, 1).
     * NULL for an architecture that has no folded inference network
     * (DenseNet: BN precedes ReLU + conv, nothing to fold into): the model
     * then runs train_build's graph in eval mode for inference. */
    bk_tensor_t *(*build)(const void *state, bk_graph_t *g, bk_tensor_t *x);
    void (*destroy)(void *state);
    /* Append the unfolded training network (BN in training mode, dropout)
     * to g with parameters from ps; returns the logits tensor. */
    bk_tvar_t *(*train_build)(const void *state, const pstore_t *ps, bk_tgraph_t *g,
                              bk_tvar_t *x);
} arch_t;

extern const arch_t ARCH_RESNET18;
extern const arch_t ARCH_RESNET34;
extern const arch_t ARCH_RESNET50;
extern const arch_t ARCH_WIDERESNET;
extern const arch_t ARCH_DENSENET121;

/* The arch's state_dict with PyTorch's initial values for seed (init.c):
 * wideresnet as the seed model (torch defaults: conv/linear weights and
 * biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), i.e. kaiming_uniform(a=sqrt(5))),
 * resnet* as torchvision's ResNet (conv kaiming_normal(fan_out, relu), fc
 * torch default), densenet121 as torchvision's DenseNet (conv
 * kaiming_normal(fan_in, relu), classifier bias 0); BatchNorm weight 1,
 * bias 0, running_mean 0, running_var 1, num_batches_tracked 0. Each tensor
 * draws from its own stream keyed by (seed, name): the values do not depend
 * on tensor order. NULL with the reason in err. */
safetensors_t *init_weights(const arch_t *arch, const model_opts_t *o, uint64_t seed,
                            char *err, size_t errlen);

#endif
