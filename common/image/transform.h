/* transform — one sample from the dataset to the uint8 CHW pixels of a batch,
 * as torchvision's eval pipeline makes them:
 *
 *   Image.open(path).convert("RGB")            (decode.h; gray stays gray)
 *   [Grayscale()]                              when channels == 1 and the image is RGB
 *   Resize(resize)                             shorter side -> resize, PIL bilinear + antialias
 *   CenterCrop((crop_h, crop_w))               torchvision's offsets, zero padding if larger
 *   PILToTensor()                              uint8, channel-planar
 *   gray -> 3 channels by replication          when channels == 3 and the image is gray
 *
 * Grayscale is applied before Resize (the usual order, Grayscale first; it
 * is also cheaper). idx samples (gray) take the same path. Normalisation is
 * gpud's job. */
#ifndef DDP_TRANSFORM_H
#define DDP_TRANSFORM_H

#include "common/dataset.h"
#include "common/image/decode.h"
#include "common/image/resize.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int resize;         /* shorter side; 0: none */
    int crop_h, crop_w; /* 0: none (both or neither) */
    int channels;       /* output channels, 1 or 3 */
    int dct_scaling;    /* 1: libjpeg-turbo DCT scaling allowed (faster, not PIL-exact) */
} transform_t;

/* 0, or -1 with a reason when T is inconsistent. */
int transform_check(const transform_t *t, char *err, size_t errlen);

/* The h x w of every sample of DS under T: the crop when set; else for idx
 * the (resized) image size; else the (resized) size of the first image
 * whose header decodes. 0, or -1 with a reason. */
int transform_output_hw(const transform_t *t, const dataset_t *ds, int *h, int *w, char *err,
                        size_t errlen);

/* Loads sample i of DS, decodes, transforms and writes channels x out_h x
 * out_w uint8 (CHW) into OUT. 0, or -1 with a reason naming the problem
 * (the caller adds the path). Without a crop, an image whose (resized) size
 * is not out_h x out_w is an error. Thread-safe. */
int sample_load(const dataset_t *ds, uint64_t i, const transform_t *t, uint8_t *out, int out_h,
                int out_w, char *err, size_t errlen);

/* sample_load for an image already in memory (BUF, LEN bytes of an image
 * file in any format decode.h reads): the same decode and steps. The fuzz
 * target's entry point. */
int sample_load_buffer(const uint8_t *buf, size_t len, const transform_t *t, uint8_t *out,
                       int out_h, int out_w, char *err, size_t errlen);

/* The steps after decoding: IMG is the decoded image, src_w x src_h its size
 * before any DCT scaling (PIL's Image.size). */
int transform_image(const image_t *img, int src_w, int src_h, const transform_t *t,
                    uint8_t *out, int out_h, int out_w, char *err, size_t errlen);

/* transform_image when IMG holds only part of the decoded image (from
 * decode_image_part): PART says where. */
int transform_part(const image_t *img, const decode_part_t *part, int src_w, int src_h,
                   const transform_t *t, uint8_t *out, int out_h, int out_w, char *err,
                   size_t errlen);

/* Where an image of src_w x src_h lands under T: the resized size *rw x
 * *rh and the window WIN of it that becomes the out_h x out_w output (the
 * center crop's, padding outside the resized image). 0, or -1 with a
 * reason when the output is not out_h x out_w. */
int transform_window(const transform_t *t, int src_w, int src_h, int out_h, int out_w, int *rw,
                     int *rh, resize_window_t *win, char *err, size_t errlen);

/* torchvision CenterCrop's offset along one axis: int(round((size - crop) /
 * 2.0)) with Python's half-to-even round; when crop > size, minus the left
 * zero padding (crop - size) // 2. */
int center_crop_offset(int size, int crop);

/* PIL's convert("L"): L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16. */
void rgb_to_gray(const uint8_t *rgb, uint8_t *gray, size_t npix);

#endif
