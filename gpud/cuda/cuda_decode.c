/* cuda_decode — --decode gpu (bk_ops_t.decode; docs/CUDA.md "Decoding on
 * the GPU"): a --wire jpeg batch's files decoded by nvJPEG's batched
 * decoder into interleaved RGB (a gray JPEG: its one plane, as PIL's "L")
 * in device memory, each sample's place (the
 * eval transform, or the caller's: training's random box and flip) resized
 * and cropped there by cuda_resize_kernels.cu with common/image's own
 * tables (resize_taps),
 * and the uint8 CHW batch left there. gpud's input path takes it as it
 * takes a loaderd --wire uint8 batch, by an address in pinned host memory
 * (d->host) that names it: that path finds the batch's device copy
 * (cu_decode_device_view) and normalises from it in place, so the batch
 * is neither copied back nor uploaded again. What reads pixels on the host
 * (a short micro-batch's padding, the float path) asks first
 * (backend_decode_host), and only then is the batch copied back into
 * d->host, once. The host's cores no longer decode: what limited a JPEG
 * job end to end.
 *
 * What nvJPEG does not take goes through common/image on the host (the
 * same decoder as --decode cpu), then through the same device resize:
 * files that are not whole 3-component or gray JPEGs (CMYK, PNG, one cut
 * short, ...), and, when the batched call fails, any file nvJPEG's
 * single-image call refuses too. A file neither decodes fails with
 * common/image's reason, as with cpu.
 *
 * DDPIPE_NVJPEG_BACKEND=hardware: the GPU's JPEG engines (A100, H100,
 * H200) instead of nvJPEG's CUDA decoder; the files they do not take
 * (progressive, 4:1:0, 4:1:1) go to the host.
 *
 * Pixels: nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's, so
 * a JPEG's pixels may differ from --decode cpu's by a few grey levels; the
 * resize and crop after it are resize_region's bit for bit. Every gpud of
 * a job decodes a file the same way (the same library, the same calls), so
 * a sample's result does not depend on which worker ran it. */
#include "gpud/cuda/cuda_decode.h"

#include "common/errbuf.h"
#include "common/image/decode.h"
#include "common/image/resize.h"
#include "common/log.h"
#include "gpud/cuda/cuda_nvjpeg.h"
#include "gpud/cuda/cuda_priv.h"
#include "gpud/cuda/cuda_resize_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DI_GPU, DI_CPU, DI_FAILED };

/* one sample of a batch */
typedef struct {
    int how;              /* DI_* */
    int w, h, sc;         /* decoded size and channels (GPU: 3, or 1 for a gray JPEG) */
    size_t bytes;         /* its room in d->src: w x h x sc when planned */
    image_t *img;         /* DI_CPU: the host's decode, until uploaded */
    size_t at;            /* the file's offset in the batch */
    size_t src_off;       /* the decoded image in d->src */
    size_t taps_off;      /* its tables in d->taps (int32 index): h.lo, h.k, v.lo, v.k */
    size_t mid_off;       /* its horizontal pass in d->mid */
    bk_decode_place_t pl; /* where the sample comes from */
    resize_taps_t t;      /* owned by sample taps_of (the first of its place in the batch) */
    int taps_of;
    int ox, oy;           /* the span's place in the sample */
} dimg_t;

