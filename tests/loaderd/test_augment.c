/* Train transforms: pixels bit-exact against torchvision/PIL for fixed
 * parameters (goldens from tests/golden/gen_augment.py), RandomResizedCrop
 * parameter statistics (area and ratio bounds, the fallback), and
 * parameters that depend only on (seed, epoch, id) — not thread or order. */
#include "common/image/augment.h"
#include "common/image/resize.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GOLD "tests/golden/augment/"

static image_t *read_gold(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, GOLD "%s", name);
    return tu_read_pnm(tu_src(path));
}

/* WANT (interleaved) vs GOT (planar). */
static int cmp_planar(const image_t *want, const uint8_t *got, size_t *ndiff)
{
    size_t n = (size_t)want->w * want->h;
    int md = 0;
    *ndiff = 0;
    for (int c = 0; c < want->c; c++)
        for (size_t i = 0; i < n; i++) {
            int d = abs((int)want->px[i * want->c + c] - (int)got[c * n + i]);
            md = d > md ? d : md;
            *ndiff += d != 0;
        }
    return md;
}

typedef struct {
    char src[128], out[128];
    int crop, top, left, h, w, out_h, out_w, flip, rot, channels;
    double angle;
} gold_case_t;

static void run_case(const gold_case_t *k, int line)
{
    image_t *in = read_gold(k->src), *want = read_gold(k->out);
    CHECK(in && want, "manifest line %d: cannot read %s or %s", line, k->src, k->out);
    if (!in || !want) {
        image_destroy(&in);
        image_destroy(&want);
        return;
    }
    augment_t cfg = augment_default(k->channels);
    augment_params_t p = {.crop = k->crop, .top = k->top, .left = k->left, .h = k->h,
                          .w = k->w, .flip = k->flip, .rotate = k->rot, .angle = k->angle};
    size_t n = (size_t)k->channels * k->out_h * k->out_w;
    uint8_t *got = malloc(n);
    char err[256] = "";
    int rc = got ? augment_apply(&cfg, &p, in, got, k->out_h, k->out_w, err, sizeof err) : -1;
    CHECK(rc == 0, "%s: %s", k->out, err);
    CHECK(want->c == k->channels && want->w == k->out_w && want->h == k->out_h,
          "%s: golden shape", k->out);
    if (rc == 0 && want->c == k->channels) {
        size_t nd;
        int md = cmp_planar(want, got, &nd);
        CHECK(md == 0, "%s (crop %d box %dx%d@%d,%d flip %d rot %d angle %.17g): max diff %d, "
              "%zu values differ from PIL", k->out, k->crop, k->w, k->h, k->left, k->top,
              k->flip, k->rot, k->angle, md, nd);
    }
    free(got);
    image_destroy(&in);
    image_destroy(&want);
}

/* Every golden, with the resize's SIMD loops on and off. */
static void test_pil_goldens(void)
{
    for (int simd = 1; simd >= 0; simd--) {
        resize_use_simd(simd);
        FILE *f = fopen(tu_src(GOLD "manifest.txt"), "r");
        CHECK(f != NULL, "augment manifest missing: run tests/golden/gen_augment.py");
        if (!f)
            return;
        gold_case_t k;
        char angle[64];
        int cases = 0;
        while (fscanf(f, "%127s %d %d %d %d %d %d %d %d %d %63s %d %127s", k.src, &k.crop,
                      &k.top, &k.left, &k.h, &k.w, &k.out_h, &k.out_w, &k.flip, &k.rot, angle,
                      &k.channels, k.out) == 13) {
            k.angle = strtod(angle, NULL);
            run_case(&k, ++cases);
        }
        fclose(f);
        CHECK(cases >= 30, "only %d golden cases read", cases);
    }
    resize_use_simd(1);
}

/* Rigorous bounds: w and h are sqrt(area * aspect) and sqrt(area / aspect)
 * rounded, so (w +- 0.5)(h +- 0.5) brackets the drawn area and
 * (w +- 0.5) / (h -+ 0.5) the drawn aspect. */
static int box_ok(const augment_params_t *p, int sw, int sh, const double scale[2],
                  const double ratio[2])
{
    if (p->top < 0 || p->left < 0 || p->h < 1 || p->w < 1 || p->top + p->h > sh ||
        p->left + p->w > sw)
        return 0;
    if (p->attempts > 10)
        return 1; /* fallback: checked separately */
    double area = (double)sw * sh, w = p->w, h = p->h;
    return (w + 0.5) * (h + 0.5) >= scale[0] * area && (w - 0.5) * (h - 0.5) <= scale[1] * area &&
           (w + 0.5) / (h - 0.5 > 0 ? h - 0.5 : 1e-9) >= ratio[0] &&
           (w - 0.5) / (h + 0.5) <= ratio[1];
}

