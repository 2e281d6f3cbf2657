#include "gpud/wire_decode.h"

#include "common/cpus.h"
#include "common/errbuf.h"
#include "common/image/augment.h"
#include "common/image/transform.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

transform_t wire_batch_transform(const ddp_batch_t *b)
{
    return (transform_t){.resize = b->resize, .crop_h = b->crop ? b->h : 0,
                         .crop_w = b->crop ? b->w : 0, .channels = b->c,
                         .dct_scaling = b->dct};
}

augment_t wire_batch_augment(const ddp_batch_t *b)
{
    return (augment_t){.crop = (b->aug_flags & DDP_AUG_CROP) != 0,
                       .scale = {b->aug_scale[0], b->aug_scale[1]},
                       .ratio = {b->aug_ratio[0], b->aug_ratio[1]},
                       .flip_p = b->aug_flip_p, .rotate = (b->aug_flags & DDP_AUG_ROTATE) != 0,
                       .degrees = {b->aug_degrees[0], b->aug_degrees[1]}, .channels = b->c};
}

/* Sample i of B into DST: the eval transform, or (train) the augmentation
 * of (seed, epoch, id). */
static int decode_one(const ddp_batch_t *b, const transform_t *t, const augment_t *aug,
                      const uint8_t *file, uint32_t i, uint8_t *dst, char *why)
{
    if (b->phase == DDP_PHASE_TRAIN)
        return augment_load_buffer(file, b->sizes[i], aug, t, b->aug_seed, b->epoch, b->ids[i],
                                   dst, b->h, b->w, why, DDP_MAX_WHY);
    return sample_load_buffer(file, b->sizes[i], t, dst, b->h, b->w, why, DDP_MAX_WHY);
}

int wire_decode_batch(const ddp_batch_t *b, int threads, uint8_t *out, uint8_t *failed,
                      char (*why)[DDP_MAX_WHY], char *err, size_t errlen)
{
    transform_t t = wire_batch_transform(b);
    augment_t aug = wire_batch_augment(b);
    if (transform_check(&t, err, errlen) != 0 ||
        (b->phase == DDP_PHASE_TRAIN && augment_check(&aug, err, errlen) != 0))
        return -1;
    size_t *at = malloc(((size_t)b->n + 1) * sizeof *at);
    if (!at) {
        err_set(err, errlen, "out of memory for %u file offsets", b->n);
        return -1;
    }
    at[0] = 0; /* sizes sum to the frame (validated on receipt) */
    for (uint32_t i = 0; i < b->n; i++)
        at[i + 1] = at[i] + b->sizes[i];
    if (threads <= 0)
        threads = (int)cpus_available();
    const uint8_t *files = b->pixels ? zframe_data(b->pixels) : NULL;
    size_t sb = (size_t)b->c * b->h * b->w;
    int nfailed = 0;
    /* dynamic: file sizes, hence decode times, vary */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(+ : nfailed)
    for (int i = 0; i < (int)b->n; i++) {
        uint8_t *dst = out + (size_t)i * sb;
        failed[i] = decode_one(b, &t, &aug, files + at[i], (uint32_t)i, dst, why[i]) != 0;
        if (failed[i]) {
            memset(dst, 0, sb);
            nfailed++;
        }
    }
    free(at);
    return nfailed;
}
