/* backend_select — the implementations this build has (cpu and ref always,
 * cuda when the toolkit was found at configure time), chosen by name. Above
 * the implementations; nothing below calls back here. */
#include "gpud/backend_impl.h"
#ifdef DDPIPE_HAVE_CUDA
#include "gpud/cuda/cuda_backend.h"
#endif

#include "common/cpus.h"
#include "common/errbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

backend_t *backend_new(const char *name, int threads, char *err, size_t errlen)
{
    if (threads < 0 || threads > 1024) {
        err_set(err, errlen, "backend: threads must be 0 (all cores) .. 1024, got %d", threads);
        return NULL;
    }
    if (threads == 0)
        threads = (int)cpus_available();
    if (name && strcmp(name, "cpu") == 0)
        return cpu_backend_new(threads, err, errlen);
    if (name && strcmp(name, "ref") == 0)
        return ref_backend_new(threads, err, errlen);
    if (name && strcmp(name, "ref-device") == 0)
        return ref_device_backend_new(threads, err, errlen);
#ifdef DDPIPE_HAVE_CUDA
    if (name && strcmp(name, "cuda") == 0)
        return cuda_backend_new(threads, err, errlen);
#endif
    err_set(err, errlen, "backend '%s' is not available (built: cpu, ref, ref-device%s); use "
            "--backend cpu", name ? name : "(null)",
            name && strcmp(name, "cuda") == 0 ?
                "; cuda was not found at build time: rebuild where the CUDA toolkit and cuDNN "
                "are installed" : "");
    return NULL;
}

int backend_bf16_native(const backend_t *be, const char **isa)
{
    if (isa)
        *isa = "none";
    if (!be->ops->train || !be->ops->train->bf16_native)
        return 0;
    return be->ops->train->bf16_native(isa);
}

/* bf16 native or emulated: DDPIPE_BF16 (native|emulated), else native
 * where the CPU has AMX or is an AMD one with avx512_bf16 (docs/BF16.md
 * "Which one": on Intel's without AMX oneDNN's bf16 kernels are slower than
 * the emulated path's fp32 ones, avx512_bf16 included); a backend without
 * BK_CAN_BF16_EMULATED (cuda) has no emulated bf16 to choose. */
static int bf16_mode(backend_t *be, char *err, size_t errlen)
{
    const char *isa = "none", *env = getenv("DDPIPE_BF16");
    int level = backend_bf16_native(be, &isa);
    if (env && *env && strcmp(env, "native") != 0 && strcmp(env, "emulated") != 0) {
        err_set(err, errlen, "DDPIPE_BF16='%s': native or emulated (unset: native where the "
                "CPU has amx or is an AMD one with avx512_bf16, else emulated)", env);
        return -1;
    }
    int native = env && *env ? strcmp(env, "native") == 0 : level == 3;
    if (native && level == 0) {
        if (be->ops->train->bf16_native)
            err_set(err, errlen, "DDPIPE_BF16=native: oneDNN creates no bf16 convolution on "
                    "this CPU (it needs avx512_core; avx512_bf16 or amx to be fast); unset "
                    "DDPIPE_BF16 (or set it to emulated) for the emulated bf16");
        else
            err_set(err, errlen, "DDPIPE_BF16=native: the %s backend has no native bf16 "
                    "kernels; unset DDPIPE_BF16 (or set it to emulated)", be->ops->name);
        return -1;
    }
    if (!native && !(be->ops->caps & BK_CAN_BF16_EMULATED)) {
        /* emulated bf16 is the tape's rounding of fp32 buffers */
        err_set(err, errlen, "DDPIPE_BF16=emulated: the %s backend runs bf16 only natively "
                "(docs/CUDA.md \"bf16 training\"); unset DDPIPE_BF16", be->ops->name);
        return -1;
    }
    be->precision = native ? BK_BF16_NATIVE : BK_BF16_EMULATED;
    if (native)
        snprintf(be->precision_name, sizeof be->precision_name, "bf16 (native: %s)", isa);
    else
        snprintf(be->precision_name, sizeof be->precision_name, "bf16 (emulated)");
    return 0;
}

int backend_set_precision(backend_t *be, const char *precision, char *err, size_t errlen)
{
    if (precision && strcmp(precision, "fp32") == 0) {
        be->precision = BK_FP32;
        snprintf(be->precision_name, sizeof be->precision_name, "fp32");
        return 0;
    }
    int fp16 = precision && strcmp(precision, "fp16") == 0;
    if (!precision || (!fp16 && strcmp(precision, "bf16") != 0)) {
        err_set(err, errlen, "precision '%s': fp32, bf16 or fp16", precision ? precision : "(null)");
        return -1;
    }
    if (!(be->ops->caps & (fp16 ? BK_CAN_FP16 : BK_CAN_BF16))) {
        err_set(err, errlen, "--precision %s is not implemented on the %s backend yet "
                "(use --precision fp32, or the cpu backend)", precision, be->ops->name);
        return -1;
    }
    if (!be->ops->train || !be->ops->train->round_half) {
        err_set(err, errlen, "--precision %s: the %s backend has no 16-bit rounding kernel",
                precision, be->ops->name);
        return -1;
    }
    if (fp16) {   /* fp16 values through the fp32 kernels, or the backend's own */
        const char *isa = NULL;
        be->precision = BK_FP16;
        if (!(be->ops->caps & BK_CAP_FUSED_FP16) || backend_bf16_native(be, &isa) <= 0)
            isa = NULL;   /* no fp16 kernels of its own */
        if (isa)
            snprintf(be->precision_name, sizeof be->precision_name, "fp16 (native: %s)", isa);
        else
            snprintf(be->precision_name, sizeof be->precision_name, "fp16 (fp32 kernels)");
        return 0;
    }
    return bf16_mode(be, err, errlen);
}

bk_precision_t backend_precision(const backend_t *be)
{
    return be->precision;
}

const char *backend_precision_name(const backend_t *be)
{
    return be->precision == BK_FP32 || !be->precision_name[0] ? "fp32" : be->precision_name;
}