static void test_crop_statistics(void)
{
    const augment_t cfg = augment_default(3);
    const int sizes[][2] = {{4000, 3000}, {224, 224}, {28, 28}, {1000, 100}, {100, 1000},
                            {1, 1}, {7, 300}};
    const int draws = 20000;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int sw = sizes[s][0], sh = sizes[s][1], bad = 0, fallback = 0, small_first = 0;
        double log_ratio_sum = 0;
        for (int i = 0; i < draws; i++) {
            augment_params_t p = augment_draw(&cfg, 2024, 3, (uint64_t)i, sw, sh);
            bad += !p.crop || !box_ok(&p, sw, sh, cfg.scale, cfg.ratio);
            fallback += p.attempts == 11;
            if (p.attempts == 1 && (double)p.w * p.h < 0.3 * sw * sh) {
                /* never rejected, so the aspect is the raw log-uniform draw
                 * (rejections of large areas favour wide boxes) */
                small_first++;
                log_ratio_sum += log((double)p.w / p.h);
            }
        }
        CHECK(bad == 0, "%dx%d: %d of %d crop boxes out of bounds", sw, sh, bad, draws);
        if (sw == 4000) {
            /* a 4:3 image never rejects areas below 0.3: the first attempt
             * lands there with probability (0.3 - 0.08) / 0.92 = 0.2391 */
            double f = (double)small_first / draws;
            CHECK(fabs(f - 0.2391) < 0.015, "4000x3000: first-try areas < 0.3: %.4f, want "
                  "0.2391", f);
            CHECK(fallback == 0, "4000x3000: %d fallbacks", fallback);
            double m = log_ratio_sum / (small_first ? small_first : 1);
            CHECK(fabs(m) < 0.01, "4000x3000: mean log aspect %.4f, want ~0", m);
        }
        if (sw == 1000 || sw == 100)
            CHECK(fallback > 0 && fallback < draws, "%dx%d: fallback %d of %d (want both paths)",
                  sw, sh, fallback, draws);
        /* 7x300: a box of ratio >= 3/4 and width <= 7 is below 8% of the
         * area, so every draw falls back */
        if (sw == 7)
            CHECK(fallback == draws, "%dx%d: %d fallbacks of %d", sw, sh, fallback, draws);
    }
    /* always the fallback: torchvision's clamped-ratio center crop */
    augment_params_t p = augment_draw(&cfg, 1, 0, 5, 2000, 20);
    CHECK(p.attempts == 11 && p.h == 20 && p.w == 27 && p.top == 0 && p.left == 986,
          "2000x20 fallback: %dx%d at (%d, %d) after %d", p.w, p.h, p.left, p.top, p.attempts);
    p = augment_draw(&cfg, 1, 0, 5, 20, 2000);
    CHECK(p.attempts == 11 && p.w == 20 && p.h == 27 && p.left == 0 && p.top == 986,
          "20x2000 fallback: %dx%d at (%d, %d)", p.w, p.h, p.left, p.top);
}

static void test_flip_rotate_draws(void)
{
    augment_t cfg = augment_default(1);
    cfg.crop = 0;
    cfg.rotate = 1;
    cfg.degrees[0] = -30;
    cfg.degrees[1] = 30;
    int flips = 0, bad = 0;
    double sum = 0;
    const int draws = 20000;
    for (int i = 0; i < draws; i++) {
        augment_params_t p = augment_draw(&cfg, 9, 1, (uint64_t)i, 28, 28);
        flips += p.flip;
        bad += p.crop || !p.rotate || !(p.angle >= -30 && p.angle < 30);
        sum += p.angle;
    }
    CHECK(bad == 0, "%d draws with a crop or an angle out of [-30, 30)", bad);
    CHECK(abs(flips - draws / 2) < 400, "%d flips in %d draws (p 0.5)", flips, draws);
    CHECK(fabs(sum / draws) < 0.5, "mean angle %.3f, want ~0", sum / draws);
    cfg.flip_p = 0;
    cfg.rotate = 0;
    augment_params_t p = augment_draw(&cfg, 9, 1, 3, 28, 28);
    CHECK(!p.flip && !p.rotate && !p.crop, "everything off draws nothing");
}

static int same_params(const augment_params_t *a, const augment_params_t *b)
{
    return a->crop == b->crop && a->top == b->top && a->left == b->left && a->h == b->h &&
           a->w == b->w && a->flip == b->flip && a->rotate == b->rotate && a->angle == b->angle;
}

