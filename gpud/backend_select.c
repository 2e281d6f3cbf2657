/* backend_select — the implementations this build has (cpu and ref always,
 * cuda when the toolkit was found at configure time), chosen by name. Above
 * the implementations; nothing below calls back here. */
#include "gpud/backend_impl.h"
#ifdef DDPIPE_HAVE_CUDA
#include "gpud/cuda/cuda_backend.h"
#endif

#include "common/errbuf.h"

#include <string.h>
#include <unistd.h>

backend_t *backend_new(const char *name, int threads, char *err, size_t errlen)
{
    if (threads < 0 || threads > 1024) {
        err_set(err, errlen, "backend: threads must be 0 (all cores) .. 1024, got %d", threads);
        return NULL;
    }
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (name && strcmp(name, "cpu") == 0)
        return cpu_backend_new(threads, err, errlen);
    if (name && strcmp(name, "ref") == 0)
        return ref_backend_new(threads, err, errlen);
#ifdef DDPIPE_HAVE_CUDA
    if (name && strcmp(name, "cuda") == 0)
        return cuda_backend_new(threads, err, errlen);
#endif
    err_set(err, errlen, "backend '%s' is not available (built: cpu, ref%s)",
            name ? name : "(null)",
            name && strcmp(name, "cuda") == 0 ? "; cuda was not found at build time" : "");
    return NULL;
}

int backend_set_precision(backend_t *be, const char *precision, char *err, size_t errlen)
{
    if (precision && strcmp(precision, "fp32") == 0) {
        be->precision = BK_FP32;
        return 0;
    }
    if (!precision || strcmp(precision, "bf16") != 0) {
        err_set(err, errlen, "precision '%s': fp32 or bf16", precision ? precision : "(null)");
        return -1;
    }
    if (strcmp(be->ops->name, "cuda") == 0) {
        err_set(err, errlen, "--precision bf16 is not implemented on the cuda backend yet "
                "(use --precision fp32, or the cpu backend)");
        return -1;
    }
    if (!be->ops->train || !be->ops->train->round_bf16) {
        err_set(err, errlen, "--precision bf16: the %s backend has no bf16 support",
                be->ops->name);
        return -1;
    }
    /* no backend has native bf16 kernels yet (docs/BF16.md "Native") */
    be->precision = BK_BF16_EMULATED;
    return 0;
}

bk_precision_t backend_precision(const backend_t *be)
{
    return be->precision;
}

const char *backend_precision_name(const backend_t *be)
{
    static const char *const names[] = {"fp32", "bf16 (emulated)"};
    return names[be->precision];
}
