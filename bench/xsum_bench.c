/* xsum_bench: the cost of exact sums (common/xsum.h, issue 31) on a
 * ResNet-18-sized gradient (11,689,512 floats, one segment): ns per element
 * of xsum_add_f32 (one chunk's gradient into the step's sum), of
 * xsum_get_f32 (once per step), and of the float add it replaces.
 *
 *   xsum_bench [elements] [repetitions]
 */
#include "common/xsum.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);   /* CPU time: the 2-core box is shared */
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t s_rng = 42;

static double unit(void)   /* (0, 1) */
{
    s_rng ^= s_rng << 13, s_rng ^= s_rng >> 7, s_rng ^= s_rng << 17;
    return ((double)(s_rng >> 11) + 0.5) / 9007199254740992.0;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 11689512;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    float *g = malloc(n * sizeof *g), *acc = calloc(n, sizeof *acc), *out = malloc(n * sizeof *out);
    xsum_t *x = xsum_new(&n, 1);
    if (!g || !acc || !out || !x || reps < 1) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    /* gradient-like: normal, scale 1e-3, a few zeros (ReLU'd units) */
    for (size_t i = 0; i < n; i++) {
        double z = sqrt(-2 * log(unit())) * cos(6.283185307179586 * unit());
        g[i] = i % 17 == 0 ? 0.0f : (float)(1e-3 * z);
    }
    xsum_add_f32(x, 0, g);   /* warm: pages touched, the top set */
    double t0 = now();
    for (int r = 0; r < reps; r++)
        xsum_add_f32(x, 0, g);
    double t_add = (now() - t0) / reps;
    t0 = now();
    for (int r = 0; r < reps; r++)
        xsum_get_f32(x, 0, out);
    double t_get = (now() - t0) / reps;
    for (size_t i = 0; i < n; i++)
        acc[i] += g[i];
    t0 = now();
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++)
            acc[i] += g[i];
    double t_float = (now() - t0) / reps;
    printf("%zu floats, %d repetitions: xsum_add_f32 %.2f ns/element (%.1f ms), xsum_get_f32 "
           "%.2f ns/element (%.1f ms), float += %.2f ns/element (%.1f ms); check %g %g\n",
           n, reps, t_add * 1e9 / (double)n, t_add * 1e3, t_get * 1e9 / (double)n, t_get * 1e3,
           t_float * 1e9 / (double)n, t_float * 1e3, (double)out[1], (double)acc[1]);
    xsum_destroy(&x);
    free(g), free(acc), free(out);
    return 0;
}
