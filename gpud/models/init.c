/* init — a model's initial weights without a weights file (training from
 * scratch), as the PyTorch module's constructor would make them.
 *
 * The tensor list comes from the arch's own description walked on a
 * recording parameter store (layers.h: PS_RECORD), so it always matches
 * what the network binds. Values:
 *
 *   arch          conv weight                      linear weight / bias
 *   wideresnet    U(+-1/sqrt(fan_in)) (torch)       U(+-1/sqrt(fan_in)) both
 *   resnet*       N(0, sqrt(2/fan_out)) (tv)        torch default (fc)
 *   densenet121   N(0, sqrt(2/fan_in)) (tv)         torch weight, bias 0 (tv)
 *
 * "torch" = nn.Conv2d/nn.Linear.reset_parameters: kaiming_uniform_(a =
 * sqrt(5)) is U(-b, b) with b = sqrt(6 / ((1 + 5) fan_in)) = 1/sqrt(fan_in),
 * and the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)). "tv" = the loops at the
 * end of torchvision 0.14's ResNet.__init__ (kaiming_normal_(mode="fan_out",
 * nonlinearity="relu"), zero_init_residual=False) and DenseNet.__init__
 * (kaiming_normal_ with the defaults fan_in / leaky_relu(0) = relu gain,
 * Linear bias 0). The seed WideResNet has no init code: torch defaults.
 * BatchNorm: weight 1, bias 0, running_mean 0, running_var 1, counter 0.
 *
 * The distributions are PyTorch's, the random numbers are not (torch's
 * Mersenne Twister stream depends on module construction order): each
 * tensor gets its own splitmix64 stream keyed by (seed, name), so a value
 * depends only on the seed and the tensor, never on the order or count of
 * the others. Same seed, same bytes, on every rank and platform (doubles,
 * no libm beyond sqrt/log/cos, rounded once to float).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/mix64.h"
#include "common/str_suffix.h"
#include "gpud/models/layers.h"

typedef enum { POL_TORCH, POL_RESNET, POL_DENSENET } init_policy_t;

static uint64_t splitmix64(uint64_t *s)
{
    return mix64(*s += MIX64_GOLDEN);
}

/* FNV-1a of the name, mixed with the seed: the tensor's stream. */
static uint64_t stream_of(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001B3ull;
    uint64_t s = seed ^ h;
    (void)splitmix64(&s);
    return s;
}

static double uniform01(uint64_t *s)   /* [0, 1), 53 bits */
{
    return (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

static void fill_uniform(float *v, size_t n, uint64_t st, double bound)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((2.0 * uniform01(&st) - 1.0) * bound);
}

static void fill_normal(float *v, size_t n, uint64_t st, double stddev)
{
    const double two_pi = 6.283185307179586476925;
    for (size_t i = 0; i < n; i += 2) {   /* Box-Muller: two values per pair */
        double u1 = 1.0 - uniform01(&st), u2 = uniform01(&st);
        double r = sqrt(-2.0 * log(u1)) * stddev;
        v[i] = (float)(r * cos(two_pi * u2));
        if (i + 1 < n)
            v[i + 1] = (float)(r * sin(two_pi * u2));
    }
}

static void fill_const(float *v, size_t n, float c)
{
    for (size_t i = 0; i < n; i++)
        v[i] = c;
}

static const pentry_t *sibling(const pstore_t *ps, const char *stem, size_t stem_len,
                              const char *suffix)
{
    char name[160];
    snprintf(name, sizeof name, "%.*s%s", (int)stem_len, stem, suffix);
    return pstore_find(ps, name);
}

static void init_weight(const pentry_t *e, init_policy_t pol, uint64_t st, float *v, size_t n)
{
    size_t fan_in = e->shape[0] > 0 ? n / (size_t)e->shape[0] : 1;
    size_t fan_out = e->ndim == 4 ? n / (size_t)(e->shape[1] > 0 ? e->shape[1] : 1) : 0;
    if (e->ndim == 4 && pol == POL_RESNET)
        fill_normal(v, n, st, sqrt(2.0 / (double)(fan_out ? fan_out : 1)));
    else if (e->ndim == 4 && pol == POL_DENSENET)
        fill_normal(v, n, st, sqrt(2.0 / (double)(fan_in ? fan_in : 1)));
    else
        fill_uniform(v, n, st, 1.0 / sqrt((double)(fan_in ? fan_in : 1)));
}

/* The bias of weight w (NULL: none found). */
static void init_bias(const pentry_t *w, init_policy_t pol, uint64_t st, float *v, size_t n)
{
    size_t fan_in = w && w->shape[0] > 0 ? w->n / (size_t)w->shape[0] : 1;
    if (pol == POL_DENSENET && w && w->ndim == 2)
        fill_const(v, n, 0.0f);
    else
        fill_uniform(v, n, st, 1.0 / sqrt((double)(fan_in ? fan_in : 1)));
}

/* The values of entry e under policy pol. */
static void init_tensor(const pstore_t *ps, pentry_t *e, init_policy_t pol, uint64_t seed)
{
    size_t stem, n = e->n;
    float *v = e->w;
    uint64_t st = stream_of(seed, e->name);
    if (str_suffix(e->name, ".running_mean", &stem)) {
        fill_const(v, n, 0.0f);
    } else if (str_suffix(e->name, ".running_var", &stem)) {
        fill_const(v, n, 1.0f);
    } else if ((str_suffix(e->name, ".weight", &stem) || str_suffix(e->name, ".bias", &stem)) &&
               sibling(ps, e->name, stem, ".running_mean")) {   /* BatchNorm affine */
        fill_const(v, n, str_suffix(e->name, ".weight", &stem) ? 1.0f : 0.0f);
    } else if (str_suffix(e->name, ".weight", &stem)) {
        init_weight(e, pol, st, v, n);
    } else if (str_suffix(e->name, ".bias", &stem)) {
        init_bias(sibling(ps, e->name, stem, ".weight"), pol, st, v, n);
    } else {
        fill_const(v, n, 0.0f);   /* nothing else exists today; zeros are safe */
    }
}

pstore_t *init_weights(const arch_t *arch, const arch_info_t *a, uint64_t seed, int grads,
                       char *err, size_t errlen)
{
    init_policy_t pol = strncmp(arch->name, "resnet", 6) == 0     ? POL_RESNET
                        : strncmp(arch->name, "densenet", 8) == 0 ? POL_DENSENET
                                                                   : POL_TORCH;
    char what[64];
    snprintf(what, sizeof what, "initial weights (seed %llu)", (unsigned long long)seed);
    pstore_t *ps = pstore_new(what, grads);
    if (!ps) {
        err_set(err, errlen, "initial weights: out of memory");
        return NULL;
    }
    ps->mode = PS_RECORD;
    if (arch_walk(arch, a, ps, err, errlen) < 0) {
        pstore_destroy(&ps);
        return NULL;
    }
    ps->mode = PS_BIND;
    pstore_sort(ps);   /* the order of a file's tensors, so of model_param_at */
    for (size_t i = 0; i < ps->n; i++)
        init_tensor(ps, &ps->e[i], pol, seed);
    return ps;
}
