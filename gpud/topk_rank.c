/* topk_rank — see topk_rank.h. */
#include "gpud/topk_rank.h"

#include <math.h>
#include <stddef.h>

/* Does class a rank before class b? Higher logit first, ties by id; NaN
 * above everything as in torch.topk/argmax, so top-1 of a row with NaNs is
 * torch.argmax's (its first NaN). */
static int ranks_before(const float *l, int a, int b)
{
    float x = l[a], y = l[b];
    if (isnan(x) || isnan(y))
        return isnan(x) && (!isnan(y) || a < b);
    return x > y || (x == y && a < b);
}

static void topk_one(const float *l, int nc, int k, int32_t *out)
{
    /* k passes of selection; k is small (5) and classes <= ~1000s */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int c = 0; c < nc; c++) {
            int taken = 0;
            for (int i = 0; i < j && !taken; i++)
                taken = out[i] == c;
            if (!taken && (best < 0 || ranks_before(l, c, best)))
                best = c;
        }
        out[j] = best;   /* -1 once the classes run out */
    }
}

void topk_rank(const float *logits, int n, int classes, int k, int32_t *topk)
{
    for (int i = 0; i < n; i++)
        topk_one(logits + (size_t)i * classes, classes, k, topk + (size_t)i * k);
}
