/* wire_decode — a loaderd --wire jpeg batch (BATCH 'wire' 1: the samples'
 * original files and the eval transform) turned into the uint8 CHW tensor
 * loaderd would have sent with --wire uint8. Each file goes through the same
 * code loaderd runs (common/image: sample_load_buffer is sample_load after
 * the file is read), so the pixels — hence logits, top-k and losses — are
 * bitwise those of --wire uint8. A train batch (phase 1) carries the
 * augmentation's config and seed: each sample's crop/flip/rotation is drawn
 * from (seed, epoch, id) as loaderd draws it (augment_load_buffer).
 *
 * Threads: OpenMP over the samples. gpud already runs libgomp for oneDNN;
 * the decode runs before the forward pass, never beside it, so both use the
 * one thread pool without oversubscribing the cores, and no second pool
 * (pthreads) idles beside it. A sample writes only its slice of the tensor,
 * its flag and its reason; the decoders' scratch is per thread
 * (transform.c's workspace): the threads share nothing mutable. */
#ifndef DDP_GPUD_WIRE_DECODE_H
#define DDP_GPUD_WIRE_DECODE_H

#include "common/image/augment.h"
#include "common/image/transform.h"
#include "proto/messages.h"

#include <stddef.h>
#include <stdint.h>

/* The transform loaderd applied with --wire uint8, from B's fields. */
transform_t wire_batch_transform(const ddp_batch_t *b);
/* A train batch's augmentation, as loaderd's augment_t. */
augment_t wire_batch_augment(const ddp_batch_t *b);

/* Decodes the n files of B (wire 1) into OUT (n*c*h*w bytes) with THREADS
 * threads (0: every CPU it may use). A sample that fails gets failed[i] = 1, its
 * reason in why[i] and zero pixels; the others failed[i] = 0. Returns how
 * many failed, or -1 with a reason when B's transform cannot be applied
 * at all (then nothing is decoded). */
int wire_decode_batch(const ddp_batch_t *b, int threads, uint8_t *out, uint8_t *failed,
                      char (*why)[DDP_MAX_WHY], char *err, size_t errlen);

#endif
