"""--wire jpeg: loaderd ships each sample's original file and gpud decodes
and transforms it with the same code, so an eval gives exactly what --wire
uint8 gives: the same summary counts and metrics, the same predictions.csv
byte for byte, the same failed files. The folder holds several formats
(written by PIL, as it_formats does), a resize + centre crop is applied,
and bad files fail on both sides: random bytes, a truncated JPEG whose
header is fine (loaderd cannot tell without decoding it: with jpeg it fails
at gpud, which reports it in its RESULT), and an empty file. Also: an idx:
dataset falls back to uint8 with one log line; a wrong --wire value is
refused with exit 2 (ddpipe train --wire jpeg: it_wire_train).

Without PIL (/usr/bin/python3's python3-pil) the test is skipped (77)."""
import csv
import os
import random
import subprocess
import sys
from ddp_it import *

try:
    from PIL import Image
except ImportError:
    print("python3-pil not installed: skipped")
    sys.exit(77)

# (extension, PIL mode, save options)
FORMATS = [
    (".jpg", "L", {"quality": 90}),
    (".jpeg", "RGB", {"quality": 95}),
    (".png", "L", {}),
    (".PNG", "P", {}),
    (".bmp", "RGB", {}),
    (".ppm", "RGB", {"format": "PPM"}),
    (".tif", "L", {}),
    (".webp", "RGB", {"quality": 80}),
    (".jpg", "L", {"format": "GIF"}),  # a GIF named .jpg
]

src = jpeg_folder(997)
wd = workdir("wire")
data = os.path.join(wd, "data")
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
k = 0
for c in classes:
    os.makedirs(os.path.join(data, c))
    for f in sorted(os.listdir(os.path.join(src, c)))[:4]:
        ext, mode, opts = FORMATS[k % len(FORMATS)]
        with Image.open(os.path.join(src, c, f)) as im:
            gray = im.convert("L")
        gray.convert(mode).save(os.path.join(data, c, "img%03d%s" % (k, ext)), **opts)
        k += 1
good = k
a_jpeg = read(os.path.join(src, classes[0], sorted(os.listdir(os.path.join(src, classes[0])))[0]),
              "rb")
rng = random.Random(15)
bad = {
    os.path.join(classes[0], "zz-corrupt.jpg"): bytes(rng.getrandbits(8) for _ in range(900)),
    os.path.join(classes[1], "zz-truncated.jpg"): a_jpeg[: len(a_jpeg) * 2 // 3],
    os.path.join(classes[2], "zz-empty.png"): b"",
}
for rel, blob in bad.items():
    with open(os.path.join(data, rel), "wb") as f:
        f.write(blob)
n = good + len(bad)

TRANSFORM = ["--resize", "32", "--crop", "28", "--predictions", "topk"]


def run(wire, workers):
    out = os.path.join(wd, "run-%s-w%d" % (wire, workers))
    # 2 workers: gpud decodes on 3 threads (OpenMP over the samples)
    threads = ["--decode-threads", "3"] if wire == "jpeg" and workers == 2 else []
    run_eval(data, out, workers, 5, extra=TRANSFORM + ["--wire", wire] + threads)
    assert_no_leftovers(out)
    return out


def rows(out):
    with open(os.path.join(out, "predictions.csv")) as f:
        return f.read()


def failed_paths(out):
    return sorted(f["path"] for f in summary(out).get("failed_files", []))


ref = run("uint8", 2)
s_ref = summary(ref)
check(s_ref["planned"] == n and s_ref["failed"] == len(bad) and s_ref["samples"] == good,
      "uint8 run: planned %s failed %s samples %s, want %d/%d/%d"
      % (s_ref["planned"], s_ref["failed"], s_ref["samples"], n, len(bad), good))
for workers in (1, 2):
    out = run("jpeg", workers)
    s = summary(out)
    for key in COUNT_KEYS:
        check(s.get(key) == s_ref.get(key), "--wire jpeg (%d workers): %s is %r, uint8 gives %r"
              % (workers, key, s.get(key), s_ref.get(key)))
    check(rows(out) == rows(ref), "--wire jpeg (%d workers): predictions.csv differs from "
          "--wire uint8's" % workers)
    check(failed_paths(out) == sorted(bad), "--wire jpeg: failed_files %s, want %s"
          % (failed_paths(out), sorted(bad)))
    for row in csv.DictReader(open(os.path.join(out, "predictions.csv"))):
        if row["path"] in bad:  # a failed row (no top-1) still carries its label
            check(row["label"] != "" and row["top1"] == "", "failed row %r" % row)
    logs = read(os.path.join(out, "logs", "loaderd.log"))
    check("--wire jpeg" in logs and "bytes per sample" in logs,
          "loaderd.log says nothing of --wire jpeg and its bytes per sample")
    gpud_logs = "".join(read(os.path.join(out, "logs", f))
                        for f in os.listdir(os.path.join(out, "logs")) if f.startswith("gpud"))
    # the truncated JPEG is read fine by loaderd and fails only when decoded
    check("did not decode" in gpud_logs and "truncated" in gpud_logs,
          "no gpud log names the truncated JPEG it could not decode")
    reasons = {f["path"]: f.get("reason", "") for f in s.get("failed_files", [])}
    trunc = os.path.join(classes[1], "zz-truncated.jpg")
    check("gpud" in reasons.get(trunc, ""),
          "the truncated JPEG's reason does not say gpud decoded it: %r" % reasons.get(trunc))

# idx: has no files: --wire jpeg keeps uint8 pixels, with one log line
idx = "idx:%s/t10k" % FMNIST
out_u8 = os.path.join(wd, "idx-uint8")
out_jp = os.path.join(wd, "idx-jpeg")
run_eval(idx, out_u8, 1, 16, extra=["--limit", "48", "--predictions", "topk"])
run_eval(idx, out_jp, 1, 16, extra=["--limit", "48", "--predictions", "topk", "--wire", "jpeg"])
check(rows(out_u8) == rows(out_jp), "idx: with --wire jpeg predicts otherwise than uint8")
check("idx: dataset" in read(os.path.join(out_jp, "logs", "loaderd.log")),
      "loaderd.log does not say an idx: dataset keeps uint8")
assert_no_leftovers(out_jp)

# bad input: one line naming the flag and its values, exit 2
p = subprocess.run(eval_cmd(data, os.path.join(wd, "bad"), extra=["--wire", "png"]),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 2 and "--wire png" in p.stderr and "uint8 or jpeg" in p.stderr
      and p.stderr.count("\n") == 1, "--wire png: rc %d, stderr %r" % (p.returncode, p.stderr))
p = subprocess.run([os.path.join(BIN, "ddpipe"), "train", "--data", data, "--model", "wideresnet",
                    "--out", os.path.join(wd, "train"), "--wire", "png"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 2 and "--wire png" in p.stderr and "uint8 or jpeg" in p.stderr
      and p.stderr.count("\n") == 1,
      "ddpipe train --wire png: rc %d, stderr %r" % (p.returncode, p.stderr))
p = subprocess.run([os.path.join(BIN, "loaderd"), "--data", data, "--bind", "ipc:///nonexistent/a",
                    "--reducer", "ipc:///nonexistent/b", "--wire", "gzip"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 2 and "--wire" in p.stderr and "uint8, jpeg" in p.stderr,
      "loaderd --wire gzip: rc %d, stderr %r" % (p.returncode, p.stderr))
print("%d files in %d formats + %d bad: --wire jpeg (1 and 2 workers) = --wire uint8 exactly"
      % (good, len(FORMATS), len(bad)))
print("1 passed, 0 failed")
