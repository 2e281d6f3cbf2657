/* backend — the generic layer of every implementation: argument checks and
 * shape inference, then dispatch through the backend's ops. Which
 * implementations exist is backend_select.c's; the graph's sticky error is
 * graph_error.c's (the implementations use it too, so it sits below both). */
#include "gpud/backend_impl.h"

void backend_destroy(backend_t **be)
{
    if (!be || !*be)
        return;
    (*be)->ops->destroy(*be);
    *be = NULL;
}

const char *backend_name(const backend_t *be)
{
    return be->ops->name;
}

int backend_threads(const backend_t *be)
{
    return be->threads;
}

bk_prog_t *bk_prog_new(backend_t *be)
{
    return be ? be->ops->graph_new(be) : NULL;
}

void bk_prog_destroy(bk_prog_t **g)
{
    if (!g || !*g)
        return;
    (*g)->be->ops->graph_destroy(*g);
    *g = NULL;
}

void bk_ptensor_dims(const bk_ptensor_t *t, int *n, int *c, int *h, int *w)
{
    *n = t->n;
    *c = t->c;
    *h = t->h;
    *w = t->w;
}

/* A builder may run only on a healthy graph with live arguments. */
static int usable(bk_prog_t *g, const bk_ptensor_t *a, const bk_ptensor_t *b, int need_b)
{
    if (!g || g->failed)
        return 0;
    if (!a || (need_b && !b)) {
        bk_prog_fail(g, "missing input tensor (an earlier step failed?)");
        return 0;
    }
    if (a->consumed || (b && b->consumed)) {
        bk_prog_fail(g, "input tensor was consumed as a residual by an earlier op");
        return 0;
    }
    return 1;
}

bk_ptensor_t *bk_prog_input(bk_prog_t *g, int n, int c, int h, int w)
{
    if (!g || g->failed)
        return NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || (long long)n * c * h * w > (1ll << 31))
        return bk_prog_fail(g, "bad input shape [%d,%d,%d,%d]", n, c, h, w);
    int out[4] = {n, c, h, w};
    bk_ptensor_t *t = g->be->ops->input(g, out);
    if (t)
        t->is_input = 1;
    return t;
}

/* floor((in + 2 pad - k) / stride) + 1, or <= 0 when the window does not fit. */
static int out_size(int in, int k, int stride, int pad)
{
    int span = in + 2 * pad - k;
    return span < 0 ? 0 : span / stride + 1;
}

static int conv_check(bk_prog_t *g, const bk_ptensor_t *x, const bk_pconv_t *p,
                      const bk_ptensor_t *res, int out[4])
{
    if (!p->weight || p->ic != x->c || p->oc < 1 || p->kh < 1 || p->kw < 1 ||
        p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
        p->pad_h >= p->kh || p->pad_w >= p->kw || p->n_post < 0 || p->n_post > BK_MAX_POST) {
        bk_prog_fail(g, "bad conv: ic %d (input has %d), oc %d, kernel %dx%d, stride %dx%d, "
                "pad %dx%d, %d post-ops", p->ic, x->c, p->oc, p->kh, p->kw, p->stride_h,
                p->stride_w, p->pad_h, p->pad_w, p->n_post);
        return -1;
    }
    out[0] = x->n;
    out[1] = p->oc;
    out[2] = out_size(x->h, p->kh, p->stride_h, p->pad_h);
    out[3] = out_size(x->w, p->kw, p->stride_w, p->pad_w);
    if (out[2] < 1 || out[3] < 1) {
        bk_prog_fail(g, "input %dx%d too small for a %dx%d kernel (pad %d)", x->h, x->w, p->kh,
                p->kw, p->pad_h);
        return -1;
    }
    int sums = 0;
    for (int i = 0; i < p->n_post; i++) {
        if (p->post[i] != BK_PO_RELU && p->post[i] != BK_PO_SUM) {
            bk_prog_fail(g, "unknown post-op %d", (int)p->post[i]);
            return -1;
        }
        sums += p->post[i] == BK_PO_SUM;
    }
    if (sums > 1 || (sums == 1) != (res != NULL)) {
        bk_prog_fail(g, "a residual tensor is needed exactly when there is one SUM post-op");
        return -1;
    }
    if (res && (res->n != out[0] || res->c != out[1] || res->h != out[2] || res->w != out[3])) {
        bk_prog_fail(g, "residual [%d,%d,%d,%d] does not match the output [%d,%d,%d,%d]", res->n,
                res->c, res->h, res->w, out[0], out[1], out[2], out[3]);
        return -1;
    }
    if (res && res->is_input) {
        bk_prog_fail(g, "an input tensor cannot be a residual (it is overwritten)");
        return -1;
    }
    return 0;
}