struct cu_decode {
    const cu_nvjpeg_t *nj;
    int hardware;               /* DDPIPE_NVJPEG_BACKEND=hardware */
    nvjpegHandle_t h;
    nvjpegJpegStream_t js;      /* hardware: a header parsed, to ask whether the engines take it */
    nvjpegJpegState_t batched, batched_y, single;   /* batched_y: gray files (NVJPEG_OUTPUT_Y) */
    cudaStream_t stream;
    uint8_t *src, *mid, *out;   /* device: decoded images, horizontal passes, the batch */
    size_t src_cap, mid_cap, out_cap;
    int32_t *taps_d;            /* device tables */
    size_t taps_d_cap;          /* bytes */
    int32_t *taps_h;            /* pinned: the tables before their upload */
    size_t taps_h_cap;
    uint8_t *host;              /* pinned: the batch for the host */
    size_t host_cap;
    ck_rz_job_t *jobs_h, *jobs_d;   /* the resize's work, pinned and on the device */
    size_t jobs_h_cap, jobs_d_cap;  /* bytes */
    dimg_t *img;
    int img_cap;
    /* the input path reads d->out in place (cu_decode_device_view): the
     * next batch's resize waits for what it queued */
    cudaEvent_t used;
    size_t out_bytes;           /* the last batch's, valid in d->out */
    int host_ok;                /* d->host holds it too (cu_decode_host) */
    /* what the batches did, for the closing line */
    long batches, on_gpu, on_cpu, failed, batched_fallbacks, views, host_copies;
};

static int cu_err(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess)
        return 0;
    err_set(err, errlen, "--decode gpu: %s failed: %s. %s", what, cudaGetErrorString(e),
            cu_advice(e));
    return -1;
}

static int nj_err(nvjpegStatus_t s, const char *what, char *err, size_t errlen)
{
    if (s == NVJPEG_STATUS_SUCCESS)
        return 0;
    err_set(err, errlen, "--decode gpu: %s failed: %s", what, cu_nvjpeg_status(s));
    return -1;
}

void cu_decode_destroy(cu_decode_t **dp)
{
    cu_decode_t *d = dp ? *dp : NULL;
    if (!d)
        return;
    if (d->batches)
        log_info("decode gpu: %ld batches, %ld images by nvJPEG, %ld on the host (not a "
                 "3-component or gray JPEG, or refused by nvJPEG), %ld failed; %ld batched calls "
                 "redone image by image; %ld input writes read the decoded batch in device "
                 "memory; %ld batches copied back for the host", d->batches, d->on_gpu,
                 d->on_cpu, d->failed, d->batched_fallbacks, d->views, d->host_copies);
    if (d->stream)
        cudaStreamSynchronize(d->stream);
    if (d->js)
        d->nj->stream_destroy(d->js);
    if (d->batched)
        d->nj->state_destroy(d->batched);
    if (d->batched_y)
        d->nj->state_destroy(d->batched_y);
    if (d->single)
        d->nj->state_destroy(d->single);
    if (d->h)
        d->nj->destroy(d->h);
    cudaFree(d->src);
    cudaFree(d->mid);
    cudaFree(d->out);
    cudaFree(d->taps_d);
    cudaFreeHost(d->taps_h);
    cudaFreeHost(d->host);
    cudaFreeHost(d->jobs_h);
    cudaFree(d->jobs_d);
    for (int i = 0; i < d->img_cap; i++)
        if (d->img[i].taps_of == i)
            resize_taps_free(&d->img[i].t);
    free(d->img);
    if (d->used)
        cudaEventDestroy(d->used);
    if (d->stream)
        cudaStreamDestroy(d->stream);
    free(d);
    *dp = NULL;
}

/* DDPIPE_NVJPEG_BACKEND: "default" (unset) or "hardware"; -1 otherwise */
static int backend_env(char *err, size_t errlen)
{
    const char *v = getenv("DDPIPE_NVJPEG_BACKEND");
    if (!v || !*v || strcmp(v, "default") == 0)
        return 0;
    if (strcmp(v, "hardware") == 0)
        return 1;
    err_set(err, errlen, "DDPIPE_NVJPEG_BACKEND=%s: default or hardware", v);
    return -1;
}

