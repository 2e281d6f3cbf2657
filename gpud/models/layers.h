/* layers — what architectures share: the parameter store (state_dict by
 * name), the layers that bind its entries into a training graph, and the
 * arch table. An architecture is ONE description (describe) run on any
 * tape graph: training, forward-only eval, or a walk that only checks or
 * records the parameters (arch_check, init.c). */
#ifndef DDP_MODELS_LAYERS_H
#define DDP_MODELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"
#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/model_opts.h"

#define BN_EPS 1e-5f

/* ------------------------------------------------ the parameter store
 *
 * The unfolded state_dict: every float tensor of the weights file by name.
 * weight/bias tensors are trainable (a gradient array when the store has
 * them); running_mean/var are buffers (updated by BN in training mode);
 * num_batches_tracked is counted by the model, not stored here.
 *
 * A store is built (loaded, recorded) with an array per value, then placed
 * (pstore_place) into the backend's arenas (backend_arena.h lays out what
 * goes where): from then on every w and g is a view into them. */
typedef struct {
    char name[128];
    float *w, *g;           /* value; gradient (NULL: buffer, frozen or eval-only) */
    size_t off, goff;       /* placed: w = params_mem.base + off, g = grads_mem.base + goff */
    size_t n;
    int ndim;
    int64_t shape[4];
    int trainable;
    int frozen;             /* trainable but excluded: no gradient computed */
    int bn_eval;            /* on BN running_mean: that BN runs in eval mode
                             * in training steps (model_freeze_bn) */
    int bound;              /* some layer of the description binds it */
    int walk;               /* the order the description first binds it in (0 first:
                             * forward's order, roughly), -1 never bound */
} pentry_t;

/* What a layer does with the store when it asks for an entry. */
typedef enum {
    PS_BIND,     /* look up by name and shape (graphs for running) */
    PS_CHECK,    /* also check values (running_var >= 0): model_new */
    PS_RECORD    /* create missing entries, zero, of the shape wanted (init.c) */
} ps_mode_t;

typedef struct {
    pentry_t *e;
    size_t n, cap;
    int grads;              /* trainable entries get gradient arrays */
    ps_mode_t mode;
    char *src;              /* where the values came from, for messages */
    char arch[32];          /* the architecture, for messages */
    char hint[64];          /* ends shape errors ("check --classes"), pstore_hint */
    int placed;             /* pstore_place: w, g are views into the arenas */
    int nwalk;              /* entries bound so far (pentry_t.walk) */
    bk_arena_t params_mem;  /* trainable values, then the buffers from buf_off on */
    size_t buf_off;
    bk_arena_t grads_mem;   /* trainable, unfrozen entries' gradients, in entry order */
} pstore_t;

/* Every tensor of st but num_batches_tracked, as float. grads: give the
 * trainable ones gradient arrays (a model opened for training). NULL on
 * error (message in err). */
pstore_t *pstore_load(const safetensors_t *st, int grads, char *err, size_t errlen);
/* An empty store (init.c records into it); src names it in messages. */
pstore_t *pstore_new(const char *src, int grads);
void pstore_destroy(pstore_t **ps);
pentry_t *pstore_find(const pstore_t *ps, const char *name);
/* A new zero entry (PS_RECORD); NULL when out of memory or too long. */
pentry_t *pstore_add(pstore_t *ps, const char *name, int ndim, const int64_t *shape);
/* Room for n more entries, so that pointers to entries stay valid while a
 * layer adds its parameters. 0 or -1. */
int pstore_reserve(pstore_t *ps, size_t n);
/* Entries in name order, as a safetensors file lists them. */
void pstore_sort(pstore_t *ps);
/* Move the values into one params arena of ops (trainable entries in
 * entry order, then the buffers; each value 64-byte aligned, the gaps
 * zero) and, when the store has gradients, lay
 * out the grads arena; arena copies counted in traffic (may be NULL).
 * Entries are fixed from here on. 0, or -1 with err. */
int pstore_place(pstore_t *ps, const bk_arena_ops_t *ops, bk_traffic_t *traffic, char *err,
                 size_t errlen);
/* (Re)lay the grads arena after the freezes changed: one zeroed gradient
 * per trainable, unfrozen entry, in entry order; frozen ones get none
 * (g NULL). 0, or -1 when out of memory. */
