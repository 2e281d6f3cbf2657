/* scan — the datasets loaderd reads: opened (the ImageFolder listed or the
 * IDX files read, common/dataset.c), cut to --limit, and a validation set
 * checked against the train set's classes. Below the state: loader_new
 * calls it; errors are logged with what to fix. */
#ifndef DDP_LOADERD_SCAN_H
#define DDP_LOADERD_SCAN_H

#include "common/dataset.h"

#include <stdint.h>

/* The dataset SPEC; *samples gets its size, at most LIMIT (-1: no limit).
 * CLASSES (NULL: none): a class map (common/classmap.h) onto the model's
 * OUTPUTS, applied to the labels and class names. NULL (logged) when it
 * cannot be opened or mapped. */
dataset_t *scan_open(const char *spec, long limit, const char *classes, long outputs,
                     uint64_t *samples);

/* 0 when VAL names the classes of TRAIN in the same order; -1 (logged,
 * naming both specs) otherwise. */
int scan_check_val_classes(const dataset_t *train, const char *train_spec, const dataset_t *val,
                           const char *val_spec);

#endif
