/* tfevents — TensorBoard's event file format, written without TensorFlow.
 *
 *   tfevents_t *tb = tfevents_new("runs/x/tb", err, sizeof err);
 *   tfevents_scalar(tb, "train/loss", 3, unix_time, 0.42f, err, sizeof err);
 *   tfevents_destroy(&tb);
 *
 * One file DIR/events.out.tfevents.<unix seconds>.<host>.<pid>: a sequence
 * of TFRecords (u64 length, masked CRC32C of the length, the bytes, masked
 * CRC32C of the bytes), each an Event protocol buffer: the first carries
 * file_version "brain.Event:2", the others a Summary with one scalar value
 * (tag, simple_value). TensorBoard and tensorboardX read exactly this. Each
 * record is flushed as written, so a live TensorBoard sees it at once. */
#ifndef DDP_TFEVENTS_H
#define DDP_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tfevents tfevents_t;

/* Creates DIR (one level) if needed and the file; NULL with why in err. */
tfevents_t *tfevents_new(const char *dir, char *err, size_t errlen);
void tfevents_destroy(tfevents_t **self_p);
/* One scalar at step, wall_time (seconds since 1970). 0, or -1 (err). */
int tfevents_scalar(tfevents_t *self, const char *tag, int64_t step, double wall_time,
                    float value, char *err, size_t errlen);
const char *tfevents_path(const tfevents_t *self);

/* CRC32C (Castagnoli) and TFRecord's mask of it: what each record carries. */
uint32_t tfevents_crc32c(const void *data, size_t len);
uint32_t tfevents_masked_crc(const void *data, size_t len);

#endif
