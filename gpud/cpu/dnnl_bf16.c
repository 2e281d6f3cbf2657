/* dnnl_bf16 — what the cpu backend's native bf16 (BK_BF16_NATIVE,
 * docs/BF16.md "Native") needs besides its kernels: the probe that says
 * whether oneDNN 2.6 makes bf16 convolutions and inner products on this
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

static void md(dnnl_memory_desc_t *m, int nd, const dnnl_dim_t *dims, dnnl_data_type_t dt,
               dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {0};
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_init_by_tag(m, nd, d, dt, tag);
}

/* One primitive descriptor of op desc d; 1 when oneDNN has a non-reference
 * implementation (a "ref:" one exists on avx512_core for every shape but
 * is far slower than the fp32 kernels: no native path then). */
static int pd_ok(dnnl_engine_t eng, dnnl_primitive_attr_t a, const_dnnl_op_desc_t d,
                 const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *out, const char *what)
{
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_primitive_desc_create(&pd, d, a, eng, hint) != dnnl_success) {
        log_info("bf16 probe: no oneDNN bf16 %s on this CPU (native bf16 off)", what);
        return 0;
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    int ok = impl && strncmp(impl, "ref", 3) != 0;
    if (ok)
        log_debug("bf16 probe: %s: %s", what, impl);
    else
        log_info("bf16 probe: oneDNN's bf16 %s is %s (native bf16 off)", what,
                 impl ? impl : "unnamed");
    if (ok && out)
        *out = pd;
    else
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* A 3x3 convolution and an inner product, each forward, backward data and
 * backward weights, with the types the native plans use (dnnl_train.c):
 * bf16 src, weights and diff_dst; f32 dst, bias, diff_src, diff_weights. */
static int probe_prims(dnnl_engine_t eng, dnnl_primitive_attr_t a)
{
    const dnnl_dim_t x[4] = {2, 32, 7, 7}, w[4] = {32, 32, 3, 3}, b[1] = {32};
    const dnnl_dim_t x2[2] = {2, 64}, w2[2] = {16, 64}, y2[2] = {2, 16}, b2[1] = {16};
    dnnl_memory_desc_t s16, d32, d16, s32, wany, wany32, bias;
    md(&s16, 4, x, dnnl_bf16, dnnl_acdb);
    md(&s32, 4, x, dnnl_f32, dnnl_acdb);
    md(&d32, 4, x, dnnl_f32, dnnl_acdb);
    md(&d16, 4, x, dnnl_bf16, dnnl_acdb);
    md(&wany, 4, w, dnnl_bf16, dnnl_format_tag_any);
    md(&wany32, 4, w, dnnl_f32, dnnl_format_tag_any);
    md(&bias, 1, b, dnnl_f32, dnnl_x);
    dnnl_dims_t st = {1, 1}, pad = {1, 1};
    dnnl_convolution_desc_t cf, cd, cw;
    dnnl_primitive_desc_t fpd = NULL;
    int ok = dnnl_convolution_forward_desc_init(&cf, dnnl_forward_training,
                                                dnnl_convolution_direct, &s16, &wany, &bias,
                                                &d32, st, pad, pad) == dnnl_success &&
             dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &s32, &wany,
                                                      &d16, st, pad, pad) == dnnl_success &&
             dnnl_convolution_backward_weights_desc_init(&cw, dnnl_convolution_direct, &s16,
                                                         &wany32, &bias, &d16, st, pad,
                                                         pad) == dnnl_success &&
             pd_ok(eng, a, &cf, NULL, &fpd, "convolution forward") &&
             pd_ok(eng, a, &cd, fpd, NULL, "convolution backward data") &&
             pd_ok(eng, a, &cw, fpd, NULL, "convolution backward weights");
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    fpd = NULL;
    dnnl_memory_desc_t is16, is32, iw, iw32, iy32, iy16, ib;
    md(&is16, 2, x2, dnnl_bf16, dnnl_ab);
    md(&is32, 2, x2, dnnl_f32, dnnl_ab);
    md(&iw, 2, w2, dnnl_bf16, dnnl_format_tag_any);
    md(&iw32, 2, w2, dnnl_f32, dnnl_format_tag_any);
    md(&iy32, 2, y2, dnnl_f32, dnnl_ab);
    md(&iy16, 2, y2, dnnl_bf16, dnnl_ab);
    md(&ib, 1, b2, dnnl_f32, dnnl_x);
    dnnl_inner_product_desc_t f, d, wd;
    ok = ok &&
         dnnl_inner_product_forward_desc_init(&f, dnnl_forward_training, &is16, &iw, &ib,
                                              &iy32) == dnnl_success &&
         dnnl_inner_product_backward_data_desc_init(&d, &is32, &iw, &iy16) == dnnl_success &&
         dnnl_inner_product_backward_weights_desc_init(&wd, &is16, &iw32, &ib, &iy16) ==
             dnnl_success &&
         pd_ok(eng, a, &f, NULL, &fpd, "inner product forward") &&
         pd_ok(eng, a, &d, fpd, NULL, "inner product backward data") &&
         pd_ok(eng, a, &wd, fpd, NULL, "inner product backward weights");
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    return ok;
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
        probe_level = (isa & bf) == bf ? 2 : 1;
        probe_isa = (isa & amx) == amx ? "amx"
                    : probe_level == 2 ? "avx512_bf16"
                                       : "avx512_core, no bf16 instructions";
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
    if (bytes > be->b16_cap[which]) {
        void *buf = NULL;
        if (posix_memalign(&buf, 64, bytes) != 0)
            return bk_ctx_fail(g, "out of memory for a %zu-byte bf16 buffer", bytes);
        free(be->b16[which]);
        be->b16[which] = buf;
        be->b16_cap[which] = bytes;
    }
    return be->b16[which];
}

void cpu_bf16_free(cpu_backend_t *be)
{
    for (int i = 0; i < 2; i++) {
        free(be->b16[i]);
        be->b16[i] = NULL;
        be->b16_cap[i] = 0;
    }
}
