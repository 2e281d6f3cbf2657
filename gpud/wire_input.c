#include "gpud/wire_input.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "gpud/wire_decode.h"

#include <stdlib.h>
#include <string.h>

void wire_input_clear(wire_input_t *in)
{
    free(in->failed);
    free(in->why);
    free(in->ids);
    free(in->labels);
    memset(in, 0, sizeof *in);
}

/* --decode gpu: a batch's files go to the device, but for a training
 * batch with a rotation (PIL's affine nearest sampling is the host's) */
static int on_device(const gpud_t *self, const ddp_batch_t *batch)
{
    return strcmp(self->options.decode, "gpu") == 0 &&
           !(batch->phase == DDP_PHASE_TRAIN && (batch->aug_flags & DDP_AUG_ROTATE));
}

typedef struct {
    const ddp_batch_t *b;
    augment_t aug;
    const bk_decode_batch_t *d;   /* the decoder's batch (its eval transform) */
} train_place_t;

/* bk_decode_batch_t.place of a training batch: what augment_load_buffer
 * does to sample i (common/image/augment.h): RandomResizedCrop's box drawn
 * from (seed, epoch, id) and the image's size, resized to the sample; or,
 * without the random crop, the eval transform; then the drawn flip */
static int train_place(void *ctx, int i, int src_w, int src_h, bk_decode_place_t *p, char *why,
                       size_t len)
{
    const train_place_t *c = ctx;
    const ddp_batch_t *b = c->b;
    if (!c->aug.crop) {
        if (backend_decode_eval_place(c->d, src_w, src_h, p, why, len) != 0)
            return -1;
        p->flip = augment_draw(&c->aug, b->aug_seed, b->epoch, b->ids[i], b->w, b->h).flip;
        return 0;
    }
    augment_params_t a = augment_draw(&c->aug, b->aug_seed, b->epoch, b->ids[i], src_w, src_h);
    *p = (bk_decode_place_t){.x = a.left, .y = a.top, .w = a.w, .h = a.h, .rw = b->w,
                             .rh = b->h, .flip = a.flip};
    return 0;
}

/* The batch decoded by the backend (backend_decode): the pixels stay in
 * its buffer (in->pixels), the failures in IN's flags and reasons; a
 * training batch's live samples packed to the front (in->packed) */
static int device_decode(gpud_t *self, const ddp_batch_t *batch, wire_input_t *in, char *err,
                         size_t errlen)
{
    int train = batch->phase == DDP_PHASE_TRAIN;
    train_place_t tp = {batch, wire_batch_augment(batch), NULL};
    transform_t t = wire_batch_transform(batch);
    if (train && augment_check(&tp.aug, err, errlen) != 0)
        return -1;
    bk_decode_batch_t d = {
        .files = batch->pixels ? zframe_data(batch->pixels) : NULL, .sizes = batch->sizes,
        .n = (int)batch->n, .resize = t.resize, .crop_h = t.crop_h,
        .crop_w = t.crop_w, .channels = t.channels, .h = batch->h, .w = batch->w,
        .threads = (int)self->options.decode_threads,
        .place = train ? train_place : NULL, .place_ctx = &tp, .compact = train,
        .failed = in->failed, .why = in->why[0], .why_len = sizeof *in->why};
    tp.d = &d;
    const uint8_t *px = NULL;
    int nfailed = backend_decode(model_backend(self->model), &d, &px, err, errlen);
    in->pixels = nfailed >= 0 ? px : NULL;
    in->packed = train;
    return nfailed;
}

/* The batch decoded on the host (wire_decode_batch) into self->wire_px. */
static int host_decode(gpud_t *self, const ddp_batch_t *batch, wire_input_t *in, char *err,
                       size_t errlen)
{
    size_t need = (size_t)batch->n * batch->c * batch->h * batch->w;
    if (need > self->wire_px_cap) {
        uint8_t *p = realloc(self->wire_px, need);
        if (!p) {
            err_set(err, errlen, "out of memory for a decoded batch of %zu bytes; lower "
                    "--batch-size", need);
            return -1;
        }
        self->wire_px = p;
        self->wire_px_cap = need;
    }
    in->pixels = self->wire_px;
    return wire_decode_batch(batch, (int)self->options.decode_threads, self->wire_px,
                             in->failed, in->why, err, errlen);
}

