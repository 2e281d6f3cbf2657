#!/usr/bin/python3
"""Goldens of it_models (every architecture gpud implements, through
`ddpipe eval`) and of `ddpipe models`' parameter counts. Run with Debian's
/usr/bin/python3 (torch 1.13, torchvision 0.14):

    gen_models.py BUILD_BIN_DIR      (writes tests/golden/models_ref.json)

"params": for each architecture built with its constructor's defaults
(torchvision's resnet18/34/50 and densenet121: 1000 classes; the seed
WideResNet: 10 classes, widths 16,160,320,640, 1 input channel),
sum(p.numel() for p in model.parameters()) and the buffers' numel
(num_batches_tracked excluded), which `ddpipe models --json` must print.

"eval": for each architecture, PyTorch's per-sample top-k and
cross-entropy on a few images, evaluated by ref_eval.py exactly as a
PyTorch user would (ImageFolder + PIL + the transform):
  resnet18/34/50  4 JPEGs of `ddpipe-mkjpeg --synthetic 4 OUT --size 80x60
                  --classes 4`, 4-class head, the default transform
                  Resize(256), CenterCrop(224), ToTensor, Normalize(ImageNet)
  densenet121     the same JPEGs, Resize(73), CenterCrop(64) (densenet at
                  224 is slow on a CPU; adaptive pooling takes 64x64)
  wideresnet      the first 40 Fashion-MNIST test images as JPEGs
                  (`ddpipe-mkjpeg idx:t10k OUT --count 40`), 10 classes,
                  Grayscale + ToTensor (its default)
The weights are too big to commit: each tensor is synthesised from its
name (synth() of gen_parity.py; tests/integration/ddp_synth.py is the
numpy twin the test uses) and "manifest" lists the state_dict's names and
shapes; "logit_scale" is each sample's largest |logit|. Samples whose top logits are within ref_eval.py's NEAR_TIE are
listed ("near_ties"); the generator fails if any is, so that the test can
require every top-k list equal.
"""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from gen_parity import save_safetensors, synth  # noqa: E402
import ref_eval  # noqa: E402
import seed_models  # noqa: E402
import torch  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist"
CASES = [
    # arch, data kind, classes, ref_eval transform args, ddpipe eval args
    ("resnet18", "synthetic", 4, [], []),
    ("resnet34", "synthetic", 4, [], []),
    ("resnet50", "synthetic", 4, [], []),
    ("densenet121", "synthetic", 4, ["--resize", "73", "--crop", "64"],
     ["--resize", "73", "--crop", "64"]),
    ("wideresnet", "fmnist", 10, [], []),
]
MKJPEG = {"synthetic": ["--synthetic", "4", "{out}", "--size", "80x60", "--classes", "4"],
          "fmnist": ["idx:%s/t10k" % FMNIST, "{out}", "--count", "40"]}


def folder_md5(root):
    h = hashlib.md5()
    for c in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, c)):
            for f in sorted(os.listdir(os.path.join(root, c))):
                with open(os.path.join(root, c, f), "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def param_counts():
    out = {}
    for arch in ("resnet18", "resnet34", "resnet50", "densenet121", "wideresnet"):
        model = seed_models.build(arch, num_classes=10 if arch == "wideresnet" else 1000)
        buffers = sum(b.numel() for n, b in model.named_buffers()
                      if not n.endswith("num_batches_tracked"))
        out[arch] = {"params": sum(p.numel() for p in model.parameters()), "buffers": buffers}
    return out


def one_case(bindir, work, arch, kind, classes, ref_args, eval_args):
    data = os.path.join(work, kind)
    if not os.path.isdir(data):
        args = [a.format(out=data) for a in MKJPEG[kind]]
        subprocess.run([os.path.join(bindir, "ddpipe-mkjpeg")] + args, check=True,
                       stdout=subprocess.DEVNULL)
    model = seed_models.build(arch, num_classes=classes)
    manifest, tensors = [], {}
    for name, v in model.state_dict().items():
        if name.endswith("num_batches_tracked"):   # ref_eval loads strictly
            tensors[name] = np.zeros((), dtype=np.int64)
            continue
        shape = tuple(v.shape)
        manifest.append([name, list(shape)])
        tensors[name] = synth(name, shape)
    weights = os.path.join(work, arch + ".safetensors")
    save_safetensors(weights, tensors)
    preds = os.path.join(work, arch + ".csv")
    gold = os.path.join(work, arch + ".json")
    subprocess.run([sys.executable, os.path.join(HERE, "ref_eval.py"), "--data", data,
                    "--weights", weights, "--arch", arch, "--num-classes", str(classes),
                    "--threads", "1", "--out", preds, "--golden", gold] + ref_args,
                   check=True, stdout=subprocess.DEVNULL)
    with open(gold) as f:
        g = json.load(f)
    if g["near_ties"]:
        raise SystemExit("%s: near ties at samples %s: pick other images" % (arch, g["near_ties"]))
    with open(preds) as f:
        rows = list(csv.DictReader(f))
    k = min(5, classes)
    # the largest |logit| per sample, through ref_eval's own data path: the
    # scale of the parity bar (max|a-b| <= 1e-4 max|b| on the logits)
    model.load_state_dict({n: torch.from_numpy(np.asarray(v)) for n, v in tensors.items()})
    model.eval()
    seed = arch == "wideresnet"
    resize = int(ref_args[1]) if ref_args else 256
    crop = int(ref_args[3]) if ref_args else 224
    src = ref_eval.FolderSource(data, None, seed, resize, crop)
    scale = []
    with torch.no_grad():
        for x, _, _ in src.batches(250, seed):
            scale += model(x).abs().amax(dim=1).tolist()
    return {
        "mkjpeg": "ddpipe-mkjpeg " + " ".join(MKJPEG[kind]).replace("{out}", "OUT"),
        "data": kind, "files_md5": folder_md5(data), "num_classes": classes,
        "eval_args": eval_args, "transform": g["transform"], "manifest": manifest,
        "paths": [r["path"] for r in rows],
        "labels": [int(r["label"]) for r in rows],
        "topk": [[int(r["top%d" % (i + 1)]) for i in range(k)] for r in rows],
        "loss": [float(r["loss"]) for r in rows],
        "logit_scale": scale,
    }


def main():
    bindir = sys.argv[1]
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="models-ref-")
    golden = {"params": param_counts(), "eval": {},
              "oracle": "torch %s, torchvision %s" % (torch.__version__,
                                                     __import__("torchvision").__version__)}
    for arch, kind, classes, ref_args, eval_args in CASES:
        golden["eval"][arch] = one_case(bindir, work, arch, kind, classes, ref_args, eval_args)
        print(arch, "done", flush=True)
    with open(os.path.join(HERE, "models_ref.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    subprocess.run(["rm", "-rf", work], check=True)
    print("wrote tests/golden/models_ref.json:", json.dumps(golden["params"]))


if __name__ == "__main__":
    main()