static void test_seeding(void)
{
    augment_t cfg = augment_default(3);
    cfg.rotate = 1;
    cfg.degrees[0] = -10;
    cfg.degrees[1] = 10;
    augment_params_t a = augment_draw(&cfg, 5, 2, 77, 300, 200);
    augment_params_t b = augment_draw(&cfg, 5, 2, 77, 300, 200);
    CHECK(same_params(&a, &b), "same (seed, epoch, id): same parameters");
    int diff_id = 0, diff_epoch = 0, diff_seed = 0;
    for (uint64_t id = 0; id < 50; id++) {
        augment_params_t x = augment_draw(&cfg, 5, 2, id, 300, 200);
        augment_params_t y = augment_draw(&cfg, 5, 2, id + 1, 300, 200);
        augment_params_t z = augment_draw(&cfg, 5, 3, id, 300, 200);
        augment_params_t u = augment_draw(&cfg, 6, 2, id, 300, 200);
        diff_id += !same_params(&x, &y);
        diff_epoch += !same_params(&x, &z);
        diff_seed += !same_params(&x, &u);
    }
    CHECK(diff_id == 50 && diff_epoch == 50 && diff_seed == 50,
          "parameters change with id (%d/50), epoch (%d/50), seed (%d/50)", diff_id, diff_epoch,
          diff_seed);
}

/* augment_sample on several threads, ids interleaved, equals one thread. */
typedef struct {
    const augment_t *cfg;
    const image_t *src;
    uint8_t *out; /* n x plane */
    int first, step, n, fails;
} job_t;

enum { OUT_H = 24, OUT_W = 20, N_IDS = 24 };

static void *run_job(void *arg)
{
    job_t *j = arg;
    size_t plane = (size_t)3 * OUT_H * OUT_W;
    for (int id = j->first; id < j->n; id += j->step) {
        char err[256];
        if (augment_sample(j->cfg, 11, 4, (uint64_t)id, j->src, j->out + id * plane, OUT_H,
                           OUT_W, err, sizeof err) != 0)
            j->fails++;
    }
    return NULL;
}

static void test_threads_and_order(void)
{
    image_t *src = read_gold("rgb61x47.ppm");
    CHECK(src != NULL, "source image");
    if (!src)
        return;
    augment_t cfg = augment_default(3);
    cfg.rotate = 1;
    cfg.degrees[0] = -20;
    cfg.degrees[1] = 20;
    size_t plane = (size_t)3 * OUT_H * OUT_W;
    uint8_t *one = calloc(N_IDS, plane), *par = calloc(N_IDS, plane);
    CHECK(one && par, "out of memory");
    if (one && par) {
        job_t serial = {&cfg, src, one, 0, 1, N_IDS, 0};
        run_job(&serial);
        job_t jobs[3];
        pthread_t th[3];
        int started = 0;
        for (int t = 0; t < 3; t++) {
            jobs[t] = (job_t){&cfg, src, par, t, 3, N_IDS, 0};
            started += pthread_create(&th[t], NULL, run_job, &jobs[t]) == 0;
        }
        CHECK(started == 3, "pthread_create");
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        CHECK(serial.fails == 0 && jobs[0].fails + jobs[1].fails + jobs[2].fails == 0,
              "augment_sample failed");
        CHECK(!memcmp(one, par, N_IDS * plane), "3 threads give other pixels than 1");
        /* and augment_sample is augment_draw + augment_apply */
        augment_params_t p = augment_draw(&cfg, 11, 4, 5, src->w, src->h);
        uint8_t *again = malloc(plane);
        char err[256] = "";
        CHECK(again && augment_apply(&cfg, &p, src, again, OUT_H, OUT_W, err, sizeof err) == 0,
              "apply: %s", err);
        CHECK(again && !memcmp(again, one + 5 * plane, plane), "sample != draw + apply");
        int distinct = memcmp(one, one + plane, plane) != 0;
        CHECK(distinct, "two ids got identical pixels");
        free(again);
    }
    free(one);
    free(par);
    image_destroy(&src);
}

