/* The graph engine's compile step (backend.h, bk_tgraph_compile):
 *   - a description graph (bk_tgraph_new(NULL)) checks shapes as a graph
 *     with a backend does and refuses to run;
 *   - builders after the compile step fail. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "tcheck.h"

/* ------------------------------------------------------------ parameters */

#define MAX_PARAMS 256

/* Every parameter array of a test network, random and kept for its life. */
typedef struct {
    float *p[MAX_PARAMS];
    int n;
    uint64_t seed;
} params_t;

static float uniform(params_t *ps)
{
    ps->seed = ps->seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((ps->seed >> 40) / 16777216.0);
}

/* n values in lo + (hi - lo) * U(0, 1). */
static float *param(params_t *ps, size_t n, float lo, float hi)
{
    REQUIRE(ps->n < MAX_PARAMS, "too many parameters");
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * uniform(ps);
    ps->p[ps->n++] = v;
    return v;
}

static void params_free(params_t *ps)
{
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i]);
    ps->n = 0;
}

/* Conv of k x k, He-uniform weights, bias if has_bias. */
static bk_tvar_t *conv(bk_tgraph_t *g, params_t *ps, bk_tvar_t *x, int oc, int k, int stride,
                       int pad, int has_bias)
{
    int n, c, h, w;
    if (!x)
        return NULL;
    bk_tvar_dims(x, &n, &c, &h, &w);
    float a = sqrtf(6.0f / (float)(c * k * k));
    bk_tconv_t p = {.ic = c, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                    .stride_w = stride, .pad_h = pad, .pad_w = pad,
                    .weight = param(ps, (size_t)oc * c * k * k, -a, a),
                    .bias = has_bias ? param(ps, (size_t)oc, -0.1f, 0.1f) : NULL};
    return bk_t_conv2d(g, x, &p);
}

/* ------------------------------------------------------------ description */

static void description_graph(void)
{
    params_t ps = {.seed = 1};
    bk_tgraph_t *g = bk_tgraph_new(NULL);
    REQUIRE(g, "bk_tgraph_new(NULL)");
    bk_tgraph_set_name(g, "input");
    bk_tvar_t *x = bk_t_input(g, 2, 3, 8, 8, 0);
    bk_tgraph_set_name(g, "conv1");
    bk_tvar_t *y = conv(g, &ps, x, 8, 3, 1, 1, 0);
    CHECK(y && !bk_tgraph_error(g), "description graph: conv: %s", bk_tgraph_error(g));
    int n, c, h, w;
    if (y) {
        bk_tvar_dims(y, &n, &c, &h, &w);
        CHECK(n == 2 && c == 8 && h == 8 && w == 8, "conv output [%d,%d,%d,%d]", n, c, h, w);
    }
    float out[2 * 8 * 8 * 8];
    CHECK(bk_t_forward(g) < 0 && bk_tgraph_error(g) &&
          strstr(bk_tgraph_error(g), "description graph"),
          "forward of a description graph: %s", bk_tgraph_error(g));
    CHECK(bk_t_read(g, y, out) < 0, "read of a description graph");
    bk_tgraph_destroy(&g);

    /* shape checks with the messages of a graph with a backend */
    g = bk_tgraph_new(NULL);
    x = bk_t_input(g, 2, 3, 8, 8, 0);
    bk_tgraph_set_name(g, "conv1");
    bk_tconv_t bad = {.ic = 4, .oc = 8, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
                      .weight = param(&ps, 8 * 4 * 9, -1, 1)};
    CHECK(!bk_t_conv2d(g, x, &bad) && bk_tgraph_error(g) &&
          strstr(bk_tgraph_error(g), "conv1: bad conv: ic 4 (input has 3)"),
          "shape check: %s", bk_tgraph_error(g));
    bk_tgraph_destroy(&g);
    params_free(&ps);
}

/* ---------------------------------------------------------------- compile */

static void build_after_compile(backend_t *be)
{
    params_t ps = {.seed = 2};
    bk_tgraph_t *g = bk_tgraph_new(be);
    bk_tvar_t *x = bk_t_input(g, 1, 3, 4, 4, 0);
    bk_tvar_t *y = conv(g, &ps, x, 4, 3, 1, 1, 1);
    CHECK(bk_tgraph_compile(g) == 0, "%s: compile: %s", backend_name(be), bk_tgraph_error(g));
    CHECK(!bk_t_relu(g, y) && bk_tgraph_error(g) &&
          strstr(bk_tgraph_error(g), "after the graph was compiled"),
          "%s: builder after compile: %s", backend_name(be), bk_tgraph_error(g));
    bk_tgraph_destroy(&g);
    params_free(&ps);
}

int main(void)
{
    description_graph();
    const char *names[2] = {"cpu", "ref"};
    for (int i = 0; i < 2; i++) {
        char err[256];
        backend_t *be = backend_new(names[i], 2, err, sizeof err);
        REQUIRE(be, "backend %s: %s", names[i], err);
        build_after_compile(be);
        backend_destroy(&be);
    }
    return tc_done("test_graph_plan");
}
