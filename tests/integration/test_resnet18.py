"""torchvision resnet18 through the whole pipeline on an ImageFolder of RGB
JPEGs with Resize + CenterCrop: every sample's top-5 equal to PyTorch's
(golden from tests/golden/gen_r18_folder_ref.py), losses within 1e-5, and
predictions.csv identical for 1 and 3 workers. 1000 classes, one image each."""
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
outs = []
for workers, batch in ((1, 16), (3, 7)):
    out = os.path.join(wd, "w%d" % workers)
    run_eval(data, out, workers, batch, extra=["--predictions", "topk"], model_args=model, timeout=300)
    s = summary(out)
    for k in ("samples", "correct_top1", "correct_top5"):
        check(s[k] == ref[k], "%d workers: %s %s, PyTorch %s" % (workers, k, s[k], ref[k]))
    with open(os.path.join(out, "predictions.csv")) as f:
        rows = list(csv.DictReader(f))
    check([r["path"] for r in rows] == ref["paths"], "sample order differs from torchvision's ImageFolder")
    diff = [i for i, r in enumerate(rows) if [int(r["top%d" % k]) for k in range(1, 6)] != ref["top5"][i]]
    check(not diff, "top-5 differs from PyTorch at samples %s" % diff[:10])
    worst = max(abs(float(r["loss"]) - l) / abs(l) for r, l in zip(rows, ref["loss"]))
    check(worst < 1e-5, "loss differs from PyTorch by %.2e (relative)" % worst)
    print("%d workers: all 1000 top-5 lists equal PyTorch's, worst loss diff %.1e" % (workers, worst), flush=True)
    outs.append(read(os.path.join(out, "predictions.csv")))
    assert_no_leftovers(out)
check(outs[0] == outs[1], "predictions.csv differs between 1 and 3 workers")
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
