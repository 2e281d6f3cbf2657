/* dnnl_bf16 — what the cpu backend's native bf16 (BK_BF16_NATIVE,
 * docs/BF16.md "Native") needs besides its kernels: the probe that says
 * whether oneDNN makes bf16 convolutions and inner products on this
 * CPU, and the shared buffers that hold the bf16 copies of a layer's src
 * and diff_dst while its primitives run. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "common/log.h"
#include "gpud/cpu/dnnl_priv.h"

static int probe_level;
static const char *probe_isa = "none";
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int test_f32;   /* cpu_bf16_test_f32 */

/* 1 when the oneDNN call that made *pd (status st, an argument: *pd is
 * read after it) found a non-reference implementation (a "ref:" one exists
 * on avx512_core for every shape but is far slower than the fp32 kernels:
 * no native path then). *pd is kept when keep and ok, else destroyed. */
static int pd_ok(dnnl_status_t st, dnnl_primitive_desc_t *pd, int keep, const char *what)
{
    if (st != dnnl_success) {
        *pd = NULL;
        log_info("bf16 probe: no oneDNN bf16 %s on this CPU (native bf16 off)", what);
        return 0;
    }
    const char *impl = cpu_impl(*pd);
    int ok = strncmp(impl, "ref", 3) != 0;
    if (ok)
        log_debug("bf16 probe: %s: %s", what, impl);
    else
        log_info("bf16 probe: oneDNN's bf16 %s is %s (native bf16 off)", what,
                 *impl ? impl : "unnamed");
    if (!ok || !keep) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
    }
    return ok;
}

/* A 3x3 convolution and an inner product, each forward, backward data and
 * backward weights, with the types the native plans use (dnnl_train.c):
 * bf16 src, weights and diff_dst; f32 dst, bias, diff_src, diff_weights. */
static int probe_prims(dnnl_engine_t eng, dnnl_primitive_attr_t a)
{
    const dnnl_dim_t x[4] = {2, 32, 7, 7}, w[4] = {32, 32, 3, 3}, b[1] = {32};
    const dnnl_dim_t x2[2] = {2, 64}, w2[2] = {16, 64}, y2[2] = {2, 16}, b2[1] = {16};
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t s16 = cpu_md(&k, 4, x, dnnl_bf16, dnnl_acdb);
    const_dnnl_memory_desc_t s32 = cpu_md(&k, 4, x, dnnl_f32, dnnl_acdb);
    const_dnnl_memory_desc_t d32 = cpu_md(&k, 4, x, dnnl_f32, dnnl_acdb);
    const_dnnl_memory_desc_t d16 = cpu_md(&k, 4, x, dnnl_bf16, dnnl_acdb);
    const_dnnl_memory_desc_t wany = cpu_md(&k, 4, w, dnnl_bf16, dnnl_format_tag_any);
    const_dnnl_memory_desc_t wany32 = cpu_md(&k, 4, w, dnnl_f32, dnnl_format_tag_any);
    const_dnnl_memory_desc_t bias = cpu_md(&k, 1, b, dnnl_f32, dnnl_x);
    const_dnnl_memory_desc_t is16 = cpu_md(&k, 2, x2, dnnl_bf16, dnnl_ab);
    const_dnnl_memory_desc_t is32 = cpu_md(&k, 2, x2, dnnl_f32, dnnl_ab);
    const_dnnl_memory_desc_t iw = cpu_md(&k, 2, w2, dnnl_bf16, dnnl_format_tag_any);
    const_dnnl_memory_desc_t iw32 = cpu_md(&k, 2, w2, dnnl_f32, dnnl_format_tag_any);
    const_dnnl_memory_desc_t iy32 = cpu_md(&k, 2, y2, dnnl_f32, dnnl_ab);
    const_dnnl_memory_desc_t iy16 = cpu_md(&k, 2, y2, dnnl_bf16, dnnl_ab);
    const_dnnl_memory_desc_t ib = cpu_md(&k, 1, b2, dnnl_f32, dnnl_x);
    const dnnl_dims_t st = {1, 1}, pad = {1, 1}, dil = {0, 0};
    const dnnl_alg_kind_t alg = dnnl_convolution_direct;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    int ok = !k.failed &&
             pd_ok(dnnl_convolution_forward_primitive_desc_create(&fpd, eng, dnnl_forward_training,
                                                                  alg, s16, wany, bias, d32, st,
                                                                  dil, pad, pad, a),
                   &fpd, 1, "convolution forward") &&
             pd_ok(dnnl_convolution_backward_data_primitive_desc_create(
                       &pd, eng, alg, s32, wany, d16, st, dil, pad, pad, fpd, a),
                   &pd, 0, "convolution backward data") &&
             pd_ok(dnnl_convolution_backward_weights_primitive_desc_create(
                       &pd, eng, alg, s16, wany32, bias, d16, st, dil, pad, pad, fpd, a),
                   &pd, 0, "convolution backward weights");
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    fpd = NULL;
    ok = ok &&
         pd_ok(dnnl_inner_product_forward_primitive_desc_create(&fpd, eng, dnnl_forward_training,
                                                                is16, iw, ib, iy32, a),
               &fpd, 1, "inner product forward") &&
         pd_ok(dnnl_inner_product_backward_data_primitive_desc_create(&pd, eng, is32, iw, iy16,
                                                                      fpd, a),
               &pd, 0, "inner product backward data") &&
         pd_ok(dnnl_inner_product_backward_weights_primitive_desc_create(&pd, eng, is16, iw32, ib,
                                                                         iy16, fpd, a),
               &pd, 0, "inner product backward weights");
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    cpu_mds_free(&k);
    return ok;
}

