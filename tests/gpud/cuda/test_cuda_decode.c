/* gpud_cuda_decode: --decode gpu's decoder (gpud/cuda/cuda_decode.c)
 * against --decode cpu's (common/image's sample_load_buffer, what
 * gpud's wire_decode runs) on one batch of files made here: color JPEGs
 * of 4:2:0 and 4:4:4, larger and smaller than the output, to 3 channels
 * and to 1 (PIL's L); a gray JPEG (nvJPEG's Y plane: on the emulator the
 * fake counts it); a truncated JPEG
 * and a file that is no image (both fail, with the host's reasons); on
 * the emulator also a whole JPEG whose scan is damaged (the fake nvJPEG
 * fails it, so the batched call fails and gpud decodes its images one by
 * one, that one on the host), and a progressive JPEG; then the same
 * files as a training batch (random crops and flips against
 * augment_load_buffer, the live samples packed to the front). The host
 * reads a batch after backend_decode_host (asked for one sample's bytes:
 * the whole batch comes back, as the input path's padding wants). The batch is
 * decoded twice (the buffers reused), then again on the GPU's JPEG
 * engines (DDPIPE_NVJPEG_BACKEND=hardware; the fake has them; a device
 * without them says so).
 *
 * On the kernel emulator (gpud_cuda_decode_emu: DDPIPE_TEST_EMULATED, and
 * DDPIPE_NVJPEG_LIB the fake nvJPEG, tests/gpud/cuemu/fake_nvjpeg.c, which
 * decodes as libjpeg-turbo does) every sample equals cpu's bit for bit, so
 * this checks the whole path but nvJPEG's own IDCT. On a GPU (label gpu,
 * the real nvJPEG) a JPEG's pixels come from nvJPEG: within a few grey
 * levels of cpu's (mean and max bounds below); the others exact; then a
 * "decode bench" line each for the device's decoders and the host's on a
 * batch of 256 500x375 JPEGs. Exits 77 (skipped) without a device. */
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include "common/image/augment.h"
#include "common/image/transform.h"
#include "gpud/backend.h"
#include "gpud/cuda/cuda_backend.h"
#include "../tcheck.h"

#define N 10
#define WHY 256

typedef struct {
    uint8_t *data;
    size_t len;
    int exact;   /* 1: not nvJPEG's pixels on a device (failed) */
} file_t;

/* A w x h JPEG of a smooth colour pattern plus a little noise (what a
 * photo's blocks hold), subsampling sub (TJSAMP_*; TJSAMP_GRAY: gray). */
