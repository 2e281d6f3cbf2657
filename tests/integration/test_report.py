"""The run directory of a real 2-worker eval: every plot is a valid PNG and
SVG with the expected series (tab10 colours of plot.c: "all workers" and
one line per rank in throughput; an eval's single epoch as bars, top-1 and
top-5 in accuracy, no one-point line plot), the confusion
heat map and F1 bars exist, classification_report.txt is byte for byte what
sklearn prints for predictions.csv (when /usr/bin/python3 has sklearn), and
an unwritable run directory is a clear error (path and errno), from
reporterd and from ddpipe eval."""
import csv
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from ddp_it import *

# plot.c's series colours (matplotlib tab10), as cairo writes them in SVG
SERIES = ["rgb(12.2%,46.7%,70.6%)", "rgb(100%,49.8%,5.5%)", "rgb(17.3%,62.7%,17.3%)"]
SERIES_RGB = [(31, 119, 180), (255, 127, 14), (44, 160, 44)]


def png_info(path):
    """(width, height) after checking the signature, the chunk CRCs and that
    the image data inflates to the size IHDR promises."""
    data = read(path, "rb")
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s: not a PNG" % path)
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        check(zlib.crc32(kind + body) == crc, "%s: bad CRC in %r" % (path, kind))
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    check(w and kind == b"IEND", "%s: no IHDR or IEND" % path)
    bpp = {2: 3, 6: 4}[color] * depth // 8
    check(len(zlib.decompress(idat)) == h * (1 + w * bpp), "%s: pixel data size" % path)
    return w, h


def svg_strokes(path):
    root = ET.parse(path).getroot()
    check(root.tag.endswith("svg"), "%s: root is %s" % (path, root.tag))
    text = read(path)
    return {c: text.count("stroke:%s;" % c) for c in SERIES}


def svg_fills(path):
    text = read(path)
    return {c: text.count("fill:%s;" % c) for c in SERIES}


def pixels_where(path, pred):
    """How many pixels satisfy pred (PIL when /usr/bin/python3 has it)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    im = Image.open(path).convert("RGB")
    return sum(1 for p in im.getdata() if pred(p))


wd = workdir("report")
out = os.path.join(wd, "run")
run_eval("idx:%s/t10k" % FMNIST, out, workers=2, batch=16,
         extra=["--predictions", "topk", "--limit", "4000"])

for stem in ("loss", "accuracy", "throughput", "confusion", "f1"):
    w, h = png_info(os.path.join(out, stem + ".png"))
    check(w >= 400 and h >= 300, "%s.png is %dx%d" % (stem, w, h))
    svg_strokes(os.path.join(out, stem + ".svg"))
# one epoch: no single-point line plot, but a bar per value in its series colour
for stem, bars in (("accuracy", SERIES[:2]), ("loss", SERIES[:1])):
    strokes = svg_strokes(os.path.join(out, stem + ".svg"))
    fills = svg_fills(os.path.join(out, stem + ".svg"))
    check(all(fills[c] >= 1 for c in bars) and not any(strokes.values()),
          "%s.svg: want bars (fills %r) and no series line (strokes %r)" % (stem, fills, strokes))
tp = svg_strokes(os.path.join(out, "throughput.svg"))
check(all(tp[c] >= 2 for c in SERIES), "throughput.svg lacks all-workers/rank 0/rank 1: %r" % tp)
for rgb in SERIES_RGB:
    n = pixels_where(os.path.join(out, "throughput.png"), lambda p: p == rgb)
    check(n is None or n > 50, "throughput.png: %s drawn on %s pixels" % (rgb, n))
# the diagonal of a good model: ten dark-blue cells of about 50x50 pixels
dark = pixels_where(os.path.join(out, "confusion.png"), lambda p: p[2] > 90 and p[0] < 60 and p[1] < 90)
check(dark is None or dark > 10 * 1500, "confusion.png has %s dark-blue pixels" % dark)
print("plots: valid PNG/SVG with the expected series", flush=True)

# classification_report.txt against sklearn on predictions.csv
try:
    from sklearn.metrics import classification_report
except ImportError:
    classification_report = None
    print("sklearn not importable here: report comparison skipped", flush=True)
if classification_report:
    s = summary(out)
    names = [c["name"] for c in s["per_class"]]
    with open(os.path.join(out, "predictions.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["top1"] != ""]
    check(len(rows) == s["samples"] == 4000, "%d prediction rows, summary %d" % (len(rows), s["samples"]))
    want = classification_report([int(r["label"]) for r in rows], [int(r["top1"]) for r in rows],
                                 labels=list(range(len(names))), target_names=names, digits=2,
                                 zero_division=0)
    got = read(os.path.join(out, "classification_report.txt"))
    check(got.rstrip("\n") == want.rstrip("\n"),
          "classification_report.txt differs from sklearn:\n%s\n--- sklearn:\n%s" % (got, want))
    print("classification_report.txt == sklearn's", flush=True)

# an unwritable run directory: reporterd and ddpipe eval say which and why
ro = os.path.join(wd, "readonly")
os.makedirs(ro)
os.chmod(ro, 0o555)
os.chmod(wd, 0o755)
drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.getuid() == 0 else []
p = subprocess.run(drop + [os.path.join(BIN, "reporterd"), "--sub", "tcp://127.0.0.1:1",
                           "--reducer", "tcp://127.0.0.1:1", "--out", ro],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
check(p.returncode != 0, "reporterd accepted a read-only run directory:\n" + p.stdout)
check(ro in p.stdout and "Permission denied" in p.stdout and "errno 13" in p.stdout,
      "reporterd's error lacks the path or errno:\n" + p.stdout)
p = subprocess.run(drop + eval_cmd("idx:%s/t10k" % FMNIST, ro, extra=["--limit", "10"]),
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
check(p.returncode != 0 and ro in p.stdout and "Permission denied" in p.stdout,
      "ddpipe eval with a read-only --out: exit %d\n%s" % (p.returncode, p.stdout))
print("read-only run directory: clear errors (%s)" % p.stdout.strip().splitlines()[0], flush=True)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