int pstore_lay_grads(pstore_t *ps);
void pstore_hint(pstore_t *ps, const char *hint);
/* After a walk: every tensor of st must have been bound (num_batches_tracked
 * when its BatchNorm was). 0, or -1 naming the first one left over. */
int pstore_leftovers(const pstore_t *ps, const safetensors_t *st, char *err, size_t errlen);

/* ------------------------------------------------------------ layers
 *
 * Layers by state_dict prefix. Each binds its parameters (the values and,
 * unless frozen, the gradient arrays) and fails the graph naming the
 * tensor when one is missing or has the wrong shape (with the store's
 * hint). */
bk_tensor_t *tl_conv(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x, int oc, int k,
                   int stride, int pad, int has_bias);
/* tl_conv in two steps: bind the parameters of a conv on ic channels into
 * *p (0, or -1 with g failed), then build it. For a description that binds
 * in state_dict order but runs the ops in forward order. */
int tl_conv_bind(bk_graph_t *g, pstore_t *ps, const char *name, int ic, int oc, int k,
                 int stride, int pad, int has_bias, bk_conv_t *p);
bk_tensor_t *tl_conv_on(bk_graph_t *g, const char *name, bk_tensor_t *x, const bk_conv_t *p);
bk_tensor_t *tl_bn(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x);
/* relu(bn(x)) as one fused op */
bk_tensor_t *tl_bn_relu(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x);
bk_tensor_t *tl_linear(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x, int out);

/* ------------------------------------------------------------ arch table */

/* An architecture's configuration, fixed by resolve. */
typedef struct {
    int in_channels, num_classes;
    int nat_h, nat_w, hw_fixed;
    int ch[4];              /* wideresnet widths */
} arch_info_t;

typedef struct {
    const char *name;
    const char *hint;       /* ends a shape error ("check --model") */
    /* The configuration from the options and, when st is not NULL, the
     * weights' shapes (the classes of the head). 0, or -1 with err set. */
    int (*resolve)(const model_opts_t *o, const safetensors_t *st, arch_info_t *a, char *err,
                   size_t errlen);
    /* Append the network (BatchNorm and dropout as the graph's mode says)
     * to g with parameters from ps; returns the logits (n, classes, 1, 1),
     * NULL with g failed. */
    bk_tensor_t *(*describe)(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x);
} arch_t;

extern const arch_t ARCH_RESNET18;
extern const arch_t ARCH_RESNET34;
extern const arch_t ARCH_RESNET50;
extern const arch_t ARCH_WIDERESNET;
extern const arch_t ARCH_DENSENET121;

/* The classes of a head: the option, else the rows of st's `head` (2-D),
 * else def (no file; or the head is missing, which describe reports). */
int arch_classes(const model_opts_t *o, const safetensors_t *st, const char *head, int def);
/* describe on g with ps's hint reset to the arch's. */
bk_tensor_t *arch_describe(const arch_t *arch, const arch_info_t *a, pstore_t *ps, bk_graph_t *g,
                         bk_tensor_t *x);
/* Walk describe once, in ps's mode, on a description graph (one sample at
 * the natural size, nothing allocated): marks what the description binds,
 * or records it (PS_RECORD). 0, or -1 with err. */
int arch_walk(const arch_t *arch, const arch_info_t *a, pstore_t *ps, char *err, size_t errlen);
/* model_new's checks of a weights file loaded into ps: every tensor the
 * description binds exists with its shape and sane values, and every
 * tensor of st is bound. 0, or -1 with err naming the tensor. */
int arch_check(const arch_t *arch, const arch_info_t *a, pstore_t *ps, const safetensors_t *st,
               char *err, size_t errlen);

/* The arch's state_dict with PyTorch's initial values for seed (init.c):
 * wideresnet as the seed model (torch defaults: conv/linear weights and
 * biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), i.e. kaiming_uniform(a=sqrt(5))),
 * resnet* as torchvision's ResNet (conv kaiming_normal(fan_out, relu), fc
 * torch default), densenet121 as torchvision's DenseNet (conv
 * kaiming_normal(fan_in, relu), classifier bias 0); BatchNorm weight 1,
 * bias 0, running_mean 0, running_var 1 (num_batches_tracked: the model's
 * counters start at 0). Each tensor draws from its own stream keyed by
 * (seed, name): the values do not depend on tensor order. grads as
 * pstore_load. NULL with the reason in err. */
pstore_t *init_weights(const arch_t *arch, const arch_info_t *a, uint64_t seed, int grads,
                       char *err, size_t errlen);

#endif
