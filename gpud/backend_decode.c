/* backend_decode — --decode gpu through the backend's optional table
 * (bk_ops_t.decode): a backend without one says so; and the eval
 * transform's place, which the decoder and gpud's training batches share. */
#include "gpud/backend_impl.h"

#include "common/errbuf.h"
#include "common/image/transform.h"

int backend_decode_eval_place(const bk_decode_batch_t *b, int src_w, int src_h,
                              bk_decode_place_t *p, char *why, size_t why_len)
{
    transform_t t = {.resize = b->resize, .crop_h = b->crop_h, .crop_w = b->crop_w,
                     .channels = b->channels};
    resize_window_t win;
    *p = (bk_decode_place_t){.w = src_w, .h = src_h};
    if (transform_window(&t, src_w, src_h, b->h, b->w, &p->rw, &p->rh, &win, why, why_len) != 0)
        return -1;
    p->wx = win.x;
    p->wy = win.y;
    return 0;
}

int backend_decode_ready(backend_t *be, char *err, size_t errlen)
{
    if (!be || !be->ops->decode) {
        err_set(err, errlen, "--decode gpu: the %s backend has no device decoder (use "
                "--backend cuda, built with nvJPEG's header: docs/CUDA.md \"Decoding on the "
                "GPU\"), or leave --decode at cpu", be ? be->ops->name : "(none)");
        return -1;
    }
    return be->ops->decode->ready(be, err, errlen);
}

int backend_decode(backend_t *be, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                   size_t errlen)
{
    if (backend_decode_ready(be, err, errlen) != 0)
        return -1;
    return be->ops->decode->batch(be, b, out, err, errlen);
}

int backend_decode_host(backend_t *be, const uint8_t *px, size_t bytes, char *err,
                        size_t errlen)
{
    if (!be || !be->ops->decode || !px || !bytes)
        return 0;
    return be->ops->decode->host(be, px, bytes, err, errlen);
}
