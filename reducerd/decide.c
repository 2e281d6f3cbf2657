#include "reducerd/decide.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void decide_epoch(const decide_cfg_t *cfg, uint32_t epoch, uint32_t streak_before,
                  double val_top1, decide_t *out)
{
    memset(out, 0, sizeof *out);
    bool judged = cfg->target > 0 && val_top1 >= 0;
    bool met = judged && val_top1 >= cfg->target;
    out->streak = met ? streak_before + 1 : 0;
    bool target_stop = met && out->streak >= cfg->patience;
    bool last = epoch + 1 >= cfg->epochs;
    out->decision = (target_stop || last) ? 1 : 0;
    char what[128];
    if (val_top1 < 0)
        snprintf(what, sizeof what, "no validation");
    else if (!judged)
        snprintf(what, sizeof what, "val top-1 %.4f, no target", val_top1);
    else
        snprintf(what, sizeof what, "val top-1 %.4f %s target %.4f (%u of patience %u)", val_top1,
                 met ? ">=" : "<", cfg->target, out->streak, cfg->patience);
    if (target_stop)
        snprintf(out->reason, sizeof out->reason,
                 "early stop after epoch %u: %s", epoch, what);
    else if (last)
        snprintf(out->reason, sizeof out->reason, "epoch %u was the last of --epochs %u: %s",
                 epoch, cfg->epochs, what);
    else
        snprintf(out->reason, sizeof out->reason, "continue after epoch %u: %s", epoch, what);
}