static file_t jpeg_flags(int w, int h, int sub, int quality, uint32_t seed, int flags)
{
    int c = sub == TJSAMP_GRAY ? 1 : 3;
    uint8_t *px = malloc((size_t)w * h * c);
    REQUIRE(px, "alloc");
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                seed = seed * 1664525u + 1013904223u;
                int v = (x * (3 + ch) + y * (5 - ch)) % 256 + (int)(seed >> 29) - 4;
                px[((size_t)y * w + x) * c + ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    tjhandle tj = tjInitCompress();
    unsigned char *out = NULL;
    unsigned long len = 0;
    REQUIRE(tj && tjCompress2(tj, px, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &out, &len, sub,
                              quality, flags) == 0, "tjCompress2: %s", tjGetErrorStr2(tj));
    file_t f = {malloc(len), len, 0};
    REQUIRE(f.data, "alloc");
    memcpy(f.data, out, len);
    tjFree(out);
    tjDestroy(tj);
    free(px);
    return f;
}

static file_t jpeg(int w, int h, int sub, int quality, uint32_t seed)
{
    return jpeg_flags(w, h, sub, quality, seed, 0);
}

/* the n files back to back, their sizes in SIZES, their total in *total */
static uint8_t *pack_n(const file_t *f, int n, uint32_t *sizes, size_t *total)
{
    *total = 0;
    for (int i = 0; i < n; i++)
        *total += f[i].len;
    uint8_t *all = malloc(*total), *p = all;
    REQUIRE(all, "alloc");
    for (int i = 0; i < n; i++) {
        memcpy(p, f[i].data, f[i].len);
        p += f[i].len;
        sizes[i] = (uint32_t)f[i].len;
    }
    return all;
}

/* the batch's N files */
static uint8_t *pack(const file_t *f, uint32_t *sizes)
{
    size_t total;
    return pack_n(f, N, sizes, &total);
}

/* the largest difference of N bytes, their sum in *sum */
static int diff(const uint8_t *a, const uint8_t *b, size_t n, long *sum)
{
    int maxd = 0;
    *sum = 0;
    for (size_t k = 0; k < n; k++) {
        int d = abs((int)a[k] - b[k]);
        *sum += d;
        maxd = d > maxd ? d : maxd;
    }
    return maxd;
}

static void run(backend_t *be, file_t *f, int channels, int emulated)
{
    const int H = 56, W = 48;   /* Resize(60) + CenterCrop((56, 48)) */
    uint32_t sizes[N];
    uint8_t *files = pack(f, sizes), failed[N];
    char why[N][WHY];
    size_t per = (size_t)channels * H * W;
    bk_decode_batch_t b = {.files = files, .sizes = sizes, .n = N, .resize = 60, .crop_h = H,
                           .crop_w = W, .channels = channels, .h = H, .w = W, .threads = 2,
                           .failed = failed, .why = why[0], .why_len = WHY};
    transform_t t = {.resize = 60, .crop_h = H, .crop_w = W, .channels = channels};
    uint8_t *want = malloc(per);
    REQUIRE(want, "alloc");
    for (int round = 0; round < 2; round++) {   /* the second reuses every buffer */
        char err[512] = "";
        const uint8_t *out = NULL;
        int nfailed = backend_decode(be, &b, &out, err, sizeof err);
        REQUIRE(nfailed >= 0 && out, "backend_decode: %s", err);
        /* the batch stays on the device until the host asks for it */
        REQUIRE(backend_decode_host(be, out + per, per, err, sizeof err) == 0,
                "backend_decode_host: %s", err);
        CHECK(nfailed >= 2, "%d samples failed, want 2 or more (the truncated file, the text)",
              nfailed);
        for (int i = 0; i < N; i++) {
            char cwhy[WHY] = "";
            int cfail = sample_load_buffer(f[i].data, f[i].len, &t, want, H, W, cwhy,
                                           sizeof cwhy) != 0;
            CHECK(failed[i] == cfail, "sample %d: failed %d on the device, %d on the host", i,
                  failed[i], cfail);
            if (cfail) {
                CHECK(strstr(why[i], cwhy) != NULL, "sample %d: reason '%s', the host's '%s'",
                      i, why[i], cwhy);
                for (size_t k = 0; k < per; k++)
                    CHECK(out[(size_t)i * per + k] == 0, "failed sample %d: pixel %zu not 0", i,
                          k);
                continue;
            }
            long sum;
            int maxd = diff(out + (size_t)i * per, want, per, &sum);
            double mean = (double)sum / per;
            if (emulated || f[i].exact)
                CHECK(maxd == 0, "sample %d (%d channels): max diff %d from --decode cpu's", i,
                      channels, maxd);
            else   /* nvJPEG's IDCT and upsampling against libjpeg-turbo's */
                CHECK(mean <= 1.5 && maxd <= 24, "sample %d (%d channels): mean diff %.2f, max "
                      "%d from --decode cpu's", i, channels, mean, maxd);
            if (round == 0)
                printf("sample %d, %d channels: mean diff %.3f, max %d from --decode cpu's\n", i,
                       channels, mean, maxd);
        }
    }
    free(want);
    free(files);
}

/* A training batch: each sample RandomResizedCrop's box of its image
 * (augment_draw from its size) resized to the sample, flipped as drawn,
 * the live samples packed to the front: as augment_load_buffer makes them
 * (what --wire jpeg training decodes with on the host). */
typedef struct {
    augment_t aug;
    uint64_t seed;
    uint32_t epoch;
    int h, w;
} train_ctx_t;

static int train_place(void *ctx, int i, int src_w, int src_h, bk_decode_place_t *p, char *why,
                       size_t len)
{
    const train_ctx_t *c = ctx;
    (void)why;
    (void)len;
    augment_params_t a = augment_draw(&c->aug, c->seed, c->epoch, 100u + (uint64_t)i, src_w,
                                      src_h);
    *p = (bk_decode_place_t){.x = a.left, .y = a.top, .w = a.w, .h = a.h, .rw = c->w,
                             .rh = c->h, .flip = a.flip};
    return 0;
}

static void run_train(backend_t *be, file_t *f, int channels, int emulated)
{
    const int H = 40, W = 32;
    train_ctx_t c = {augment_default(channels), 7, 3, H, W};
    uint32_t sizes[N];
    uint8_t *files = pack(f, sizes), failed[N];
    char why[N][WHY];
    size_t per = (size_t)channels * H * W;
    bk_decode_batch_t b = {.files = files, .sizes = sizes, .n = N, .channels = channels,
                           .h = H, .w = W, .threads = 2, .place = train_place, .place_ctx = &c,
                           .compact = 1, .failed = failed, .why = why[0], .why_len = WHY};
    transform_t t = {.channels = channels};
    uint8_t *want = malloc(per);
    REQUIRE(want, "alloc");
    char err[512] = "";
    const uint8_t *out = NULL;
    int nfailed = backend_decode(be, &b, &out, err, sizeof err);
    REQUIRE(nfailed >= 0 && out && backend_decode_host(be, out, per * N, err, sizeof err) == 0,
            "backend_decode (training): %s", err);
    int slot = 0, flips = 0;
    for (int i = 0; i < N; i++) {
        char cwhy[WHY] = "";
        int cfail = augment_load_buffer(f[i].data, f[i].len, &c.aug, &t, c.seed, c.epoch,
                                        100u + (uint64_t)i, want, H, W, cwhy, sizeof cwhy) != 0;
        CHECK(failed[i] == cfail, "training sample %d: failed %d on the device, %d on the host",
              i, failed[i], cfail);
        if (cfail)
            continue;
        flips += augment_draw(&c.aug, c.seed, c.epoch, 100u + (uint64_t)i, 1, 1).flip;
        const uint8_t *got = out + (size_t)slot++ * per;   /* packed: the live ones in order */
        long sum;
        int maxd = diff(got, want, per, &sum);
        CHECK(emulated || f[i].exact ? maxd == 0 : maxd <= 24,
              "training sample %d (%d channels, slot %d): max diff %d from the host's", i,
              channels, slot - 1, maxd);
    }
    for (size_t k = (size_t)slot * per; k < (size_t)N * per; k++)
        CHECK(out[k] == 0, "after the %d live samples: byte %zu not 0", slot, k);
    CHECK(flips > 0 && flips < slot, "the draws flipped %d of %d samples", flips, slot);
    printf("training batch, %d channels: %d samples packed, %d flipped, each as the host "
           "makes it\n", channels, slot, flips);
    free(want);
    free(files);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* On a device: a batch of 256 500x375 4:2:0 JPEGs (q90) to 224x224 through
 * Resize(256) + CenterCrop(224), the device's decoder against the host's
 * (sample_load_buffer on every core, --decode cpu's work without DCT
 * scaling): one line each, what --decode gpu can give at most. */
static void bench(backend_t *be, const char *what)
{
    enum { B = 256, H = 224, W = 224, REPS = 5 };
    file_t *f = malloc(B * sizeof *f);
    uint32_t *sizes = malloc(B * sizeof *sizes);
    uint8_t *failed = malloc(B), *px = malloc((size_t)B * 3 * H * W);
    char (*why)[WHY] = malloc(B * sizeof *why);
    REQUIRE(f && sizes && failed && px && why, "alloc");
    for (int i = 0; i < B; i++)
        f[i] = jpeg(500, 375, TJSAMP_420, 90, 1000u + (uint32_t)i);
    size_t total;
    uint8_t *files = pack_n(f, B, sizes, &total);
    bk_decode_batch_t b = {.files = files, .sizes = sizes, .n = B, .resize = 256, .crop_h = H,
                           .crop_w = W, .channels = 3, .h = H, .w = W, .threads = 1,
                           .failed = failed, .why = why[0], .why_len = WHY};
    char err[512];
    const uint8_t *out;
    double best = 1e30;
    for (int r = 0; r <= REPS; r++) {   /* the first warms nvJPEG's buffers up */
        double t0 = now_s();
        int nf = backend_decode(be, &b, &out, err, sizeof err);
        double dt = now_s() - t0;
        CHECK(nf == 0, "bench batch: %d failed (%s)", nf, nf < 0 ? err : why[0]);
        if (r > 0 && dt < best)
            best = dt;
    }
    printf("decode bench: %s: %d 500x375 JPEGs (%.1f KB each) to 224x224 in %.2f ms a batch, "
           "%.0f img/s\n", what, B, (double)total / B / 1e3, 1e3 * best, B / best);
    if (strstr(what, "hardware") == NULL) {   /* the host's, once */
        transform_t t = {.resize = 256, .crop_h = H, .crop_w = W, .channels = 3};
        double t0 = now_s();
        int bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : bad)
        for (int i = 0; i < B; i++) {
            char e[WHY];
            bad += sample_load_buffer(f[i].data, f[i].len, &t, px + (size_t)i * 3 * H * W, H, W,
                                      e, sizeof e) != 0;
        }
        double dt = now_s() - t0;
        CHECK(bad == 0, "the host's decode failed %d", bad);
        printf("decode bench: the host (sample_load_buffer, %d threads): %.0f img/s\n",
               omp_get_max_threads(), B / dt);
    }
    for (int i = 0; i < B; i++)
        free(f[i].data);
    free(f);
    free(files);
    free(sizes);
    free(failed);
    free(px);
    free(why);
}

int main(void)
{
    int emulated = getenv("DDPIPE_TEST_EMULATED") != NULL;
    if (cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    char err[512] = "";
    backend_t *be = backend_new("cuda", 1, err, sizeof err);
    REQUIRE(be, "backend_new(cuda): %s", err);
    if (backend_decode_ready(be, err, sizeof err) != 0) {
        printf("--decode gpu not available here: %s\n", err);
        backend_destroy(&be);
        return emulated ? 1 : 77;   /* the emulator's build always has the fake */
    }
    file_t f[N] = {
        jpeg(120, 90, TJSAMP_420, 90, 1),   /* down, 4:2:0 */
        jpeg(73, 101, TJSAMP_444, 95, 2),   /* down, portrait, odd sizes */
        jpeg(40, 30, TJSAMP_420, 85, 3),    /* up */
        jpeg(64, 64, TJSAMP_GRAY, 90, 4),   /* gray: nvJPEG's Y plane */
        jpeg(200, 150, TJSAMP_422, 80, 5),
        jpeg(96, 80, TJSAMP_420, 90, 6),    /* truncated below */
        {NULL, 0, 1},                       /* not an image, below */
        jpeg(60, 60, TJSAMP_444, 90, 7),    /* Resize(60): one axis unchanged */
        jpeg(90, 70, TJSAMP_420, 90, 8),    /* damaged below (emulator) */
        jpeg_flags(88, 66, TJSAMP_420, 90, 9, TJFLAG_PROGRESSIVE),   /* not the engines' */
    };
    if (emulated)   /* a run of marker bytes inside the scan: libjpeg-turbo warns */
        memset(f[8].data + f[8].len / 2, 0xFF, 24);
    f[8].exact = 1;
    f[5].len /= 2;
    f[5].exact = 1;
    static const char text[] = "this is not an image file";
    f[6].data = malloc(sizeof text);
    REQUIRE(f[6].data, "alloc");
    memcpy(f[6].data, text, sizeof text);
    f[6].len = sizeof text;
    run(be, f, 3, emulated);
    run(be, f, 1, emulated);
    run_train(be, f, 3, emulated);
    run_train(be, f, 1, emulated);
    if (emulated) {   /* the gray file went to nvJPEG (its Y output), not to the host */
        void *lib = dlopen(getenv("DDPIPE_NVJPEG_LIB"), RTLD_NOW | RTLD_NOLOAD);
        const unsigned long *ny = lib ? dlsym(lib, "fake_nvjpeg_y_images") : NULL;
        CHECK(ny && *ny >= 4, "the gray JPEG was decoded by nvJPEG %lu times of 4 batches",
              ny ? *ny : 0);
    }
    if (!emulated)
        bench(be, "nvJPEG's CUDA decoder");
    backend_destroy(&be);
    /* the same on the GPU's JPEG engines (DDPIPE_NVJPEG_BACKEND=hardware),
     * where the device has them: the progressive file goes to the host */
    setenv("DDPIPE_NVJPEG_BACKEND", "hardware", 1);
    be = backend_new("cuda", 1, err, sizeof err);
    REQUIRE(be, "backend_new(cuda): %s", err);
    if (backend_decode_ready(be, err, sizeof err) == 0) {
        run(be, f, 3, emulated);
        run(be, f, 1, emulated);
        if (!emulated)
            bench(be, "the GPU's JPEG engines (hardware)");
    } else {
        CHECK(!emulated, "the emulator's fake has the engines: %s", err);
        printf("DDPIPE_NVJPEG_BACKEND=hardware: not here (%s)\n", err);
    }
    for (int i = 0; i < N; i++)
        free(f[i].data);
    backend_destroy(&be);
    return tc_done("test_cuda_decode");
}