cu_decode_t *cu_decode_new(char *err, size_t errlen)
{
    int hw = backend_env(err, errlen);
    const cu_nvjpeg_t *nj = hw < 0 ? NULL : cu_nvjpeg(err, errlen);
    if (!nj)
        return NULL;
    cu_decode_t *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(err, errlen, "--decode gpu: out of memory");
        return NULL;
    }
    d->nj = nj;
    d->hardware = hw;
    nvjpegStatus_t made = hw ? nj->create_ex(NVJPEG_BACKEND_HARDWARE, NULL, NULL,
                                             NVJPEG_FLAGS_DEFAULT, &d->h)
                             : nj->create_simple(&d->h);
    if (hw && made != NVJPEG_STATUS_SUCCESS) {
        err_set(err, errlen, "--decode gpu: DDPIPE_NVJPEG_BACKEND=hardware: this GPU's JPEG "
                "engines cannot be used (nvjpegCreateEx: %s; A100, H100 and H200 have them); "
                "unset it for nvJPEG's CUDA decoder", cu_nvjpeg_status(made));
        cu_decode_destroy(&d);
        return NULL;
    }
    if (nj_err(made, "nvjpegCreateSimple", err, errlen) < 0 ||
        (hw && nj_err(nj->stream_create(d->h, &d->js), "nvjpegJpegStreamCreate", err,
                      errlen) < 0) ||
        nj_err(nj->state_create(d->h, &d->batched), "nvjpegJpegStateCreate", err, errlen) < 0 ||
        nj_err(nj->state_create(d->h, &d->batched_y), "nvjpegJpegStateCreate", err, errlen) < 0 ||
        nj_err(nj->state_create(d->h, &d->single), "nvjpegJpegStateCreate", err, errlen) < 0 ||
        cu_err(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
               "cudaStreamCreate (decode)", err, errlen) < 0 ||
        cu_err(cudaEventCreateWithFlags(&d->used, cudaEventDisableTiming),
               "cudaEventCreate (decode)", err, errlen) < 0 ||
        cu_err(cudaEventRecord(d->used, d->stream), "cudaEventRecord (decode)", err,
               errlen) < 0) {
        cu_decode_destroy(&d);
        return NULL;
    }
    log_info("decode gpu: nvJPEG %d.%d.%d (%s), %s", nj->version[0], nj->version[1],
             nj->version[2], nj->path, hw ? "the GPU's JPEG engines (DDPIPE_NVJPEG_BACKEND="
                                            "hardware)" : "its CUDA decoder");
    return d;
}

/* *buf (device memory, or pinned host memory) holds at least bytes; the
 * old contents are not kept (the stream is idle between batches: each
 * ends with a wait) */
static int grow(void *buf, size_t *cap, size_t bytes, int pinned, const char *what, char *err,
                size_t errlen)
{
    void **p = buf;
    if (bytes <= *cap)
        return 0;
    if (pinned)
        cudaFreeHost(*p);
    else
        cudaFree(*p);
    *p = NULL;
    *cap = 0;
    if (cu_err(pinned ? cudaHostAlloc(p, bytes, cudaHostAllocDefault) : cudaMalloc(p, bytes),
               what, err, errlen) < 0)
        return -1;
    *cap = bytes;
    return 0;
}

static void fail(const bk_decode_batch_t *b, dimg_t *di, int i, const char *why)
{
    di->how = DI_FAILED;
    image_destroy(&di->img);
    b->failed[i] = 1;
    snprintf(b->why + (size_t)i * b->why_len, b->why_len, "%s", why);
}

/* The channels nvJPEG's batched decoder gives file F, 0 when it does not
 * take it: 3 for a whole 3-component JPEG whose header it reads
 * (interleaved RGB), 1 for a gray one (its one plane: what libjpeg-turbo
 * and PIL's "L" read); its size in *w, *h */
