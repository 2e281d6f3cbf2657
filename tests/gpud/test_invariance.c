/* The exactness contract of model.h: a sample's logits are bit-for-bit the
 * same whatever the call's n, the sample's position in it, its neighbours,
 * and the thread count (1 vs 2). Checked on the oneDNN backend for the seed
 * WideResNet at small widths (n = 1, 7, 64) and at its default widths
 * (synthesised weights, n = 1, 7, 24), and resnet18 at 224x224 (n = 1, 7, 17).
 * Then the same in --precision bf16 (the bf16 inference plan, docs/BF16.md:
 * native bf16 primitives where the CPU has them, else fp32 ones rounded
 * after every op), whose logits must also be bf16 values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "gpud/model.h"
#include "synth.h"
#include "tcheck.h"

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

static int g_bf16;   /* --precision bf16 */

static model_t *load(const char *arch, const char *weights, const int *channels, int threads)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = arch, .threads = threads, .bf16 = g_bf16};
    if (channels) {
        memcpy(o.channels, channels, sizeof o.channels);
        o.n_channels = 4;
    }
    if (weights[0] != '/')
        weights = tc_src(weights, path, sizeof path);
    model_t *m = model_new(&o, "cpu", weights, err, sizeof err);
    REQUIRE(m, "model_new(%s): %s", arch, err);
    return m;
}

static uint8_t *images(int n, size_t per, uint32_t seed)
{
    uint8_t *px = malloc((size_t)n * per);
    REQUIRE(px, "alloc");
    for (size_t i = 0; i < (size_t)n * per; i++) {
        seed = seed * 1664525u + 1013904223u;
        px[i] = (uint8_t)(seed >> 24);
    }
    return px;
}

static float *run(model_t *m, const uint8_t *px, int n, int c, int h, int w, int norm)
{
    int nc = model_num_classes(m);
    float *out = malloc((size_t)n * nc * sizeof *out);
    char err[512] = "";
    REQUIRE(out, "alloc");
    int rc = model_forward_u8(m, px, n, c, h, w, norm ? MEAN : NULL, norm ? STD : NULL, out, err,
                              sizeof err);
    REQUIRE(rc == 0, "forward n=%d: %s", n, err);
    /* bf16: the logits are the plan's last op's bf16 output */
    size_t not16 = 0;
    for (size_t i = 0; g_bf16 && i < (size_t)n * nc; i++) {
        uint32_t b;
        memcpy(&b, &out[i], sizeof b);
        not16 += (b & 0xffffu) != 0;
    }
    CHECK(not16 == 0, "bf16: %zu of %zu logits are not bf16 values", not16, (size_t)n * nc);
    return out;
}

/* logits rows of `got` (n rows, starting at sample `first` of the full
 * run) must equal `full` bit for bit. */
static void same_bits(const float *full, const float *got, int first, int n, int nc,
                      const char *what)
{
    size_t off = (size_t)first * nc, cnt = (size_t)n * nc;
    int differ = memcmp(full + off, got, cnt * sizeof *got) != 0;
    CHECK(!differ, "%s: logits differ from the reference run (first %g vs %g)", what,
          (double)full[off], (double)got[0]);
}

/* Reference: all N samples at threads=2. Then subsets, single samples at
 * various positions, and threads=1. */
static void check_model(const char *arch, const char *weights, const int *channels, int c,
                        int h, int w, int big, int norm)
{
    size_t per = (size_t)c * h * w;
    uint8_t *px = images(big, per, 12345u);
    model_t *m2 = load(arch, weights, channels, 2);
    int nc = model_num_classes(m2);
    char prec[64];
    snprintf(prec, sizeof prec, "%s", model_precision(m2));
    float *full = run(m2, px, big, c, h, w, norm);
    char what[96];

    float *seven = run(m2, px, 7, c, h, w, norm);
    snprintf(what, sizeof what, "%s n=7 vs n=%d", arch, big);
    same_bits(full, seven, 0, 7, nc, what);
    free(seven);

    /* single samples: position 0 of their micro-batch instead of j % mb */
    const int singles[] = {0, 5, big - 1};
    for (size_t i = 0; i < sizeof singles / sizeof *singles; i++) {
        int j = singles[i];
        float *one = run(m2, px + (size_t)j * per, 1, c, h, w, norm);
        snprintf(what, sizeof what, "%s sample %d alone vs in n=%d", arch, j, big);
        same_bits(full, one, j, 1, nc, what);
        free(one);
    }

    /* a window starting mid-batch: samples 3..3+8 */
    float *mid = run(m2, px + 3 * per, 8, c, h, w, norm);
    snprintf(what, sizeof what, "%s samples 3..10 vs n=%d", arch, big);
    same_bits(full, mid, 3, 8, nc, what);
    free(mid);
    model_destroy(&m2);

    model_t *m1 = load(arch, weights, channels, 1);
    float *t1 = run(m1, px, big, c, h, w, norm);
    snprintf(what, sizeof what, "%s threads=1 vs threads=2, n=%d", arch, big);
    same_bits(full, t1, 0, big, nc, what);
    free(t1);
    model_destroy(&m1);

    printf("%s %dx%d %s: n=%d, 7, 1 (x3), 8 at offset 3, threads 1 vs 2: bitwise identical%s\n",
           arch, h, w, prec, big,
           tc_failures ? " -- NO" : "");
    free(full);
    free(px);
}

int main(void)
{
    static const int small[4] = {8, 16, 24, 32};
    check_model("wideresnet", "tests/golden/wrn_small.safetensors", small, 1, 28, 28, 64, 0);
    check_model("resnet18", "tests/golden/resnet18.safetensors", NULL, 3, 224, 224, 17, 1);

    char golden[1024], path[256], err[512] = "";
    safetensors_t *io = safetensors_open(tc_src("tests/golden/synth_io.safetensors", golden,
                                                sizeof golden), err, sizeof err);
    REQUIRE(io, "%s", err);
    snprintf(path, sizeof path, "/tmp/ddp_inv_wrn_%d.safetensors", (int)getpid());
    REQUIRE(synth_weights(io, "wideresnet", path, err, sizeof err) == 0, "%s", err);
    safetensors_destroy(&io);
    check_model("wideresnet", path, NULL, 1, 28, 28, 24, 0);
    unlink(path);

    g_bf16 = 1;
    check_model("wideresnet", "tests/golden/wrn_small.safetensors", small, 1, 28, 28, 64, 0);
    check_model("resnet18", "tests/golden/resnet18.safetensors", NULL, 3, 97, 131, 17, 1);
    return tc_done("test_invariance");
}
