#!/usr/bin/python3
"""Goldens for loaderd's train transforms (tests/loaderd/test_augment.c).

Writes tests/golden/augment/: a few deterministic source images (PPM/PGM)
and, for a table of fixed parameters, what torchvision 0.14 + PIL make of
them with the composition common/image/augment.h implements:

    [img.convert("L")]                         when CHANNELS == 1 and RGB source
    F.resized_crop(img, top, left, h, w, [out_h, out_w])     when CROP == 1
    F.hflip(img)                                             when FLIP == 1
    F.rotate(img, angle, NEAREST, expand=False, center=None, fill=0)
                                                             when ROT == 1
    gray -> 3 channels by replication          when CHANNELS == 3 and gray

(the calls RandomResizedCrop, RandomHorizontalFlip and RandomRotation make
once their parameters are drawn). manifest.txt has one case per line:

    SRC CROP TOP LEFT H W OUT_H OUT_W FLIP ROT ANGLE CHANNELS OUT

ANGLE is Python's repr (round-trips through strtod). OUT is a PGM/PPM of
the result, compared bit for bit (PIL is deterministic).

Run with /usr/bin/python3 (Debian's python3-pil, python3-torchvision).
"""
import os

import numpy as np
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "augment")


def source(w, h, mode, seed):
    """Gradients, a hard-edged block and noise: every pixel distinct enough
    that a misplaced sample shows."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = xx * 255.0 / max(w - 1, 1) * 0.6 + yy * 255.0 / max(h - 1, 1) * 0.4
    base[(xx > w // 3) & (yy < h // 2)] = 235
    chans = 3 if mode == "RGB" else 1
    img = np.stack([base * (0.45 + 0.25 * c) for c in range(chans)], axis=-1)
    img = img + rng.integers(-45, 46, img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    return Image.fromarray(img[..., 0] if chans == 1 else img, mode)


def apply(img, case):
    crop, top, left, h, w, out_h, out_w, flip, rot, angle, channels = case
    if channels == 1 and img.mode == "RGB":
        img = img.convert("L")
    if crop:
        img = F.resized_crop(img, top, left, h, w, [out_h, out_w],
                             InterpolationMode.BILINEAR)
    if flip:
        img = F.hflip(img)
    if rot:
        img = F.rotate(img, angle, InterpolationMode.NEAREST, False, None, 0)
    if channels == 3 and img.mode == "L":
        img = img.convert("RGB")  # replication
    return img


# (CROP, TOP, LEFT, H, W, OUT_H, OUT_W, FLIP, ROT, ANGLE, CHANNELS)
CASES = {
    "rgb61x47": [
        (1, 3, 5, 30, 40, 24, 24, 0, 0, 0.0, 3),     # downscale
        (1, 0, 0, 47, 61, 32, 32, 1, 0, 0.0, 3),     # whole image, aspect change
        (1, 10, 20, 12, 9, 28, 20, 0, 0, 0.0, 3),    # upscale
        (1, 7, 11, 24, 24, 24, 24, 1, 0, 0.0, 3),    # box == output: no resize
        (1, 46, 60, 1, 1, 5, 7, 0, 0, 0.0, 3),       # one pixel
        (1, 2, 4, 40, 50, 24, 24, 0, 1, 13.7, 3),
        (1, 2, 4, 40, 50, 24, 24, 1, 1, -45.0, 3),
        (1, 2, 4, 40, 50, 24, 24, 0, 1, 90.0, 3),    # square: transpose
        (1, 2, 4, 40, 50, 20, 30, 0, 1, 90.0, 3),    # not square: affine
        (1, 2, 4, 40, 50, 20, 30, 1, 1, 270.0, 3),
        (1, 2, 4, 40, 50, 20, 30, 0, 1, 180.0, 3),
        (1, 5, 5, 30, 30, 16, 16, 0, 1, 0.0, 1),     # RGB -> gray first
        (1, 5, 5, 30, 30, 17, 23, 1, 1, 31.25, 1),
    ],
    "gray28x28": [
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 0.0, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 90.0, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 13.7, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, -45.0, 1),
        (0, 0, 0, 0, 0, 28, 28, 1, 1, -90.0, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 360.0, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 1e-15, 1),     # shear rounds away: scale path
        (0, 0, 0, 0, 0, 28, 28, 0, 1, -1e-15, 1),    # % 360 -> 360.0: scale path
        (0, 0, 0, 0, 0, 28, 28, 0, 1, 179.99, 1),
        (0, 0, 0, 0, 0, 28, 28, 1, 1, 7.5, 1),
        (0, 0, 0, 0, 0, 28, 28, 0, 1, -722.3, 1),
        (0, 0, 0, 0, 0, 28, 28, 1, 0, 0.0, 3),       # gray -> RGB replication
        (1, 4, 2, 20, 17, 28, 28, 1, 1, 10.0, 1),
    ],
    "rgb40x40": [
        (0, 0, 0, 0, 0, 40, 40, 0, 1, 90.0, 3),
        (0, 0, 0, 0, 0, 40, 40, 0, 1, 270.0, 3),
        (0, 0, 0, 0, 0, 40, 40, 0, 1, 45.0, 3),
        (0, 0, 0, 0, 0, 40, 40, 1, 1, -13.7, 3),
    ],
    "gray33x50": [
        (0, 0, 0, 0, 0, 50, 33, 0, 1, 13.7, 1),
        (0, 0, 0, 0, 0, 50, 33, 0, 1, 90.0, 1),
        (0, 0, 0, 0, 0, 50, 33, 1, 1, -45.0, 3),
        (1, 9, 3, 41, 30, 19, 13, 0, 1, 120.0, 1),
    ],
    "rgb9x5": [
        (1, 1, 2, 3, 6, 9, 11, 1, 1, 60.0, 3),
        (0, 0, 0, 0, 0, 5, 9, 0, 1, 33.3, 3),
    ],
}


def main():
    os.makedirs(OUT, exist_ok=True)
    sizes = {"rgb61x47": (61, 47, "RGB", 11), "gray28x28": (28, 28, "L", 12),
             "rgb40x40": (40, 40, "RGB", 13), "gray33x50": (33, 50, "L", 14),
             "rgb9x5": (9, 5, "RGB", 15)}
    lines = []
    for name, (w, h, mode, seed) in sizes.items():
        img = source(w, h, mode, seed)
        src = name + (".ppm" if mode == "RGB" else ".pgm")
        img.save(os.path.join(OUT, src))
        for k, case in enumerate(CASES[name]):
            res = apply(img, case)
            out_h, out_w = case[5], case[6]
            assert res.size == (out_w, out_h), (name, case, res.size)
            out = "%s_%02d.%s" % (name, k, "ppm" if res.mode == "RGB" else "pgm")
            res.save(os.path.join(OUT, out))
            crop, top, left, ch, cw, _, _, flip, rot, angle, channels = case
            lines.append("%s %d %d %d %d %d %d %d %d %d %r %d %s" %
                         (src, crop, top, left, ch, cw, out_h, out_w, flip, rot,
                          float(angle), channels, out))
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (len(lines), OUT))


if __name__ == "__main__":
    main()
