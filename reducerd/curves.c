#include "reducerd/curves.h"

#include <stdlib.h>

#include "common/log.h"

struct curves {
    uint32_t nc;
    uint32_t *pos; /* nc * PROB_BINS */
    uint32_t *neg; /* nc * PROB_BINS */
};

curves_t *curves_new(uint32_t nc)
{
    if (nc == 0 || nc > CURVES_MAX_CLASSES) {
        log_error("probability metrics: %u classes; they keep 80 KiB per class, at most %u "
                  "classes (drop --predictions probs/all)", nc, CURVES_MAX_CLASSES);
        return NULL;
    }
    curves_t *self = calloc(1, sizeof *self);
    if (self) {
        self->nc = nc;
        self->pos = calloc((size_t)nc * PROB_BINS, sizeof(uint32_t));
        self->neg = calloc((size_t)nc * PROB_BINS, sizeof(uint32_t));
    }
    if (!self || !self->pos || !self->neg) {
        log_error("probability metrics: out of memory for %u classes x %u bins", nc, PROB_BINS);
        curves_destroy(&self);
    }
    return self;
}

void curves_destroy(curves_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->pos);
    free((*self_p)->neg);
    free(*self_p);
    *self_p = NULL;
}

void curves_add(curves_t *self, int32_t label, const uint16_t *q)
{
    for (uint32_t c = 0; c < self->nc; c++) {
        uint32_t *h = (int32_t)c == label ? self->pos : self->neg;
        h[(size_t)c * PROB_BINS + q[c]]++;
    }
}

const uint32_t *curves_pos(const curves_t *self, uint32_t c)
{
    return self->pos + (size_t)c * PROB_BINS;
}

const uint32_t *curves_neg(const curves_t *self, uint32_t c)
{
    return self->neg + (size_t)c * PROB_BINS;
}

void curves_metrics(const curves_t *self, double *auc, double *ap)
{
    for (uint32_t c = 0; c < self->nc; c++) {
        auc[c] = scorehist_roc_auc(curves_pos(self, c), curves_neg(self, c), PROB_BINS);
        ap[c] = scorehist_ap(curves_pos(self, c), curves_neg(self, c), PROB_BINS);
    }
}