static int gpu_takes(cu_decode_t *d, const uint8_t *f, size_t len, int *w, int *h)
{
    int nc = 0, ws[NVJPEG_MAX_COMPONENT] = {0}, hs[NVJPEG_MAX_COMPONENT] = {0};
    nvjpegChromaSubsampling_t ss = NVJPEG_CSS_UNKNOWN;
    /* a file cut short (no EOI marker at its end) goes to the host, which
     * fails it as PIL does ("image file is truncated"), where nvJPEG may
     * fill the missing blocks */
    if (len < 4 || f[0] != 0xFF || f[1] != 0xD8 || f[len - 2] != 0xFF || f[len - 1] != 0xD9 ||
        d->nj->get_image_info(d->h, f, len, &nc, &ss, ws, hs) != NVJPEG_STATUS_SUCCESS ||
        !((nc == 3 && ss != NVJPEG_CSS_UNKNOWN && ss != NVJPEG_CSS_GRAY) ||
          (nc == 1 && ss == NVJPEG_CSS_GRAY)) ||
        ws[0] < 1 || hs[0] < 1 || ws[0] > DECODE_MAX_DIM || hs[0] > DECODE_MAX_DIM)
        return 0;
    /* the engines take baseline single-scan files (not 4:1:0 or 4:1:1):
     * the rest goes to the host, whatever the batch, so a file's pixels
     * never depend on which batch it came in */
    int unsupported = 1;
    if (d->hardware &&
        (d->nj->parse_header(d->h, f, len, d->js) != NVJPEG_STATUS_SUCCESS ||
         d->nj->batched_supported(d->h, d->js, &unsupported) != NVJPEG_STATUS_SUCCESS ||
         unsupported != 0))
        return 0;
    *w = ws[0];
    *h = hs[0];
    return nc;
}

/* The samples the host decodes (di->how DI_CPU, img NULL), OpenMP over them. */
static void host_decode(const bk_decode_batch_t *b, dimg_t *img)
{
#pragma omp parallel for num_threads(b->threads > 0 ? b->threads : 1) schedule(dynamic, 1)
    for (int i = 0; i < b->n; i++) {
        dimg_t *di = &img[i];
        if (di->how != DI_CPU || di->img)
            continue;
        char why[256];
        int sw, sh;
        di->img = decode_image(b->files + di->at, b->sizes[i], NULL, &sw, &sh, why, sizeof why);
        if (!di->img) {
            fail(b, di, i, why);
            continue;
        }
        di->w = di->img->w;
        di->h = di->img->h;
        di->sc = di->img->c;
    }
}

/* nvJPEG's batched decode of the DI_GPU samples of sc channels (3: RGB
 * interleaved; 1: gray, NVJPEG_OUTPUT_Y: one batched call takes one output
 * format) into d->src; when it fails, each image alone, and those nvJPEG
 * refuses go to the host. */
static int gpu_decode_set(cu_decode_t *d, const bk_decode_batch_t *b, int sc, char *err,
                          size_t errlen)
{
    int m = 0;
    for (int i = 0; i < b->n; i++)
        m += d->img[i].how == DI_GPU && d->img[i].sc == sc;
    if (m == 0)
        return 0;
    nvjpegOutputFormat_t fmt = sc == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI;
    nvjpegJpegState_t state = sc == 1 ? d->batched_y : d->batched;
    const unsigned char **data = malloc((size_t)m * sizeof *data);
    size_t *lens = malloc((size_t)m * sizeof *lens);
    nvjpegImage_t *dst = calloc((size_t)m, sizeof *dst);
    int rc = -1;
    if (!data || !lens || !dst) {
        err_set(err, errlen, "--decode gpu: out of memory for %d images", m);
        goto out;
    }
    for (int i = 0, j = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->how != DI_GPU || di->sc != sc)
            continue;
        data[j] = b->files + di->at;
        lens[j] = b->sizes[i];
        dst[j].channel[0] = d->src + di->src_off;
        dst[j].pitch[0] = (size_t)di->w * sc;
        j++;
    }
    nvjpegStatus_t s = d->nj->batched_init(d->h, state, m, 1, fmt);
    if (s == NVJPEG_STATUS_SUCCESS)
        s = d->nj->batched(d->h, state, data, lens, dst, d->stream);
    if (s == NVJPEG_STATUS_SUCCESS) {
        rc = 0;
        goto out;
    }
    /* one file nvJPEG cannot decode fails the call: each alone, then */
    d->batched_fallbacks++;
    log_warn("decode gpu: nvJPEG's batched decode of %d %s images failed (%s); decoding them "
             "one by one", m, sc == 1 ? "gray" : "colour", cu_nvjpeg_status(s));
    for (int i = 0, j = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->how != DI_GPU || di->sc != sc)
            continue;
        s = d->nj->decode(d->h, d->single, data[j], lens[j], fmt, &dst[j], d->stream);
        j++;
        if (s != NVJPEG_STATUS_SUCCESS)
            di->how = DI_CPU;   /* the host decodes it, or says why it cannot */
    }
    rc = 0;
