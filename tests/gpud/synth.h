/* synth — the C twin of synth() in tests/golden/gen_parity.py: weights and
 * pixels computed from a tensor's name by a 32-bit hash, bit-identical to
 * numpy's, so goldens for big models commit only their logits and a
 * manifest (name=shape;...) of the state_dict. */
#ifndef DDP_TEST_SYNTH_H
#define DDP_TEST_SYNTH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/safetensors.h"

static inline uint32_t synth_fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static inline double synth_u(uint32_t seed, uint64_t i)
{
    uint32_t x = seed + (uint32_t)i * 2654435761u;
    for (int r = 0; r < 2; r++) {
        x ^= x >> 16;
        x *= 0x45d9f3bu;
    }
    x ^= x >> 16;
    return (double)x / 4294967296.0;
}

static inline int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Fill v[numel] for state_dict entry `name` of the given shape. */
static inline void synth_tensor(const char *name, const int64_t *shape, int ndim, float *v)
{
    int64_t n = 1, fan_in = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
        if (i > 0)
            fan_in *= shape[i];
    }
    uint32_t seed = synth_fnv1a(name);
    double a = sqrt(6.0 / (double)fan_in);
    /* the kind follows the name, as in gen_parity.py */
    int kind = ends_with(name, "running_var")                                     ? 0
               : ends_with(name, "running_mean") || ends_with(name, ".bias") ? 1
               : ndim == 1                                                    ? 2
                                                                              : 3;
    for (int64_t i = 0; i < n; i++) {
        double u = synth_u(seed, (uint64_t)i);
        double x = kind == 0 ? 0.5 + 1.5 * u
                   : kind == 1 ? 0.2 * (u - 0.5)
                   : kind == 2 ? 0.5 + u
                               : (2.0 * u - 1.0) * a;
        v[i] = (float)x;
    }
}

static inline void synth_pixels(const char *name, uint8_t *px, size_t n)
{
    uint32_t seed = synth_fnv1a(name);
    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)floor(synth_u(seed, i) * 256.0);
}

/* Parse "a,b,c" into shape; returns ndim or -1. */
static inline int synth_shape(const char *s, int64_t *shape, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0)
            return -1;
        shape[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return *s ? -1 : n;
}

/* Write the weights of `model` (manifest in io's metadata) to path.
 * Returns 0 or -1 with err set. */
static inline int synth_weights(const safetensors_t *io, const char *model, const char *path,
                         char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.manifest", model);
    const char *man = safetensors_meta(io, key);
    if (!man) {
        err_set(err, errlen, "no %s in the golden", key);
        return -1;
    }
    char *copy = strdup(man), *save = NULL;
    st_writer_t *w = st_writer_new();
    int rc = copy && w ? 0 : -1;
    for (char *e = copy ? strtok_r(copy, ";", &save) : NULL; e && rc == 0;
         e = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(e, '=');
        int64_t shape[ST_MAX_DIMS];
        int nd = eq ? synth_shape(eq + 1, shape, ST_MAX_DIMS) : -1;
        if (nd < 0) {
            err_set(err, errlen, "bad manifest entry '%s'", e);
            rc = -1;
            break;
        }
        *eq = '\0';
        int64_t n = 1;
        for (int i = 0; i < nd; i++)
            n *= shape[i];
        float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) {
            err_set(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        synth_tensor(e, shape, nd, v);
        rc = st_writer_add(w, e, ST_F32, nd, shape, v, err, errlen);
        free(v);
    }
    if (rc == 0)
        rc = st_writer_save(w, path, err, errlen);
    st_writer_destroy(&w);
    free(copy);
    return rc;
}

#endif