int wire_input(gpud_t *self, const ddp_batch_t *batch, wire_input_t *in)
{
    memset(in, 0, sizeof *in);
    if (batch->wire != DDP_WIRE_ENCODED) {
        in->pixels = batch->pixels ? zframe_data(batch->pixels) : NULL;
        return 0;
    }
    in->failed = malloc(batch->n ? batch->n : 1);
    in->why = malloc((batch->n ? batch->n : 1) * sizeof *in->why);
    if (!in->failed || !in->why) {
        wire_input_clear(in);
        log_error("out of memory for a batch of %u files", batch->n);
        return -1;
    }
    char err[512];
    int nfailed = batch->n > 0 && on_device(self, batch)
                      ? device_decode(self, batch, in, err, sizeof err)
                      : host_decode(self, batch, in, err, sizeof err);
    if (nfailed < 0) {
        wire_input_clear(in);
        log_error("cannot decode batch %llu (--wire jpeg%s): %s",
                  (unsigned long long)batch->seq, on_device(self, batch) ? ", --decode gpu" : "",
                  err);
        return -1;
    }
    for (uint32_t i = 0; i < batch->n; i++)
        if (in->failed[i])
            log_warn("sample %llu of batch %llu did not decode: %s (reported failed)",
                     (unsigned long long)batch->ids[i], (unsigned long long)batch->seq,
                     in->why[i]);
    in->nfailed = (uint32_t)nfailed;
    return 0;
}

int wire_input_attach(ddp_result_t *r, const wire_input_t *in)
{
    if (!in->nfailed)
        return 0;
    r->why = malloc(in->nfailed * sizeof *r->why);
    if (!r->why)
        return -1;
    for (uint32_t i = 0; i < r->n; i++)
        if (in->failed[i])
            r->why[r->nwhy++] = in->why[i];
    r->failed = in->failed;
    return 0;
}

int wire_input_keep(wire_input_t *in, const ddp_batch_t *batch)
{
    uint32_t n = batch->n;
    in->ids = malloc((n ? n : 1) * sizeof *in->ids);
    in->labels = malloc((n ? n : 1) * sizeof *in->labels);
    if (!in->ids || !in->labels) {
        log_error("out of memory for a train batch of %u samples", n);
        return -1;
    }
    size_t sb = (size_t)batch->c * batch->h * batch->w;
    uint8_t *px = (uint8_t *)in->pixels;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (in->failed && in->failed[i])
            continue;
        if (m != i && !in->packed) /* in place, front to back: the batch's order is kept */
            memmove(px + m * sb, px + i * sb, sb);
        in->ids[m] = batch->ids[i];
        in->labels[m] = batch->labels[i];
        m++;
    }
    in->kept = m;
    return 0;
}

int wire_input_agree(const wire_input_t *in, allreduce_t *ring, int timeout_ms,
                     uint32_t *total, char *err, size_t errlen)
{
    int world = allreduce_world(ring), rank = allreduce_rank(ring);
    if (world < 1 || rank < 0 || rank >= world) {
        err_set(err, errlen, "the ring is not connected (rank %d of %d)", rank, world);
        return -1;
    }
    /* one slot per rank: no chunk of the ring is empty, and each sum is a
     * single count plus zeros */
    float *counts = calloc((size_t)world, sizeof *counts);
    if (!counts) {
        err_set(err, errlen, "out of memory for %d counts", world);
        return -1;
    }
    counts[rank] = (float)in->nfailed;
    int rc = allreduce_sum(ring, counts, (size_t)world, timeout_ms, err, errlen);
    uint64_t sum = 0;
    for (int r = 0; rc == 0 && r < world; r++)
        sum += (uint64_t)counts[r];
    free(counts);
    *total = (uint32_t)sum;
    return rc;
}

void wire_input_spread(const wire_input_t *in, uint32_t n, float *loss, int32_t *topk, int k)
{
    if (!in->failed || in->kept == n)
        return;
    /* back to front: kept row j <= batch row i, so nothing is overwritten unread */
    uint32_t j = in->kept;
    for (uint32_t i = n; i-- > 0;) {
        if (in->failed[i]) {
            loss[i] = 0;
            memset(topk + (size_t)i * k, 0, (size_t)k * sizeof *topk);
            continue;
        }
        j--;
        loss[i] = loss[j];
        memmove(topk + (size_t)i * k, topk + (size_t)j * k, (size_t)k * sizeof *topk);
    }
}