out:
    free(data);
    free(lens);
    free(dst);
    return rc;
}

/* An earlier live sample of the batch with the tables of place P, or -1:
 * a dataset's images share a few sizes (a camera's, 500x375), so their
 * eval places do too, and a place's tables cost microseconds to compute
 * (training's random boxes rarely repeat) */
static int same_place(const cu_decode_t *d, int i, const bk_decode_place_t *p)
{
    for (int j = 0; j < i; j++) {
        const dimg_t *dj = &d->img[j];
        const bk_decode_place_t *q = &dj->pl;
        if (dj->taps_of == j && dj->t.h.lo && q->w == p->w && q->h == p->h && q->rw == p->rw &&
            q->rh == p->rh && q->wx == p->wx && q->wy == p->wy)
            return j;
    }
    return -1;
}

/* Sample i's place: the caller's (b->place), else the eval transform of
 * the whole image; 0, or -1 with a reason */
static int place(const bk_decode_batch_t *b, int i, const dimg_t *di, bk_decode_place_t *p,
                 char *why, size_t len)
{
    if (b->place) {
        if (b->place(b->place_ctx, i, di->w, di->h, p, why, len) != 0)
            return -1;
        if (p->x < 0 || p->y < 0 || p->w < 1 || p->h < 1 || p->x > di->w - p->w ||
            p->y > di->h - p->h) {
            snprintf(why, len, "box %dx%d at (%d, %d) is not inside the %dx%d image", p->w, p->h,
                     p->x, p->y, di->w, di->h);
            return -1;
        }
        return 0;
    }
    return backend_decode_eval_place(b, di->w, di->h, p, why, len);
}

/* Each live sample's place, tables and buffer places: the totals of the
 * tables in *taps (int32 values), of the horizontal passes in *mid and of
 * the decoded images in *src (bytes). */
static void plan(cu_decode_t *d, const bk_decode_batch_t *b, size_t *taps, size_t *mid,
                 size_t *src)
{
    *taps = *mid = *src = 0;
    for (int i = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->how == DI_FAILED)
            continue;
        char why[256];
        if (place(b, i, di, &di->pl, why, sizeof why) != 0) {
            fail(b, di, i, why);
            continue;
        }
        const bk_decode_place_t *p = &di->pl;
        resize_window_t win = {p->wx, p->wy, b->w, b->h};
        int j = same_place(d, i, p);
        if (j >= 0) {   /* its tables and their place */
            di->t = d->img[j].t;
            di->taps_of = j;
            di->taps_off = d->img[j].taps_off;
        } else if (resize_taps(p->w, p->h, p->rw, p->rh, &win, &di->t, why, sizeof why) != 0) {
            fail(b, di, i, why);
            continue;
        } else {
            di->taps_off = *taps;
            *taps += (size_t)di->t.h.count * (1 + di->t.h.ksize) +
                     (size_t)di->t.v.count * (1 + di->t.v.ksize);
        }
        di->ox = di->t.x0 - win.x;
        di->oy = di->t.y0 - win.y;
        di->src_off = *src;
        di->bytes = (size_t)di->w * di->h * di->sc;
        *src += (di->bytes + 255) & ~(size_t)255;
        di->mid_off = *mid;
        *mid += ((size_t)(di->t.sy1 - di->t.sy0) * (di->t.x1 - di->t.x0) * b->channels + 255) &
                ~(size_t)255;
    }
}

