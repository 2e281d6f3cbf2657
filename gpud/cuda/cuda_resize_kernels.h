/* cuda_resize_kernels — a decoded image to its batch slot on the device:
 * PIL's bilinear resize (antialiased) and torchvision's center crop as
 * common/image/resize.c computes them, from that file's own tables
 * (resize_taps), so the pixels are resize_region's bit for bit: the same
 * 32-bit integer sums of 22-bit fixed-point weights, the same rounding and
 * clamping. The horizontal pass writes an 8-bit buffer of the rows the
 * vertical taps read; the vertical pass writes the window's span into the
 * uint8 CHW sample. Their CPU reference is resize_region (gpud_cuemu
 * compares them). Used by cuda_decode.c (--decode gpu). */
#ifndef DDP_CUDA_RESIZE_KERNELS_H
#define DDP_CUDA_RESIZE_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mid (rows x cols x oc, interleaved) = the horizontal pass over source
 * rows [y0, y0 + rows) of src (sc = 1 or 3 interleaved channels, pitch
 * bytes a row): output column x reads source columns lo[x] .. lo[x] + ks
 * - 1 with weights k[x * ks ...]. oc 1 of sc 3: each source pixel first
 * becomes PIL's L (rgb_to_gray); oc 3 of sc 1: the gray value in every
 * channel (what the CPU path's replication after the resize gives). */
cudaError_t ck_resize_h(cudaStream_t s, const uint8_t *src, size_t pitch, int sc, int oc,
                        int y0, int rows, int cols, const int32_t *lo, const int32_t *k, int ks,
                        uint8_t *mid);

/* The vertical pass: output row i of the span reads mid's rows lo[i] -
 * mid_y0 .. + ks - 1; value (ch, i, x) goes to out[ch * plane + (oy + i) *
 * out_w + ox + x] (the sample's CHW planes, plane = out_h * out_w). */
cudaError_t ck_resize_v(cudaStream_t s, const uint8_t *mid, int cols, int oc, int mid_y0,
                        int rows, const int32_t *lo, const int32_t *k, int ks, uint8_t *out,
                        int out_w, size_t plane, int ox, int oy);

#ifdef __cplusplus
}
#endif
#endif
