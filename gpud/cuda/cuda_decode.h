/* cuda_decode — --decode gpu on the cuda backend (cuda_decode.c; built
 * where nvJPEG's header was found, DDPIPE_HAVE_NVJPEG). */
#ifndef DDP_CUDA_DECODE_H
#define DDP_CUDA_DECODE_H

#include "gpud/backend_impl.h"

#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

typedef struct cu_decode cu_decode_t;

/* nvJPEG loaded and a handle, its states and a stream made; NULL with
 * what to do in err. Call on the thread (device) that will decode. */
cu_decode_t *cu_decode_new(char *err, size_t errlen);
void cu_decode_destroy(cu_decode_t **d);
/* backend_decode's work (backend.h). */
int cu_decode_batch(cu_decode_t *d, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                    size_t errlen);

/* [px, px + bytes) readable on the host where it lies in the last
 * decoded batch (backend_decode_host): the batch copied back into its
 * pinned host buffer, once. 0 (also for other bytes, or d NULL), or -1
 * with err. */
int cu_decode_host(cu_decode_t *d, const uint8_t *px, size_t bytes, char *err, size_t errlen);

/* The device address of host pixels [px, px + bytes) when they lie in
 * the last decoded batch (named by its pinned host buffer; the device
 * holds the bytes, complete: the batch's decode was waited for), else NULL. The
 * input path reads there instead of uploading them; it then records
 * cu_decode_mark_used on the stream that reads, and the next batch's
 * resize waits for that. */
const uint8_t *cu_decode_device_view(cu_decode_t *d, const uint8_t *px, size_t bytes);
cudaError_t cu_decode_mark_used(cu_decode_t *d, cudaStream_t s);

/* bk_ops_t.decode of the cuda backend */
extern const bk_decode_ops_t CUDA_DECODE_OPS;

#endif