/* The tables into the pinned buffer, one after another per size (a
 * sample that failed after its plan may own a size's tables: they go too). */
static void pack_taps(cu_decode_t *d, const bk_decode_batch_t *b)
{
    for (int i = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->taps_of != i || !di->t.h.lo)
            continue;
        int32_t *p = d->taps_h + di->taps_off;
        const resize_axis_t *ax[2] = {&di->t.h, &di->t.v};
        for (int a = 0; a < 2; a++) {
            memcpy(p, ax[a]->lo, (size_t)ax[a]->count * sizeof *p);
            p += ax[a]->count;
            memcpy(p, ax[a]->k, (size_t)ax[a]->count * ax[a]->ksize * sizeof *p);
            p += (size_t)ax[a]->count * ax[a]->ksize;
        }
    }
}

/* The host-decoded images to d->src (waited for: their memory is freed). */
static int upload_host_images(cu_decode_t *d, const bk_decode_batch_t *b, char *err,
                              size_t errlen)
{
    int any = 0;
    for (int i = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->how != DI_CPU || !di->img)
            continue;
        if ((size_t)di->w * di->h * di->sc != di->bytes) {   /* nvJPEG read another size */
            fail(b, di, i, "nvJPEG refused the file and the host's decoder reads another size "
                           "from it");
            continue;
        }
        any = 1;
        if (cu_err(cudaMemcpyAsync(d->src + di->src_off, di->img->px,
                                   (size_t)di->w * di->h * di->sc, cudaMemcpyHostToDevice,
                                   d->stream), "a host-decoded image's upload", err, errlen) < 0)
            return -1;
    }
    if (any && cu_err(cudaStreamSynchronize(d->stream), "the host-decoded images' upload", err,
                      errlen) < 0)
        return -1;
    for (int i = 0; i < b->n; i++)
        image_destroy(&d->img[i].img);
    return 0;
}

/* Each live sample resized into its slot, zeros elsewhere (padding, a
 * failed sample): one launch a pass for the batch, over a table of its
 * samples' work. d->out is written only after the input path's last read
 * of it. */
static int resize_all(cu_decode_t *d, const bk_decode_batch_t *b, char *err, size_t errlen)
{
    size_t plane = (size_t)b->h * b->w, per = plane * b->channels;
    size_t bytes = (size_t)b->n * sizeof(ck_rz_job_t);
    d->out_bytes = 0;
    if (grow(&d->jobs_h, &d->jobs_h_cap, bytes, 1, "cudaHostAlloc (resize jobs)", err,
             errlen) < 0 ||
        grow(&d->jobs_d, &d->jobs_d_cap, bytes, 0, "cudaMalloc (resize jobs)", err, errlen) < 0)
        return -1;
    int n = 0, slot = 0;
    unsigned hb = 0, vb = 0;
    for (int i = 0; i < b->n; i++) {
        const dimg_t *di = &d->img[i];
        const resize_taps_t *t = &di->t;
        if (di->how == DI_FAILED)
            continue;   /* zeros (compact: no slot) */
        uint8_t *out = d->out + (size_t)(b->compact ? slot++ : i) * per;
        if (t->x1 <= t->x0 || t->y1 <= t->y0)
            continue;   /* all padding: zeros */
        const int32_t *hlo = d->taps_d + di->taps_off, *hk = hlo + t->h.count;
        const int32_t *vlo = hk + (size_t)t->h.count * t->h.ksize, *vk = vlo + t->v.count;
        int cols = t->x1 - t->x0, rows = t->sy1 - t->sy0, pitch = di->w * di->sc;
        d->jobs_h[n++] = (ck_rz_job_t){
            .src = d->src + di->src_off + (size_t)di->pl.y * pitch + (size_t)di->pl.x * di->sc,
            .mid = d->mid + di->mid_off, .out = out, .hlo = hlo, .hk = hk, .vlo = vlo,
            .vk = vk, .pitch = pitch, .sc = di->sc, .y0 = t->sy0, .rows = rows, .cols = cols,
            .hks = t->h.ksize, .vks = t->v.ksize, .vrows = t->v.count, .ox = di->ox,
            .oy = di->oy, .flip = di->pl.flip, .hb0 = hb, .vb0 = vb};
        hb += ck_resize_blocks((size_t)rows * cols * b->channels);
        vb += ck_resize_blocks((size_t)t->v.count * cols * b->channels);
    }
    if (cu_err(cudaStreamWaitEvent(d->stream, d->used, 0), "waiting for the input path", err,
               errlen) < 0 ||
        cu_err(cudaMemsetAsync(d->out, 0, per * b->n, d->stream), "cudaMemsetAsync", err,
               errlen) < 0 ||
        cu_err(cudaMemcpyAsync(d->jobs_d, d->jobs_h, (size_t)n * sizeof *d->jobs_h,
                               cudaMemcpyHostToDevice, d->stream), "the resize jobs' upload",
               err, errlen) < 0 ||
        cu_err(ck_resize_h(d->stream, d->jobs_d, n, b->channels, hb),
               "the resize kernel (rows)", err, errlen) < 0 ||
        cu_err(ck_resize_v(d->stream, d->jobs_d, n, b->channels, b->w, plane, vb),
               "the resize kernel (columns)", err, errlen) < 0)
        return -1;
    return 0;
}

