"""Many classes cost memory by samples, not classes² (issue 28 item 7).

The demo WideResNet with its fc grown to 4,000 outputs (rows 0..9 the
demo's, row 3999 the demo's "Shirt" row lifted by +1 so some samples are
predicted outside the dataset, every other row zero weights and bias -100)
evaluates an ImageFolder of 200 Fashion-MNIST JPEGs whose folders "0".."9"
are outputs 0..9 (--classes numeric). Checked:

1. peak memory: the largest max RSS of ddpipe and every daemon (wait4 on
   ddpipe: Linux folds the waited-for daemons' peak into it) exceeds that
   of the same job with the 10-output demo model by less than 64 MiB. A
   dense 4,000² uint64 confusion matrix is 122 MiB per copy (main: ~380 MB
   in reducerd, ~540 MB in reporterd).
2. the counts: summary.json's per_class (precision, recall, f1, support)
   and correct_top1 equal what predictions.csv's labels and top-1 give, the
   report has the "(not in the dataset)" column's effect (micro avg).
3. --predictions probs with 4,000 outputs (more than the 1,024 classes the
   probability metrics take) is refused before anything starts: exit 2, a
   message naming the limit, no run directory written.
"""
import csv
import json
import os
import struct
import subprocess
import time
from ddp_it import *

NC = 4000
OTHER = NC - 1          # the demo's Shirt row, lifted: predictions outside the dataset
SHIRT = 6
BOUND_KIB = 64 * 1024

wd = workdir("many-classes")
base = jpeg_folder(200)
folders = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
check(len(folders) == 10, "fmnist folder has %d classes" % len(folders))
data = os.path.join(wd, "numeric")
os.makedirs(data)
for i, f in enumerate(folders):     # folder "i" is model output i
    os.symlink(os.path.join(base, f), os.path.join(data, str(i)))


def grown_weights(path):
    """The demo weights with fc.weight NC x C and fc.bias NC (struct only)."""
    with open(DEMO_WEIGHTS, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", None) or {}
    body = 8 + hlen
    blobs = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        blobs[name] = (t["dtype"], t["shape"], raw[body + a:body + b])
    _, (rows, cols), w = blobs["fc.weight"]
    _, _, bias = blobs["fc.bias"]
    check(rows == 10 and blobs["fc.weight"][0] == "F32", "demo fc.weight %r" % (blobs["fc.weight"][:2],))
    row = lambda r: w[r * cols * 4:(r + 1) * cols * 4]
    b = list(struct.unpack("<10f", bias))
    zero = bytes(cols * 4)
    blobs["fc.weight"] = ("F32", [NC, cols],
                          w + zero * (NC - 11) + row(SHIRT))
    blobs["fc.bias"] = ("F32", [NC], struct.pack("<%df" % NC, *(b + [-100.0] * (NC - 11) + [b[SHIRT] + 1.0])))
    out_header, data_parts, off = {"__metadata__": dict(meta, num_classes=str(NC))}, [], 0
    for name, (dtype, shape, blob) in blobs.items():
        out_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        data_parts.append(blob)
        off += len(blob)
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(data_parts))
    return path


def peak_of(out, weights, extra):
    """The job in a child Python that reports its own children's max RSS."""
    helper = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1], 'w'), timeout=300)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    cmd = eval_cmd(data, out, 1, 32, extra, ["--model", "wideresnet", "--weights", weights,
                                             "--channels", "16,32,64,128"])
    errf = out + ".stderr"
    t0 = time.time()
    p = subprocess.run(["/usr/bin/python3", "-c", helper, errf] + cmd, stdout=subprocess.PIPE,
                       text=True, timeout=330)
    check(p.returncode == 0, "helper failed: %s" % p.stdout)
    rc, kib = (int(x) for x in p.stdout.split())
    print("ran %s in %.1fs (exit %d, peak RSS %d MiB)" % (" ".join(cmd[2:]), time.time() - t0, rc,
                                                         kib // 1024), flush=True)
    check(rc == 0, "%s: exit %d\n%s" % (" ".join(cmd), rc, read(errf)))
    return kib


weights = grown_weights(os.path.join(wd, "wrn-4000.safetensors"))
few_out, many_out = os.path.join(wd, "ten"), os.path.join(wd, "many")
few = peak_of(few_out, DEMO_WEIGHTS, ["--predictions", "topk"])
many = peak_of(many_out, weights, ["--predictions", "topk", "--classes", "numeric"])

# 2. the counts, from predictions.csv
with open(os.path.join(many_out, "predictions.csv")) as f:
    rows = list(csv.DictReader(f))
s = summary(many_out)
check(len(rows) == 200 == s["samples"], "%d rows, %s samples, want 200" % (len(rows), s["samples"]))
pairs = [(int(r["label"]), int(r["top1"])) for r in rows]
outside = sum(1 for _, p in pairs if p == OTHER)
check(0 < outside < 200, "%d samples predicted as output %d, want some, not all" % (outside, OTHER))
check(all(p < 10 or p == OTHER for _, p in pairs), "a top-1 outside 0..9 and %d" % OTHER)
check(s["correct_top1"] == sum(1 for l, p in pairs if l == p), "correct_top1 %s" % s["correct_top1"])
check(len(s["per_class"]) == 10, "per_class has %d rows, want the 10 present" % len(s["per_class"]))
for c, got in enumerate(s["per_class"]):
    tp = sum(1 for l, p in pairs if l == c == p)
    support = sum(1 for l, _ in pairs if l == c)
    predicted = sum(1 for _, p in pairs if p == c)
    prec = tp / predicted if predicted else 0.0
    rec = tp / support if support else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    check(got["name"] == str(c) and got["support"] == support, "class %d: %r" % (c, got))
    for key, want in (("precision", prec), ("recall", rec), ("f1", f1)):
        check(abs(got[key] - want) < 1e-12, "class %d %s %r, predictions.csv gives %r" % (c, key, got[key], want))
report = read(os.path.join(many_out, "classification_report.txt"))
check("micro avg" in report and "(not in the dataset)" not in report, "report:\n%s" % report)
print("counts: %d samples, %d predicted outside the dataset; per_class as predictions.csv says"
      % (len(rows), outside), flush=True)

# 1. memory
print("peak RSS: 10 outputs %d MiB, %d outputs %d MiB" % (few // 1024, NC, many // 1024), flush=True)
check(many - few < BOUND_KIB, "%d outputs peak at %d MiB, %d MiB above 10 outputs (bound %d MiB): "
      "memory grows with classes" % (NC, many // 1024, (many - few) // 1024, BOUND_KIB // 1024))

# 3. --predictions probs over its class limit: refused at once
probs_out = os.path.join(wd, "probs")
t0 = time.time()
p = subprocess.run(eval_cmd(data, probs_out, 1, 32, ["--predictions", "probs", "--classes", "numeric"],
                            ["--model", "wideresnet", "--weights", weights, "--channels", "16,32,64,128"]),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
check(p.returncode == 2, "--predictions probs with %d outputs: exit %d, want 2\n%s" % (NC, p.returncode, p.stderr))
check("1024" in p.stderr and "--predictions" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
      "the refusal should be one line naming the limit:\n%s" % p.stderr)
check(not os.path.exists(os.path.join(probs_out, "logs")) and
      not os.path.exists(os.path.join(probs_out, "summary.json")),
      "daemons ran before the refusal: %s" % (os.listdir(probs_out) if os.path.isdir(probs_out) else []))
print("--predictions probs with %d outputs refused in %.1fs: %s" % (NC, time.time() - t0, p.stderr.strip()),
      flush=True)
print("PASS")
