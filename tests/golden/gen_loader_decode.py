#!/usr/bin/python3
"""Goldens for loaderd's decoder (tests/loaderd/test_decode.c).

Writes tests/golden/loader/decode/: small JPEGs (baseline 4:2:0, 4:2:2,
4:4:4, progressive, optimised Huffman, grayscale, Adobe CMYK) and PNGs (RGB,
RGBA, palette, palette + tRNS, L, LA, 1-bit, 16-bit gray) written by PIL,
each with PIL's Image.open(f).convert("RGB") as a PPM, and manifest.txt:
    SOURCE GOLDEN
ycck.jpg is an input made once with TurboJPEG's tjCompress2(TJPF_CMYK)
(an Adobe YCCK JPEG, which PIL cannot write); its golden is PIL's decode.

Run with /usr/bin/python3 (Debian's python3-pil); needs only PIL and numpy.
"""
import os

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "loader", "decode")


def picture(w, h, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 4 % 256, yy * 5 % 256, (xx * yy) % 256], axis=-1).astype(np.int32)
    img[(xx - w // 2) ** 2 + (yy - h // 2) ** 2 < (h // 3) ** 2] = (250, 30, 90)
    img += rng.integers(-20, 21, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def main():
    os.makedirs(OUT, exist_ok=True)
    rgb = picture(64, 48, 1)
    odd = picture(61, 37, 2)
    files = {
        "base420.jpg": (rgb, dict(quality=90)),
        "odd420.jpg": (odd, dict(quality=85)),
        "base422.jpg": (rgb, dict(quality=90, subsampling=1)),
        "base444.jpg": (odd, dict(quality=95, subsampling=0)),
        "progressive.jpg": (odd, dict(quality=90, progressive=True)),
        "optimized.jpg": (rgb, dict(quality=75, optimize=True)),
        "gray.jpg": (odd.convert("L"), dict(quality=90)),
        "cmyk.jpg": (rgb.convert("CMYK"), dict(quality=90)),
        "rgb.png": (odd, {}),
        "rgba.png": (Image.merge("RGBA", odd.split() + (odd.convert("L"),)), {}),
        "palette.png": (odd.quantize(37), {}),
        "palette_trns.png": (odd.quantize(16), dict(transparency=3)),
        "gray.png": (odd.convert("L"), {}),
        "gray_alpha.png": (odd.convert("LA"), {}),
        "bilevel.png": (odd.convert("1"), {}),
        "gray16.png": (Image.fromarray(
            (np.arange(61 * 37, dtype=np.uint16).reshape(37, 61) * 7).astype(np.uint16)), {}),
    }
    lines = []
    for name, (img, opts) in files.items():
        img.save(os.path.join(OUT, name), **opts)
        lines.append(name)
    lines.append("ycck.jpg")  # committed input, see the docstring
    manifest = []
    for name in lines:
        golden = name.rsplit(".", 1)[0] + "_" + name.rsplit(".", 1)[1] + ".ppm"
        Image.open(os.path.join(OUT, name)).convert("RGB").save(os.path.join(OUT, golden))
        manifest.append(f"{name} {golden}")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