static int cpu_is_amd(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return 0;
#endif
}

static void probe(void)
{
    dnnl_engine_t eng = NULL;
    dnnl_primitive_attr_t a = NULL;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_primitive_attr_create(&a) != dnnl_success ||
        dnnl_primitive_attr_set_fpmath_mode(a, dnnl_fpmath_mode_strict) != dnnl_success) {
        log_warn("bf16 probe: oneDNN engine or attribute creation failed: bf16 is emulated");
    } else if (probe_prims(eng, a)) {
        /* the ISA oneDNN dispatches to (DNNL_MAX_CPU_ISA caps it) */
        unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
        unsigned amx = dnnl_cpu_isa_avx512_core_amx, bf = dnnl_cpu_isa_avx512_core_bf16;
        probe_level = (isa & amx) == amx ? 3 : (isa & bf) == bf ? 2 : 1;
        probe_isa = probe_level == 3   ? "amx"
                    : probe_level == 2 ? "avx512_bf16"
                                       : "avx512_core, no bf16 instructions";
        /* AMD's avx512_bf16 (Zen 5 measured: ResNet-18 eval 237 against
         * 201 img/s emulated, a training step 66 against 45) runs oneDNN's
         * bf16 kernels faster than the fp32 ones, where Intel's without
         * AMX did not (docs/BF16.md "Which one") */
        if (probe_level == 2 && cpu_is_amd()) {
            probe_level = 3;
            probe_isa = "avx512_bf16, AMD";
        }
    }
    if (a)
        dnnl_primitive_attr_destroy(a);
    if (eng)
        dnnl_engine_destroy(eng);
}

int cpu_bf16_native(const char **isa)
{
    pthread_once(&probe_once, probe);
    int staging = test_f32 && probe_level == 0;
    if (isa)
        *isa = staging ? "f32 staging (test)" : probe_isa;
    return staging ? 1 : probe_level;
}

void cpu_bf16_test_f32(int on)
{
    test_f32 = on;
}

dnnl_data_type_t cpu_bf16_type(void)
{
    return cpu_bf16_native(NULL) > 0 && probe_level == 0 ? dnnl_f32 : dnnl_bf16;
}

void *cpu_bf16_buf(bk_ctx_t *g, int which, size_t bytes)
{
    cpu_backend_t *be = (cpu_backend_t *)g->be;
    return cpu_grow(g, &be->b16[which], &be->b16_cap[which], bytes, "bf16 buffer");
}

void cpu_bf16_free(cpu_backend_t *be)
{
    for (int i = 0; i < 2; i++) {
        free(be->b16[i]);
        be->b16[i] = NULL;
        be->b16_cap[i] = 0;
    }
}