static void test_errors(void)
{
    image_t *src = image_new(10, 8, 3);
    CHECK(src != NULL, "image_new");
    if (!src)
        return;
    memset(src->px, 100, (size_t)10 * 8 * 3);
    uint8_t out[3 * 8 * 10];
    char err[256] = "";
    augment_t cfg = augment_default(3);
    augment_params_t p = {.crop = 1, .top = 5, .left = 0, .h = 4, .w = 4};
    CHECK(augment_apply(&cfg, &p, src, out, 8, 10, err, sizeof err) == -1 &&
          strstr(err, "not inside"), "crop box past the bottom: %s", err);
    p.crop = 0;
    CHECK(augment_apply(&cfg, &p, src, out, 5, 5, err, sizeof err) == -1 &&
          strstr(err, "output size"), "no crop, other size: %s", err);
    CHECK(augment_apply(&cfg, &p, src, out, 8, 10, err, sizeof err) == 0, "identity: %s", err);
    CHECK(out[0] == 100 && out[3 * 80 - 1] == 100, "identity copies the pixels");
    cfg.channels = 2;
    CHECK(augment_check(&cfg, err, sizeof err) == -1, "2 channels");
    cfg = augment_default(3);
    cfg.scale[0] = 0;
    CHECK(augment_check(&cfg, err, sizeof err) == -1, "scale 0");
    cfg = augment_default(3);
    cfg.ratio[0] = 2;
    CHECK(augment_check(&cfg, err, sizeof err) == -1, "ratio min > max");
    cfg = augment_default(3);
    cfg.flip_p = 1.5;
    CHECK(augment_check(&cfg, err, sizeof err) == -1, "flip p 1.5");
    cfg = augment_default(3);
    cfg.rotate = 1;
    cfg.degrees[0] = NAN;
    CHECK(augment_check(&cfg, err, sizeof err) == -1, "NaN degrees");
    CHECK(augment_sample(&cfg, 0, 0, 0, NULL, out, 8, 10, err, sizeof err) == -1, "no image");
    image_destroy(&src);
}

/* augment_load on an ImageFolder (a JPEG window is decoded, the crop
 * box's part only) equals decoding the whole file + augment_sample; and on
 * a file that is not an image it fails with a reason. */
static void test_load(void)
{
    static const char *files[] = {"base420.jpg", "progressive.jpg", "gray.jpg", "odd420.jpg"};
    char *root = tu_mkdtemp("augment");
    CHECK(root != NULL, "temp dir");
    if (!root)
        return;
    char path[4096], err[256] = "";
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char src[256];
        uint8_t *buf = NULL;
        size_t len = 0;
        snprintf(src, sizeof src, "tests/golden/loader/decode/%s", files[i]);
        CHECK(decode_read_file(tu_src(src), &buf, &len, err, sizeof err) == 0, "%s", err);
        snprintf(path, sizeof path, "%s/c%zu/%s", root, i % 2, files[i]);
        CHECK(buf && tu_write_file(path, buf, len) == 0, "write %s", path);
        free(buf);
    }
    snprintf(path, sizeof path, "%s/c0/broken.jpg", root);
    CHECK(tu_write_file(path, "not a jpeg", 10) == 0, "write %s", path);
    dataset_t *ds = dataset_open(root, err, sizeof err);
    CHECK(ds != NULL, "dataset_open: %s", err);
    augment_t cfg = augment_default(3);
    cfg.rotate = 1;
    cfg.degrees[0] = -15;
    cfg.degrees[1] = 15;
    enum { H = 32, W = 40 };
    uint8_t got[3 * H * W], want[3 * H * W];
    int compared = 0, failed = 0;
    for (uint64_t i = 0; ds && i < dataset_size(ds); i++) {
        snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, i));
        int broken = strstr(path, "broken") != NULL;
        for (uint32_t epoch = 0; epoch < 6; epoch++) {
            int rc = augment_load(ds, i, &cfg, 8, epoch, got, H, W, err, sizeof err);
            if (broken) {
                failed += rc == -1 && err[0];
                continue;
            }
            CHECK(rc == 0, "%s: %s", path, err);
            uint8_t *buf = NULL;
            size_t len = 0;
            int sw, sh;
            image_t *img = decode_read_file(path, &buf, &len, err, sizeof err) == 0
                               ? decode_image(buf, len, NULL, &sw, &sh, err, sizeof err)
                               : NULL;
            free(buf);
            CHECK(img && augment_sample(&cfg, 8, epoch, i, img, want, H, W, err,
                                        sizeof err) == 0, "%s: %s", path, err);
            CHECK(rc == 0 && img && !memcmp(got, want, sizeof got),
                  "%s epoch %u: windowed decode + augment differs from whole decode", path,
                  epoch);
            compared++;
            image_destroy(&img);
        }
    }
    CHECK(compared == 24 && failed == 6, "compared %d loads, %d failures on the broken file",
          compared, failed);
    CHECK(!ds || augment_load(ds, 99, &cfg, 0, 0, got, H, W, err, sizeof err) == -1,
          "id out of range");
    dataset_destroy(&ds);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    test_pil_goldens();
    test_crop_statistics();
    test_flip_rotate_draws();
    test_seeding();
    test_threads_and_order();
    test_errors();
    test_load();
    return tu_finish("augment");
}
