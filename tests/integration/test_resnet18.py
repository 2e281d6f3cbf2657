"""torchvision resnet18 through the whole pipeline on an ImageFolder of RGB
JPEGs with Resize + CenterCrop: every sample's top-5 equal to PyTorch's
(golden from tests/golden/gen_r18_folder_ref.py), losses within 1e-5, and
predictions.csv identical for 1 and 3 workers. 1000 classes, one image each.

The 1-worker run covers all 1000 images; the 3-worker run (batch 7) the
first 300 of them (--limit 300: 42 batches of 7 and a last one of 6, over 3
ranks), still against the golden, and its predictions.csv equals the first
300 rows of the 1-worker run's. The worker count's effect (which rank
computes which batch, the merge in sample order) shows on 300 samples as
on 1000; computing all 1000 a second time cost 30 s here."""
import csv
import hashlib
import os
import shutil
import subprocess
from ddp_it import *

GOLDEN = os.path.join(SRC, "tests", "golden")
ref = load_json(os.path.join(GOLDEN, "r18_folder1000_ref.json"))
weights = os.path.join(GOLDEN, "resnet18.safetensors")
check(hashlib.md5(read(weights, "rb")).hexdigest() == ref["weights_md5"],
      "resnet18 golden weights changed: rerun tests/golden/gen_r18_folder_ref.py")
wd = workdir("resnet18")
data = os.path.join(wd, "data")
subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "--synthetic", "1000", data, "--size", "80x60",
                "--classes", "1000"], check=True, stdout=subprocess.DEVNULL)
h = hashlib.md5()
for c in sorted(os.listdir(data)):
    for f in sorted(os.listdir(os.path.join(data, c))):
        h.update(read(os.path.join(data, c, f), "rb"))
check(h.hexdigest() == ref["files_md5"], "ddpipe-mkjpeg made different JPEGs than the golden's")

model = ["--model", "resnet18", "--weights", weights, "--resize", "73", "--crop", "64"]
# each sample's label is its class folder's index in sorted order
# (torchvision's ImageFolder): the golden's counts for a prefix follow
classes = sorted({p.split("/")[0] for p in ref["paths"]})
labels = [classes.index(p.split("/")[0]) for p in ref["paths"]]


def correct(n, k):
    return sum(labels[i] in ref["top5"][i][:k] for i in range(n))


check(correct(1000, 1) == ref["correct_top1"] and correct(1000, 5) == ref["correct_top5"],
      "labels from the golden's paths do not give its own counts")
outs = []
for workers, batch, n in ((1, 16, 1000), (3, 7, 300)):
    out = os.path.join(wd, "w%d" % workers)
    extra = ["--predictions", "topk"] + (["--limit", str(n)] if n < 1000 else [])
    run_eval(data, out, workers, batch, extra=extra, model_args=model, timeout=300)
    s = summary(out)
    want = {"samples": n, "correct_top1": correct(n, 1), "correct_top5": correct(n, 5)}
    for k in ("samples", "correct_top1", "correct_top5"):
        check(s[k] == want[k], "%d workers: %s %s, PyTorch %s" % (workers, k, s[k], want[k]))
    with open(os.path.join(out, "predictions.csv")) as f:
        rows = list(csv.DictReader(f))
    check([r["path"] for r in rows] == ref["paths"][:n], "sample order differs from torchvision's ImageFolder")
    check([int(r["label"]) for r in rows] == labels[:n], "labels differ from torchvision's ImageFolder")
    diff = [i for i, r in enumerate(rows) if [int(r["top%d" % k]) for k in range(1, 6)] != ref["top5"][i]]
    check(not diff, "top-5 differs from PyTorch at samples %s" % diff[:10])
    worst = max(abs(float(r["loss"]) - l) / abs(l) for r, l in zip(rows, ref["loss"]))
    check(worst < 1e-5, "loss differs from PyTorch by %.2e (relative)" % worst)
    print("%d workers: all %d top-5 lists equal PyTorch's, worst loss diff %.1e" % (workers, n, worst), flush=True)
    outs.append(read(os.path.join(out, "predictions.csv")).splitlines(True))
    assert_no_leftovers(out)
check(len(outs[0]) == 1001 and len(outs[1]) == 301, "predictions.csv rows %d, %d" % tuple(map(len, outs)))
check(outs[0][:301] == outs[1], "predictions.csv differs between 1 and 3 workers")
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
