/* model_topk — per-sample top-k class ids and cross-entropy of logits, as
 * torch.topk and CrossEntropyLoss(reduction="none") compute them. */
#include "gpud/model.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common/scorehist.h"
#include "gpud/topk_rank.h"

static float ce_one(const float *l, int nc, int32_t label)
{
    if (label < 0 || label >= nc)
        return NAN;
    double mx = -INFINITY;
    bool nan = false;
    for (int c = 0; c < nc; c++) {
        nan |= isnan(l[c]);
        mx = l[c] > mx ? l[c] : mx;
    }
    if (nan || !isfinite(mx))
        return NAN;   /* as torch's log_softmax: a NaN logit, or inf - inf */
    double s = 0.0;
    for (int c = 0; c < nc; c++)
        s += exp((double)l[c] - mx);
    return (float)(mx + log(s) - (double)l[label]);
}

void model_topk_ce(const float *logits, int n, int num_classes, const int32_t *labels, int k,
                   int32_t *topk, float *loss)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * num_classes;
        if (topk && k > 0)
            topk_rank(l, 1, num_classes, k, topk + (size_t)i * k);
        if (loss)
            loss[i] = labels ? ce_one(l, num_classes, labels[i]) : NAN;
    }
}

void model_softmax_q(const float *logits, int n, int num_classes, uint16_t *q)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * num_classes;
        uint16_t *out = q + (size_t)i * num_classes;
        double mx = -INFINITY;
        bool nan = false;
        for (int c = 0; c < num_classes; c++) {
            nan |= isnan(l[c]);
            mx = l[c] > mx ? l[c] : mx;
        }
        if (nan || !isfinite(mx)) {
            memset(out, 0, (size_t)num_classes * sizeof *out);
            continue;
        }
        double s = 0.0;
        for (int c = 0; c < num_classes; c++)
            s += exp((double)l[c] - mx);
        for (int c = 0; c < num_classes; c++)
            out[c] = prob_quantize((float)(exp((double)l[c] - mx) / s));
    }
}
