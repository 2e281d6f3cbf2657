"""An ImageFolder with images in every format torchvision's ImageFolder
accepts (.jpg .jpeg .png .ppm .pgm .bmp .tif .tiff .webp, upper-case
extensions too) plus GIFs and TIFFs under a wrong extension, evaluated end
to end: zero failed samples, and every losslessly stored image gets the
same prediction and loss as the same pixels stored as PNG.

The files are written here by PIL (/usr/bin/python3's python3-pil) from the
Fashion-MNIST JPEG folder; without PIL the test is skipped (77)."""
import csv
import os
import sys
from ddp_it import *

try:
    from PIL import Image
except ImportError:
    print("python3-pil not installed: skipped")
    sys.exit(77)

# (extension, PIL mode, save options, lossless)
FORMATS = [
    (".png", "L", {}, True),
    (".PNG", "P", {}, True),
    (".bmp", "L", {}, True),
    (".bmp", "RGB", {}, True),
    (".ppm", "RGB", {"format": "PPM"}, True),
    (".pgm", "L", {"format": "PPM"}, True),
    (".tif", "L", {}, True),
    (".tiff", "RGB", {"compression": "tiff_lzw"}, True),
    (".TIF", "CMYK", {}, False),  # CMYK -> RGB is not exact in 8 bits
    (".webp", "RGB", {"lossless": True}, True),
    (".webp", "RGB", {"quality": 80}, False),
    (".jpeg", "RGB", {"quality": 95}, False),
    (".jpg", "L", {"format": "GIF"}, True),   # a GIF named .jpg
    (".png", "RGB", {"format": "TIFF"}, True),  # a TIFF named .png
]

src = jpeg_folder(997)
wd = workdir("formats")
data, ref = os.path.join(wd, "data"), os.path.join(wd, "ref")
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
lossless, k = set(), 0
for c in classes:
    os.makedirs(os.path.join(data, c))
    os.makedirs(os.path.join(ref, c))
    for f in sorted(os.listdir(os.path.join(src, c)))[:3]:
        ext, mode, opts, exact = FORMATS[k % len(FORMATS)]
        with Image.open(os.path.join(src, c, f)) as im:
            gray = im.convert("L")
        stem = "img%03d" % k
        gray.convert(mode).save(os.path.join(data, c, stem + ext), **opts)
        gray.save(os.path.join(ref, c, stem + ".png"))
        if exact:
            lossless.add(os.path.join(c, stem))
        k += 1
n = k
check(n >= len(FORMATS), "only %d images made" % n)


def predictions(out):
    with open(os.path.join(out, "predictions.csv")) as f:
        return {os.path.splitext(r["path"])[0]: r for r in csv.DictReader(f)}


out = os.path.join(wd, "run")
run_eval(data, out, 2, 8, extra=["--predictions", "topk"])
s = summary(out)
check(s["failed"] == 0, "failed %s, want 0: %s" % (s["failed"], s.get("failed_files")))
check(s["samples"] == n and s["planned"] == n, "samples %s planned %s, want %d"
      % (s["samples"], s["planned"], n))
assert_no_leftovers(out)
out_ref = os.path.join(wd, "ref-run")
run_eval(ref, out_ref, 2, 8, extra=["--predictions", "topk"])
got, want = predictions(out), predictions(out_ref)
check(len(got) == n and set(got) == set(want), "predictions name other files than the PNG run")
same = 0
for stem in sorted(lossless):
    a, b = got[stem], want[stem]
    check(a["top1"] == b["top1"] and a["loss"] == b["loss"],
          "%s: top1 %s loss %s, the PNG copy gives top1 %s loss %s (pixels must be identical)"
          % (stem, a["top1"], a["loss"], b["top1"], b["loss"]))
    same += 1
assert_no_leftovers(out_ref)
print("%d images in %d formats, 0 failed; %d lossless ones predict as their PNG copy"
      % (n, len(FORMATS), same))
print("1 passed, 0 failed")