int cu_decode_batch(cu_decode_t *d, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                    size_t errlen)
{
    if (b->n < 1 || b->h < 1 || b->w < 1 || (b->channels != 1 && b->channels != 3) ||
        b->why_len < 2) {
        err_set(err, errlen, "--decode gpu: a batch of %d samples of %dx%dx%d", b->n,
                b->channels, b->h, b->w);
        return -1;
    }
    if (b->n > d->img_cap) {
        dimg_t *p = realloc(d->img, (size_t)b->n * sizeof *p);
        if (!p) {
            err_set(err, errlen, "--decode gpu: out of memory for %d samples", b->n);
            return -1;
        }
        memset(p + d->img_cap, 0, (size_t)(b->n - d->img_cap) * sizeof *p);
        d->img = p;
        d->img_cap = b->n;
    }
    size_t at = 0;
    for (int i = 0; i < b->n; i++) {
        dimg_t *di = &d->img[i];
        if (di->taps_of == i)   /* earlier ones first: a sharer never outlives its owner */
            resize_taps_free(&di->t);
        *di = (dimg_t){.how = DI_CPU, .at = at, .sc = 3, .taps_of = i};
        b->failed[i] = 0;
        b->why[(size_t)i * b->why_len] = '\0';
        int sc = gpu_takes(d, b->files + at, b->sizes[i], &di->w, &di->h);
        if (sc > 0) {
            di->how = DI_GPU;
            di->sc = sc;
        }
        at += b->sizes[i];
    }
    host_decode(b, d->img);
    size_t ntaps, nmid, nsrc, per = (size_t)b->channels * b->h * b->w;
    plan(d, b, &ntaps, &nmid, &nsrc);
    size_t tbytes = (ntaps ? ntaps : 1) * sizeof(int32_t);
    /* a larger batch frees d->out, which the input path's last normalise
     * (the backend's stream) may not have read yet: waited for here,
     * explicitly, not left to cudaFree's implicit synchronisation */
    if (per * b->n > d->out_cap &&
        cu_err(cudaEventSynchronize(d->used), "waiting for the input path's read", err,
               errlen) < 0)
        return -1;
    if (grow(&d->src, &d->src_cap, nsrc ? nsrc : 1, 0, "cudaMalloc (decoded images)", err,
             errlen) < 0 ||
        grow(&d->mid, &d->mid_cap, nmid ? nmid : 1, 0, "cudaMalloc (resize rows)", err,
             errlen) < 0 ||
        grow(&d->out, &d->out_cap, per * b->n, 0, "cudaMalloc (decoded batch)", err,
             errlen) < 0 ||
        grow(&d->taps_d, &d->taps_d_cap, tbytes, 0, "cudaMalloc (resize tables)", err,
             errlen) < 0 ||
        grow(&d->taps_h, &d->taps_h_cap, tbytes, 1, "cudaHostAlloc (resize tables)", err,
             errlen) < 0 ||
        grow(&d->host, &d->host_cap, per * b->n, 1, "cudaHostAlloc (decoded batch)", err,
             errlen) < 0 ||
        gpu_decode_set(d, b, 3, err, errlen) < 0 || gpu_decode_set(d, b, 1, err, errlen) < 0)
        return -1;
    host_decode(b, d->img);   /* what nvJPEG refused one by one */
    pack_taps(d, b);
    if (upload_host_images(d, b, err, errlen) < 0 ||
        cu_err(cudaMemcpyAsync(d->taps_d, d->taps_h, ntaps * sizeof(int32_t),
                               cudaMemcpyHostToDevice, d->stream), "the resize tables' upload",
               err, errlen) < 0 ||
        resize_all(d, b, err, errlen) < 0 ||
        cu_err(cudaStreamSynchronize(d->stream), "the decode", err, errlen) < 0)
        return -1;
    int nfailed = 0;
    for (int i = 0; i < b->n; i++) {
        nfailed += d->img[i].how == DI_FAILED;
        d->on_gpu += d->img[i].how == DI_GPU;
        d->on_cpu += d->img[i].how == DI_CPU;
    }
    d->failed += nfailed;
    d->batches++;
    d->out_bytes = per * b->n;
    d->host_ok = 0;
    *out = d->host;
    return nfailed;
}

