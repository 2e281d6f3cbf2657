#!/usr/bin/python3
"""PyTorch's predictions for the resnet18 integration test (it_resnet18).

The folder: `ddpipe-mkjpeg --synthetic 1000 OUT --size 80x60 --classes 1000`
(1000 classes, one photo-like JPEG each, deterministic bytes). The model:
torchvision resnet18 with the committed golden weights
tests/golden/resnet18.safetensors (1000 classes, F16-rounded values).
The transform: Resize(73) + CenterCrop(64) + ToTensor + ImageNet Normalize,
evaluated by tests/golden/ref_eval.py exactly as a PyTorch user would.

usage: gen_r18_folder_ref.py BUILD_BIN_DIR     (writes tests/golden/r18_folder1000_ref.json)
"""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
bindir = sys.argv[1]
work = tempfile.mkdtemp(prefix="r18ref-")
data = os.path.join(work, "data")
mk = [os.path.join(bindir, "ddpipe-mkjpeg"), "--synthetic", "1000", data, "--size", "80x60",
      "--classes", "1000"]
subprocess.run(mk, check=True, stdout=subprocess.DEVNULL)
h = hashlib.md5()
for c in sorted(os.listdir(data)):
    for f in sorted(os.listdir(os.path.join(data, c))):
        with open(os.path.join(data, c, f), "rb") as fh:
            h.update(fh.read())
preds = os.path.join(work, "ref.csv")
weights = os.path.join(here, "resnet18.safetensors")
out = subprocess.run([sys.executable, os.path.join(here, "ref_eval.py"), "--data", data, "--weights", weights,
                      "--arch", "resnet18", "--num-classes", "1000", "--resize", "73", "--crop", "64",
                      "--out", preds], check=True, stdout=subprocess.PIPE, text=True).stdout
summary = json.loads(out.strip().splitlines()[-1])
with open(preds) as f:
    rows = list(csv.DictReader(f))
with open(weights, "rb") as f:
    wmd5 = hashlib.md5(f.read()).hexdigest()
golden = {
    "samples": summary["samples"], "correct_top1": summary["correct_top1"],
    "correct_top5": summary["correct_top5"], "loss_mean": summary["loss"],
    "top5": [[int(r["top%d" % k]) for k in range(1, 6)] for r in rows],
    "loss": [float(r["loss"]) for r in rows],
    "paths": [r["path"] for r in rows],
    "files_md5": h.hexdigest(), "weights_md5": wmd5,
    "mkjpeg": "ddpipe-mkjpeg --synthetic 1000 OUT --size 80x60 --classes 1000",
    "transform": "Resize(73), CenterCrop(64), ToTensor, Normalize(ImageNet)",
    "oracle": "torch %s, torchvision %s" % (__import__("torch").__version__,
                                           __import__("torchvision").__version__),
}
with open(os.path.join(here, "r18_folder1000_ref.json"), "w") as f:
    json.dump(golden, f, separators=(",", ":"))
print("wrote tests/golden/r18_folder1000_ref.json:", summary)
