"""A dataset with corrupt, truncated, empty and non-JPEG files completes,
names each bad file, counts it as failed, and never shrinks N."""
import os
import random
import shutil
from ddp_it import *

src = jpeg_folder(997)
wd = workdir("corrupt")
data = os.path.join(wd, "data")
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
good = 0
for c in classes:
    os.makedirs(os.path.join(data, c))
    for f in sorted(os.listdir(os.path.join(src, c)))[:2]:
        shutil.copy(os.path.join(src, c, f), os.path.join(data, c, f))
        good += 1

a_jpeg = read(os.path.join(data, classes[0], sorted(os.listdir(os.path.join(data, classes[0])))[0]), "rb")
rng = random.Random(7)
bad = {
    os.path.join(classes[0], "zz-corrupt.jpg"): bytes(rng.getrandbits(8) for _ in range(900)),
    os.path.join(classes[1], "zz-truncated.jpg"): a_jpeg[: len(a_jpeg) // 2],
    os.path.join(classes[1], "zz-empty.jpg"): b"",
    os.path.join(classes[2], "zz-text.jpeg"): b"this is not an image\n" * 10,
    os.path.join(classes[2], "zz-garbled-header.png"): b"\x89PNG\r\n\x1a\n" + b"\0" * 40,
}
for rel, blob in bad.items():
    with open(os.path.join(data, rel), "wb") as f:
        f.write(blob)
n = good + len(bad)

for workers in (1, 2):
    out = os.path.join(wd, "run-w%d" % workers)
    p = run_eval(data, out, workers, 4, extra=["--predictions", "topk"])
    s = summary(out)
    check(s["planned"] == n, "planned %s, want %d (N must not shrink)" % (s["planned"], n))
    check(s["failed"] == len(bad), "failed %s, want %d" % (s["failed"], len(bad)))
    check(s["samples"] == good, "samples %s, want %d" % (s["samples"], good))
    named = {f["path"] for f in s.get("failed_files", [])}
    for rel in bad:
        check(rel in named, "summary.json failed_files does not name %s (has %s)" % (rel, named))
        logs = read(os.path.join(out, "logs", "loaderd.log"))
        check(rel in logs, "loaderd.log does not name %s" % rel)
    preds = read(os.path.join(out, "predictions.csv")).strip().split("\n")
    check(len(preds) == n + 1, "predictions.csv has %d rows, want %d + header" % (len(preds) - 1, n))
    for row in preds[1:]:  # a failed row (no top-1) still carries its label
        f = row.split(",")
        if f[1] in bad:
            check(f[2] != "" and f[3] == "", "failed row without its label: %r" % row)
    assert_no_leftovers(out)
# a dataset with fewer classes than the model predicts: a clear error, not a hang
few = os.path.join(wd, "three-classes")
for c in classes[:3]:
    shutil.copytree(os.path.join(data, c), os.path.join(few, c))
out = os.path.join(wd, "mismatch")
p = run_eval(few, out, 1, 4, expect_rc=None, timeout=120)
check(p.returncode != 0, "a 10-class model on a 3-class dataset exited 0")
check("3 classes" in p.stderr or "3 classes" in read(os.path.join(out, "logs", "reducerd.log")),
      "the class mismatch was not explained:\n" + p.stderr)
assert_no_leftovers(out)
print("1 passed, 0 failed")