/* Whether [px, px + bytes) names bytes of the last decoded batch. */
static int in_batch(const cu_decode_t *d, const uint8_t *px, size_t bytes)
{
    return d && d->out_bytes && px >= d->host && bytes <= d->out_bytes &&
           (size_t)(px - d->host) <= d->out_bytes - bytes;
}

const uint8_t *cu_decode_device_view(cu_decode_t *d, const uint8_t *px, size_t bytes)
{
    if (!in_batch(d, px, bytes))
        return NULL;
    d->views++;
    return d->out + (px - d->host);
}

int cu_decode_host(cu_decode_t *d, const uint8_t *px, size_t bytes, char *err, size_t errlen)
{
    if (!in_batch(d, px, bytes) || d->host_ok)
        return 0;
    /* the decode was waited for (cu_decode_batch), and only the next one
     * writes d->out */
    if (cu_err(cudaMemcpyAsync(d->host, d->out, d->out_bytes, cudaMemcpyDeviceToHost,
                               d->stream), "the decoded batch's copy to the host", err,
               errlen) < 0 ||
        cu_err(cudaStreamSynchronize(d->stream), "the decoded batch's copy to the host", err,
               errlen) < 0)
        return -1;
    d->host_ok = 1;
    d->host_copies++;
    return 0;
}

cudaError_t cu_decode_mark_used(cu_decode_t *d, cudaStream_t s)
{
    return cudaEventRecord(d->used, s);
}

/* ------------------------------------------------ the backend's table */

static int dec_ready(backend_t *be, char *err, size_t errlen)
{
    cuda_backend_t *cb = cu_be(be);
    if (!cb->dec && !(cb->dec = cu_decode_new(err, errlen)))
        return -1;
    return 0;
}

static int dec_batch(backend_t *be, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                     size_t errlen)
{
    return dec_ready(be, err, errlen) < 0 ? -1 : cu_decode_batch(cu_be(be)->dec, b, out, err, errlen);
}

static int dec_host(backend_t *be, const uint8_t *px, size_t bytes, char *err, size_t errlen)
{
    return cu_decode_host(cu_be(be)->dec, px, bytes, err, errlen);   /* no decoder: 0 */
}

const bk_decode_ops_t CUDA_DECODE_OPS = {.ready = dec_ready, .batch = dec_batch,
                                         .host = dec_host};
