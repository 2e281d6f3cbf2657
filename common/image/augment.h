/* augment — the random train transforms, as torchvision 0.14 + PIL 9 make
 * them, with parameters drawn per (seed, epoch, sample id):
 *
 *   [Grayscale()]                    when channels == 1 and the image is RGB
 *   RandomResizedCrop((out_h, out_w), scale, ratio)     when cfg->crop
 *   RandomHorizontalFlip(p)                             when cfg->flip_p > 0
 *   RandomRotation(degrees)  NEAREST, expand=False, center, fill 0
 *                                                       when cfg->rotate
 *   PILToTensor()            uint8 CHW; gray -> 3 channels by replication
 *
 * i.e. Compose([RandomResizedCrop, RandomHorizontalFlip, RandomRotation])
 * with each step optional. Without the crop the source must already be
 * out_w x out_h (the Fashion-MNIST seed: 28x28, rotation only).
 *
 * Parameters come from the counter-based RNG of sampler.h, one stream per
 * transform keyed (seed, epoch, id, RNG_STREAM_*): a sample's augmentation
 * depends on nothing else — not the thread, worker, batch or order — so
 * any --workers gives the same pixels. The numbers differ from torch's
 * generator, the algorithms do not:
 *   crop: torchvision's get_params — 10 attempts of area ~ U(scale) * H*W,
 *     aspect = exp(U(log ratio)), w = round(sqrt(area*aspect)),
 *     h = round(sqrt(area/aspect)) (half to even); accepted when
 *     0 < w <= W and 0 < h <= H, then top ~ U{0..H-h}, left ~ U{0..W-w};
 *     else the center crop with the ratio clamped to [ratio0, ratio1].
 *   flip: U[0,1) < p.
 *   rotate: angle ~ U[degrees0, degrees1).
 * The pixels for given parameters equal PIL's bit for bit:
 * resized_crop = crop + PIL bilinear antialias resize (resize.h);
 * rotation = Image.rotate's shortcuts (0, 90/270 on squares, 180) or its
 * affine transform with nearest sampling in 16.16 fixed point
 * (libImaging/Geometry.c affine_fixed; ImagingScaleAffine when the matrix
 * has no shear, the float path beyond the fixed-point range). */
#ifndef DDP_AUGMENT_H
#define DDP_AUGMENT_H

#include "common/dataset.h"
#include "common/image/decode.h"
#include "common/image/sampler.h"
#include "common/image/transform.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int crop;                   /* 1: RandomResizedCrop to the output size */
    double scale[2];            /* area fraction range, torchvision (0.08, 1.0) */
    double ratio[2];            /* aspect (w/h) range, torchvision (3/4, 4/3) */
    double flip_p;              /* RandomHorizontalFlip probability; 0: off */
    int rotate;                 /* 1: RandomRotation */
    double degrees[2];          /* angle range, degrees counter-clockwise */
    int channels;               /* output channels, 1 or 3 */
} augment_t;

/* RandomResizedCrop + flip (p 0.5) with torchvision's defaults, no rotation. */
augment_t augment_default(int channels);

/* 0, or -1 with a reason when CFG is inconsistent. */
int augment_check(const augment_t *cfg, char *err, size_t errlen);

/* The drawn parameters of one sample. */
typedef struct {
    int crop;                   /* a crop was drawn */
    int top, left, h, w;        /* crop box in the source (torchvision's i, j, h, w) */
    int attempts;               /* tries used, 1..10; 11: the center-crop fallback */
    int flip;                   /* 1: flipped left-right */
    int rotate;                 /* a rotation was drawn */
    double angle;               /* degrees counter-clockwise */
} augment_params_t;

/* The parameters sample ID of epoch EPOCH gets for a src_w x src_h source. */
augment_params_t augment_draw(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                              int src_w, int src_h);

/* torchvision's RandomResizedCrop.get_params for a src_w x src_h source
 * with the draws taken from R; sets p->crop, top, left, h, w, attempts. */
void augment_crop_params(rng_t *r, int src_w, int src_h, const double scale[2],
                         const double ratio[2], augment_params_t *p);

/* Applies P to SRC (interleaved, c = 1 or 3): writes cfg->channels x out_h
 * x out_w uint8 CHW into OUT. Without P->crop, SRC must be out_w x out_h.
 * 0, or -1 with a reason. Thread-safe. */
int augment_apply(const augment_t *cfg, const augment_params_t *p, const image_t *src,
                  uint8_t *out, int out_h, int out_w, char *err, size_t errlen);

/* augment_draw + augment_apply: the train transform of sample ID (call
 * augment_draw with the same arguments to log what it did). */
int augment_sample(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                   const image_t *src, uint8_t *out, int out_h, int out_w, char *err,
                   size_t errlen);

/* sample_load's train counterpart: loads sample ID of DS (idx pixels, or
 * the file decoded as PIL would, only the crop box's window of a JPEG
 * where the build can), and writes augment_sample's result. 0, or -1 with
 * a reason naming the problem (the caller adds the path). Thread-safe. */
int augment_load(const dataset_t *ds, uint64_t id, const augment_t *cfg, uint64_t seed,
                 uint32_t epoch, uint8_t *out, int out_h, int out_w, char *err, size_t errlen);

/* A training sample from its file in memory (BUF, LEN bytes, any format
 * decode.h reads), exactly as loaderd makes it (train_sample.h): with
 * cfg->crop, augment_load's decode and steps; without, T (the eval
 * transform: resize, center crop) then augment_flip_rotate. gpud decodes
 * --wire jpeg train batches with it. 0, or -1 with a reason. Thread-safe. */
int augment_load_buffer(const uint8_t *buf, size_t len, const augment_t *cfg,
                        const transform_t *t, uint64_t seed, uint32_t epoch, uint64_t id,
                        uint8_t *out, int out_h, int out_w, char *err, size_t errlen);

/* No random crop: the flip and rotation of sample ID drawn and applied in
 * place to OUT (cfg->channels x out_h x out_w CHW, the fixed transform's
 * output), as Compose([Resize, CenterCrop, RandomHorizontalFlip,
 * RandomRotation]). 0, or -1 with a reason (out of memory). */
int augment_flip_rotate(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                        uint8_t *out, int out_h, int out_w, char *err, size_t errlen);

/* The steps on their own, PIL-exact.
 * torchvision F.resized_crop(img, top, left, h, w, (out_h, out_w)) with
 * bilinear antialias, written CHW (SRC's channels). The box must lie in SRC. */
int augment_resized_crop(const image_t *src, int top, int left, int h, int w, uint8_t *out,
                         int out_h, int out_w, char *err, size_t errlen);
/* Flips the C planes of h x w in PLANES left-right in place. */
void augment_flip_planes(uint8_t *planes, int c, int h, int w);
/* PIL's Image.rotate(angle, NEAREST, expand=False, center=None, fillcolor=0)
 * of each of the C planes of h x w in IN, into OUT (not IN). */
void augment_rotate_planes(const uint8_t *in, uint8_t *out, int c, int h, int w, double angle);

#endif
