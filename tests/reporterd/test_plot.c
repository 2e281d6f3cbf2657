/* plots: nice ticks, and PNG/SVG files that are valid and of sensible size
 * for many points, a single point and no data. The PNGs are left in the
 * output directory for a human to look at. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "reporterd/plot.h"

static const char *s_dir;

static void test_nice(void)
{
    int d;
    CHECK(plot_nice_step(0, 1, 6, &d) == 0.2 && d == 1);
    CHECK(plot_nice_step(0, 97, 6, &d) == 20 && d == 0);
    CHECK(fabs(plot_nice_step(0.912, 0.934, 6, &d) - 0.01) < 1e-15 && d == 2);
    CHECK(plot_nice_step(1, 10, 8, &d) == 1 && d == 0);
    CHECK(plot_nice_step(0, 12345, 6, &d) == 5000);
    CHECK(plot_nice_step(5, 5, 6, &d) > 0); /* degenerate: no division by zero */
}

static uint32_t s_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A PNG with the right signature, IHDR size and an IEND; size in bytes. */
static size_t s_check_png(const char *path, uint32_t w, uint32_t h)
{
    size_t len = 0;
    char *data = check_slurp(path, &len);
    const unsigned char *p = (const unsigned char *)data;
    CHECK(data && len > 33);
    if (data && len > 33) {
        CHECK(memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0);
        CHECK(memcmp(p + 12, "IHDR", 4) == 0);
        CHECK(s_be32(p + 16) == w && s_be32(p + 20) == h);
        CHECK(memcmp(p + len - 8, "IEND", 4) == 0);
    }
    free(data);
    return len;
}

static size_t s_check_svg(const char *path)
{
    size_t len = 0;
    char *data = check_slurp(path, &len);
    CHECK(data && strncmp(data, "<?xml", 5) == 0 && strstr(data, "<svg") &&
          strstr(data, "</svg>"));
    free(data);
    return len;
}

static void s_write(plot_t *p, const char *name, size_t min_png, size_t min_svg)
{
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/%s.png", s_dir, name);
    CHECK(plot_write_png(p, path, 800, 500, why, sizeof why) == 0);
    size_t png = s_check_png(path, 800, 500);
    CHECK(png > min_png && png < 500000);
    snprintf(path, sizeof path, "%s/%s.svg", s_dir, name);
    CHECK(plot_write_svg(p, path, 800, 500, why, sizeof why) == 0);
    size_t svg = s_check_svg(path);
    CHECK(svg > min_svg && svg < 2000000);
    printf("%s: png %zu bytes, svg %zu bytes\n", name, png, svg);
}

static void test_files(void)
{
    double ep[12], tr[12], va[12], t1[12], t5[12];
    for (int i = 0; i < 12; i++) {
        ep[i] = i + 1;
        tr[i] = 2.3 * exp(-0.25 * i) + 0.12;
        va[i] = 2.2 * exp(-0.22 * i) + 0.25 + (i == 7 ? 0.05 : 0.0);
        t1[i] = 0.92 - 0.6 * exp(-0.4 * i);
        t5[i] = 0.995 - 0.3 * exp(-0.6 * i);
    }
    plot_t *p = plot_new("Loss", "epoch", "cross-entropy loss");
    CHECK(p && plot_add_series(p, "train", ep, tr, 12) == 0);
    CHECK(plot_add_series(p, "val", ep, va, 12) == 0);
    plot_set_integer_x(p, true);
    s_write(p, "loss", 15000, 5000);
    plot_destroy(&p);
    CHECK(p == NULL);

    p = plot_new("Accuracy (val)", "epoch", "accuracy");
    CHECK(plot_add_series(p, "top-1", ep, t1, 12) == 0 && plot_add_series(p, "top-5", ep, t5, 12) == 0);
    plot_set_integer_x(p, true);
    plot_set_y_from_zero(p, true);
    s_write(p, "accuracy", 15000, 5000);
    plot_destroy(&p);

    /* one eval epoch: a single point per series */
    double e0 = 0, acc1 = 0.9134, acc5 = 0.9981, ips = 1234.5;
    p = plot_new("Accuracy (eval)", "epoch", "accuracy");
    CHECK(plot_add_series(p, "top-1", &e0, &acc1, 1) == 0 && plot_add_series(p, "top-5", &e0, &acc5, 1) == 0);
    plot_set_integer_x(p, true);
    s_write(p, "single_accuracy", 8000, 3000);
    plot_destroy(&p);
    p = plot_new("Throughput", "epoch", "images/s");
    CHECK(plot_add_series(p, "eval", &e0, &ips, 1) == 0);
    plot_set_integer_x(p, true);
    plot_set_y_from_zero(p, true);
    s_write(p, "single_throughput", 8000, 3000);
    plot_destroy(&p);

    /* nothing to show (and a NaN that must be skipped): still a valid file */
    double nan = NAN;
    p = plot_new("Loss", "epoch", "loss");
    CHECK(plot_add_series(p, "val", &e0, &nan, 1) == 0);
    s_write(p, "empty", 4000, 1000);
    char err[512];
    CHECK(plot_write_png(p, "/nonexistent-dir/x.png", 800, 500, err, sizeof err) == -1);
    CHECK(plot_write_svg(p, "/nonexistent-dir/x.svg", 800, 500, err, sizeof err) == -1);
    CHECK(plot_write_png(p, "x.png", 5, 5, err, sizeof err) == -1);
    for (int i = 1; i < PLOT_MAX_SERIES; i++)
        CHECK(plot_add_series(p, "more", &e0, &e0, 1) == 0);
    CHECK(plot_add_series(p, "too many", &e0, &e0, 1) == -1);
    plot_destroy(&p);
}

int main(int argc, char **argv)
{
    s_dir = argc > 1 ? argv[1] : "plot.out";
    mkdir(s_dir, 0777);
    test_nice();
    test_files();
    plot_shutdown();
    return check_done("test_plot");
}
