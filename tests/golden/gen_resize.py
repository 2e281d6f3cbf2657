#!/usr/bin/python3
"""Goldens for loaderd's PIL-compatible resize (tests/loaderd/test_resize.c).

Writes tests/golden/loader/resize/: a few deterministic source images (PPM/PGM)
and PIL's Image.resize((w, h), Image.BILINEAR) of each for a table of sizes,
up and down, gray and RGB, plus manifest.txt with one case per line:
    SRC DST_W DST_H OUT
and sizes.txt with torchvision 0.14's Resize(size) output size rule
(shorter side -> size, longer -> int(size * long / short)) for a table of
image sizes:  W H SIZE OUT_W OUT_H.

Run with /usr/bin/python3 (Debian's python3-pil); needs only PIL and numpy.
"""
import os

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "loader", "resize")


def source(w, h, mode, seed):
    """Smooth gradients, a hard edge and noise: exercises every rounding."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = (xx * 255.0 / max(w - 1, 1) * 0.6 + yy * 255.0 / max(h - 1, 1) * 0.4)
    base[(xx > w // 3) & (yy < h // 2)] = 240
    chans = 3 if mode == "RGB" else 1
    img = np.stack([base * (0.5 + 0.25 * c) for c in range(chans)], axis=-1)
    img = img + rng.integers(-40, 41, img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    return Image.fromarray(img[..., 0] if chans == 1 else img, mode)


def main():
    os.makedirs(OUT, exist_ok=True)
    sources = {
        "rgb97x61": source(97, 61, "RGB", 1),
        "gray64x40": source(64, 40, "L", 2),
        "rgb180x120": source(180, 120, "RGB", 3),
        "gray151x233": source(151, 233, "L", 4),
        "rgb3x2": source(3, 2, "RGB", 5),
        "gray1x1": source(1, 1, "L", 6),
        "rgb250x187": source(250, 187, "RGB", 7),
    }
    sizes = {
        "rgb97x61": [(48, 30), (13, 7), (1, 1), (96, 60), (98, 62), (97, 30), (40, 61),
                     (150, 100), (200, 3), (3, 200), (97, 61), (33, 21)],
        "gray64x40": [(32, 20), (21, 13), (160, 100), (64, 41), (7, 40), (64, 5), (1, 1)],
        "rgb180x120": [(90, 60), (37, 23), (179, 119), (100, 100), (17, 113), (200, 133),
                       (128, 85), (9, 6)],
        "gray151x233": [(75, 116), (256, 394), (150, 232), (40, 61), (151, 100)],
        "rgb3x2": [(7, 5), (1, 1), (2, 2), (3, 9), (11, 2)],
        "gray1x1": [(5, 3), (1, 4)],
        "rgb250x187": [(171, 128), (128, 96), (85, 64), (125, 93)],
    }
    lines = []
    for name, img in sources.items():
        ext = "ppm" if img.mode == "RGB" else "pgm"
        img.save(os.path.join(OUT, f"{name}.{ext}"))
        for (w, h) in sizes[name]:
            out = f"{name}_to_{w}x{h}.{ext}"
            img.resize((w, h), Image.BILINEAR).save(os.path.join(OUT, out))
            lines.append(f"{name}.{ext} {w} {h} {out}")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # torchvision 0.14 transforms.functional._compute_resized_output_size
    rows = []
    for (w, h) in [(500, 375), (375, 500), (500, 333), (640, 480), (28, 28), (30, 28),
                   (1, 1000), (1000, 1), (333, 500), (257, 256), (255, 1023), (1920, 1080),
                   (97, 61), (61, 97), (800, 600), (100, 100)]:
        for size in [1, 7, 32, 224, 256, 299, 480]:
            short, long_ = (w, h) if w <= h else (h, w)
            nl = int(size * long_ / short)
            ow, oh = (size, nl) if w <= h else (nl, size)
            rows.append(f"{w} {h} {size} {ow} {oh}")
    with open(os.path.join(OUT, "sizes.txt"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
