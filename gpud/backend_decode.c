/* backend_decode — --decode gpu through the backend's optional table
 * (bk_ops_t.decode): a backend without one says so. */
#include "gpud/backend_impl.h"

#include "common/errbuf.h"

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
