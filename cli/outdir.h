/* outdir — a run directory's previous outputs, before a new job starts.
 *
 * A rerun into an --out that holds what an earlier ddpipe run wrote
 * (summary.json, predictions.csv, metrics.csv, classification_report.txt,
 * the plots, the seed CSV, checkpoint.safetensors, model.safetensors, their
 * temporary files, logs/) is refused: a failed rerun would leave the old
 * results there looking current. With --overwrite those outputs (and the
 * ipc folders of killed jobs, .ipc-XXXXXX) are removed first — deleted, not moved aside — and nothing
 * else: files ddpipe does not write stay, and so do the input files named
 * in KEEP (e.g. --weights OUT/model.safetensors). Entries are removed by
 * name relative to a descriptor of OUT; symlinks are removed, never
 * followed. `ddpipe train --resume OUT` into the same OUT does not call
 * this: resuming continues that run's files by design. */
#ifndef DDP_CLI_OUTDIR_H
#define DDP_CLI_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>

/* 1 when NAME (an entry of a run directory) is something ddpipe writes. */
int outdir_is_output(const char *name);

/* 0: OUT holds no previous outputs, or OVERWRITE removed them (a missing
 * OUT is fine). -1 with the reason printed ("ddpipe CMD: ..."): outputs
 * there and no OVERWRITE, or one could not be removed. KEEP: NKEEP paths
 * (at most 16; NULL entries skipped) that are never removed. */
int outdir_prepare(const char *cmd, const char *out, bool overwrite, const char *const *keep,
                   size_t nkeep);

#endif