bk_ptensor_t *bk_prog_conv2d(bk_prog_t *g, bk_ptensor_t *x, const bk_pconv_t *p, bk_ptensor_t *residual)
{
    if (!usable(g, x, residual, 0))
        return NULL;
    if (!p)
        return bk_prog_fail(g, "no conv parameters");
    if (residual == x)   /* the sum would overwrite the input while it is read */
        return bk_prog_fail(g, "the residual cannot be the convolution's own input");
    int out[4];
    if (conv_check(g, x, p, residual, out) < 0)
        return NULL;
    bk_ptensor_t *y = g->be->ops->conv2d(g, x, p, residual, out);
    if (y && residual)
        residual->consumed = 1;
    return y;
}

bk_ptensor_t *bk_prog_pool2d(bk_prog_t *g, bk_ptensor_t *x, const bk_pool_t *p)
{
    if (!usable(g, x, NULL, 0))
        return NULL;
    if (!p || p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 ||
        p->pad_w < 0 || 2 * p->pad_h > p->kh || 2 * p->pad_w > p->kw ||
        (unsigned)p->alg > BK_POOL_AVG_EXCLUDE_PAD)
        return bk_prog_fail(g, "bad pooling parameters (pad must be at most half the kernel)");
    int out[4] = {x->n, x->c, out_size(x->h, p->kh, p->stride_h, p->pad_h),
                  out_size(x->w, p->kw, p->stride_w, p->pad_w)};
    if (out[2] < 1 || out[3] < 1)
        return bk_prog_fail(g, "input %dx%d too small for a %dx%d pooling window", x->h, x->w,
                       p->kh, p->kw);
    return g->be->ops->pool2d(g, x, p, out);
}

bk_ptensor_t *bk_prog_global_avg_pool(bk_prog_t *g, bk_ptensor_t *x)
{
    if (!usable(g, x, NULL, 0))
        return NULL;
    bk_pool_t p = {BK_POOL_AVG, x->h, x->w, x->h, x->w, 0, 0};
    return bk_prog_pool2d(g, x, &p);
}

bk_ptensor_t *bk_prog_linear(bk_prog_t *g, bk_ptensor_t *x, int out_features, const float *weight,
                       const float *bias)
{
    if (!usable(g, x, NULL, 0))
        return NULL;
    if (out_features < 1 || !weight)
        return bk_prog_fail(g, "bad linear layer: %d outputs, weight %s", out_features,
                       weight ? "given" : "missing");
    int out[4] = {x->n, out_features, 1, 1};
    return g->be->ops->linear(g, x, weight, bias, out);
}

bk_ptensor_t *bk_prog_relu(bk_prog_t *g, bk_ptensor_t *x)
{
    if (!usable(g, x, NULL, 0))
        return NULL;
    int out[4] = {x->n, x->c, x->h, x->w};
    return g->be->ops->relu(g, x, out);
}

bk_ptensor_t *bk_prog_add(bk_prog_t *g, bk_ptensor_t *a, bk_ptensor_t *b, int relu)
{
    if (!usable(g, a, b, 1))
        return NULL;
    if (a->n != b->n || a->c != b->c || a->h != b->h || a->w != b->w)
        return bk_prog_fail(g, "add of different shapes [%d,%d,%d,%d] and [%d,%d,%d,%d]", a->n,
                       a->c, a->h, a->w, b->n, b->c, b->h, b->w);
    int out[4] = {a->n, a->c, a->h, a->w};
    return g->be->ops->add(g, a, b, relu, out);
}

int bk_prog_write(bk_prog_t *g, bk_ptensor_t *t, const float *src)
{
    if (!g || g->failed || !t || !src)
        return -1;
    if (!t->is_input) {
        bk_prog_fail(g, "only input tensors can be written");
        return -1;
    }
    return g->be->ops->write(g, t, src);
}

int bk_prog_run(bk_prog_t *g)
{
    if (!g || g->failed)
        return -1;
    return g->be->ops->run(g);
}

int bk_prog_read(bk_prog_t *g, bk_ptensor_t *t, float *dst)
{
    if (!g || g->failed || !t || !dst)
        return -1;
    return g->be->ops->read(g, t, dst);
}
