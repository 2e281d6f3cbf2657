/* loss_scale — see loss_scale.h. */
#include "gpud/loss_scale.h"

#include <float.h>
#include <math.h>

bool loss_scale_valid(double s)
{
    int e;
    return isfinite(s) && s > 0 && frexp(s, &e) == 0.5 && e - 1 >= -126 && e - 1 <= 127;
}

loss_scale_t loss_scale_new(double init, int64_t interval)
{
    return (loss_scale_t){.scale = (float)init, .interval = interval > 0 ? interval : 1};
}

void loss_scale_update(loss_scale_t *s, bool found_inf)
{
    if (found_inf) {
        s->skipped++;
        s->tracker = 0;
        if (s->scale > FLT_MIN)   /* stays a normal float, so 1/S stays finite */
            s->scale *= 0.5f;
        return;
    }
    if (++s->tracker < s->interval)
        return;
    s->tracker = 0;
    if (s->scale <= FLT_MAX / 2)   /* GradScaler keeps S when 2S is not finite */
        s->scale *= 2.0f;
}
