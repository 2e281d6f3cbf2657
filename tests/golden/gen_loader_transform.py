#!/usr/bin/python3
"""Goldens for loaderd's whole sample pipeline (tests/loaderd/test_transform.c).

Writes tests/golden/loader/transform/:
  folder/          a small ImageFolder (RGB, portrait, gray and CMYK JPEGs, a PNG)
  manifest.txt     "cfg K RESIZE CROP CHANNELS" lines, then "sample I LABEL PATH"
  cfgK_I.pgm       torchvision's output for sample I under config K:
                   ImageFolder(loader=PIL convert("RGB")) + [Grayscale(1) when
                   CHANNELS is 1] + Resize(RESIZE) + CenterCrop(CROP) +
                   PILToTensor(), the C x H x W uint8 tensor stored as a
                   W x (C*H) PGM (planes stacked)
  idx_I.pgm        Fashion-MNIST t10k sample I as torchvision's FashionMNIST
                   gives it (Image.fromarray(x, mode="L")) + Grayscale(3) +
                   Resize(40) + CenterCrop(36), when the dataset is installed
Run with /usr/bin/python3 (Debian's python3-torchvision 0.14, python3-pil).
"""
import gzip
import os

import numpy as np
import torchvision
from PIL import Image
from torchvision import transforms as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "loader", "transform")
FASHION = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

CONFIGS = [(64, 56, 3), (64, 56, 1), (100, 120, 3), (0, 50, 3), (47, 31, 3), (47, 31, 1)]


def picture(w, h, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 3 % 256, yy * 4 % 256, (xx + yy) * 2 % 256], -1).astype(np.int32)
    img[(xx - w // 3) ** 2 + (yy - h // 2) ** 2 < (min(w, h) // 4) ** 2] = (20, 220, 60)
    img += rng.integers(-25, 26, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def save_chw(t, path):
    c, h, w = t.shape
    Image.fromarray(t.numpy().reshape(c * h, w), "L").save(path)


def pipeline(resize, crop, channels):
    tl = [T.Grayscale(1)] if channels == 1 else []
    if resize:
        tl.append(T.Resize(resize))
    if crop:
        tl.append(T.CenterCrop(crop))
    tl.append(T.PILToTensor())
    return T.Compose(tl)


def main():
    folder = os.path.join(OUT, "folder")
    for d in ("a", "b"):
        os.makedirs(os.path.join(folder, d), exist_ok=True)
    picture(120, 90, 1).save(os.path.join(folder, "a", "land.jpg"), quality=90)
    picture(75, 110, 2).save(os.path.join(folder, "a", "port.jpg"), quality=85, progressive=True)
    picture(90, 90, 3).convert("L").save(os.path.join(folder, "b", "gray.jpg"), quality=90)
    picture(80, 60, 4).convert("CMYK").save(os.path.join(folder, "b", "cmyk.jpg"), quality=90)
    picture(20, 12, 5).save(os.path.join(folder, "b", "tiny.png"))

    lines = []
    for k, (resize, crop, channels) in enumerate(CONFIGS):
        lines.append(f"cfg {k} {resize} {crop} {channels}")
        ds = torchvision.datasets.ImageFolder(folder, transform=pipeline(resize, crop, channels))
        for i in range(len(ds)):
            save_chw(ds[i][0], os.path.join(OUT, f"cfg{k}_{i}.pgm"))
    for i, (path, label) in enumerate(ds.samples):
        lines.append(f"sample {i} {label} {os.path.relpath(path, folder)}")

    if os.path.exists(FASHION):
        raw = gzip.open(FASHION).read()
        images = np.frombuffer(raw[16:], np.uint8).reshape(-1, 28, 28)
        tf = T.Compose([T.Grayscale(3), T.Resize(40), T.CenterCrop(36), T.PILToTensor()])
        for i in range(3):
            save_chw(tf(Image.fromarray(images[i], mode="L")), os.path.join(OUT, f"idx_{i}.pgm"))
        lines.append("idx 40 36 3 3")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
