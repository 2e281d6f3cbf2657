/* cuda_resize_kernels — a batch of decoded images to their samples on the
 * device: PIL's bilinear resize (antialiased) and torchvision's center
 * crop as common/image/resize.c computes them, from that file's own tables
 * (resize_taps), so the pixels are resize_region's bit for bit: the same
 * 32-bit integer sums of 22-bit fixed-point weights, the same rounding and
 * clamping. The horizontal pass writes each image's 8-bit buffer of the
 * rows its vertical taps read; the vertical pass writes the window's span
 * into the uint8 CHW sample. Each pass is one launch for the whole batch:
 * image j owns the blocks [job.hb0, next job's hb0) of the first and
 * [job.vb0, ...) of the second. Their CPU reference is resize_region
 * (gpud_cuemu compares them). Used by cuda_decode.c (--decode gpu). */
#ifndef DDP_CUDA_RESIZE_KERNELS_H
#define DDP_CUDA_RESIZE_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One image's work; every pointer is device memory. */
typedef struct {
    const uint8_t *src;     /* the decoded image: sc interleaved channels, pitch bytes a row */
    uint8_t *mid;           /* rows x cols x oc, interleaved: its horizontal pass */
    uint8_t *out;           /* its sample: oc planes of out_h x out_w */
    const int32_t *hlo, *hk, *vlo, *vk;   /* resize_taps' tables (h: cols, v: vrows) */
    int pitch, sc;
    int y0, rows, cols;     /* source rows [y0, y0 + rows) the vertical taps read */
    int hks, vks, vrows;
    int ox, oy;             /* the span's place in the sample */
    int flip;               /* 1: the sample mirrored left-right (training's flip) */
    unsigned hb0, vb0;      /* its first block in each launch */
} ck_rz_job_t;

/* The blocks of a pass over count values (THREADS a block). */
unsigned ck_resize_blocks(size_t count);

/* Each job's mid = the horizontal pass over its source rows: output column
 * x reads source columns hlo[x] .. + hks - 1 with weights hk[x * hks ...].
 * oc 1 of sc 3: each source pixel first becomes PIL's L (rgb_to_gray); oc
 * 3 of sc 1: the gray value in every channel (what the CPU path's
 * replication after the resize gives). jobs (device) are n, sorted by hb0;
 * blocks: the last job's hb0 + its blocks. */
cudaError_t ck_resize_h(cudaStream_t s, const ck_rz_job_t *jobs, int n, int oc,
                        unsigned blocks);

/* The vertical pass: output row i of a job's span reads its mid's rows
 * vlo[i] - y0 .. + vks - 1; value (ch, i, x) goes to out[ch * plane + (oy
 * + i) * out_w + ox + x] (plane = out_h * out_w), to column out_w - 1 -
 * (ox + x) when flip. Blocks by vb0. */
cudaError_t ck_resize_v(cudaStream_t s, const ck_rz_job_t *jobs, int n, int oc, int out_w,
                        size_t plane, unsigned blocks);

#ifdef __cplusplus
}
#endif
#endif
