/* tensorboard — the job's scalars for TensorBoard (--tensorboard DIR),
 * from reducerd's events: per epoch and phase loss/{train,val,eval},
 * top1/..., top5/..., the learning rate (lr), images_per_sec/<phase> and
 * each rank's images_per_sec/rank<R> (step = the epoch); and while a phase
 * runs, throughput/images_per_sec at every progress event (step = its
 * count). The names follow PyTorch's SummaryWriter habit "Metric/phase". */
#ifndef DDP_TENSORBOARD_H
#define DDP_TENSORBOARD_H

#include "proto/event.h"
#include "reporterd/tfevents.h"

int tensorboard_on_metric(tfevents_t *tb, const ev_metric_t *m, char *err, size_t errlen);
/* tick: the progress events seen so far (the step). */
int tensorboard_on_progress(tfevents_t *tb, const ev_progress_t *p, int64_t tick, char *err,
                            size_t errlen);

#endif
