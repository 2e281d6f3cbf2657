/* train_files — a train step's shards as files (--wire jpeg): each
 * sample's original file is read on the threads (never decoded), the
 * unreadable ones reported FAILED and left out, and every shard carries
 * the eval transform and the augmentation (config and seed) gpud needs to
 * make the very pixels train_sample_load makes (PROTOCOL.md "Encoded
 * samples"). global_count counts the files read; a file that reads but
 * does not decode fails at gpud, which takes it out of the step's divisor
 * with the other ranks (gpud/wire_input.h). A role over loader_t, below
 * training.c. */
#ifndef DDP_TRAIN_FILES_H
#define DDP_TRAIN_FILES_H

#include "loaderd/loader.h"

/* ST's shards (ids and labels set, no data frame yet, TOTAL samples in
 * all) filled with their files; st->global_count set. 0, or -1 (logged)
 * when out of memory or a shard's files pass a BATCH's 2 GiB. */
int train_files_load(loader_t *self, step_t *st, uint64_t total);

#endif
