"""Every architecture gpud implements through `ddpipe eval` against PyTorch
(issue 15 item 1), goldens from tests/golden/gen_models.py: resnet18/34/50
with their default transform (Resize 256, CenterCrop 224, ImageNet
normalisation), densenet121 at 64x64, the seed WideResNet on Fashion-MNIST
JPEGs, each with weights synthesised from the committed manifest. Every
sample's top-k equals PyTorch's and its loss is within the parity bar
(logits within 1e-4 of the largest |logit|, so the cross-entropy within
2e-4 of it). And `ddpipe models` prints each one with torchvision's
parameter count."""
import csv
import hashlib
import os
import shutil
import subprocess
from ddp_it import *
from ddp_synth import write_weights

ref = load_json(os.path.join(SRC, "tests", "golden", "models_ref.json"))
wd = workdir("models")

# 1. ddpipe models: the counts torchvision gives
p = subprocess.run([os.path.join(BIN, "ddpipe"), "models", "--json"], stdout=subprocess.PIPE,
                   text=True, check=True)
cards = {c["name"]: c for c in map(json.loads, p.stdout.splitlines())}
check(sorted(cards) == sorted(ref["params"]), "ddpipe models lists %s" % sorted(cards))
for arch, want in ref["params"].items():
    got = cards[arch]
    check(got["params"] == want["params"] and got["buffers"] == want["buffers"],
          "%s: %s params, %s buffers; torchvision %s" % (arch, got["params"], got["buffers"], want))
    check(("Resize(256), CenterCrop(224)" in got["transform"]) == (arch != "wideresnet"),
          "%s transform %r" % (arch, got["transform"]))
table = subprocess.run([os.path.join(BIN, "ddpipe"), "models"], stdout=subprocess.PIPE, text=True,
                       check=True).stdout
for arch, want in ref["params"].items():
    check(any(l.split()[:2] == [arch, str(want["params"])] for l in table.splitlines()),
          "table lacks '%s %d':\n%s" % (arch, want["params"], table))
print("ddpipe models: parameter counts equal torchvision's", flush=True)


def folder(kind, mk, md5):
    data = os.path.join(wd, kind)
    if not os.path.isdir(data):
        args = mk.split()[1:]
        subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg")] + [
            data if a == "OUT" else a.replace("/usr/share/datasets/fashion-mnist", FMNIST)
            for a in args], check=True, stdout=subprocess.DEVNULL)
    h = hashlib.md5()
    for c in sorted(os.listdir(data)):
        for f in sorted(os.listdir(os.path.join(data, c))):
            h.update(read(os.path.join(data, c, f), "rb"))
    check(h.hexdigest() == md5, "%s: ddpipe-mkjpeg made other JPEGs than the golden's" % kind)
    return data


# 2. each architecture through the whole pipeline
for arch, g in ref["eval"].items():
    data = folder(g["data"], g["mkjpeg"], g["files_md5"])
    weights = os.path.join(wd, arch + ".safetensors")
    write_weights(weights, g["manifest"])
    out = os.path.join(wd, arch)
    model = ["--model", arch, "--weights", weights] + g["eval_args"]
    run_eval(data, out, 1, 8, extra=["--predictions", "topk"], model_args=model, timeout=300)
    with open(os.path.join(out, "predictions.csv")) as f:
        rows = list(csv.DictReader(f))
    k = len(g["topk"][0])
    check([r["path"] for r in rows] == g["paths"], "%s: sample order differs" % arch)
    check([int(r["label"]) for r in rows] == g["labels"], "%s: labels differ" % arch)
    diff = [i for i, r in enumerate(rows) if [int(r["top%d" % (j + 1)]) for j in range(k)] != g["topk"][i]]
    check(not diff, "%s: top-%d differs from PyTorch at samples %s" % (arch, k, diff[:10]))
    worst = max(abs(float(r["loss"]) - l) / s for r, l, s in zip(rows, g["loss"], g["logit_scale"]))
    check(worst <= 2e-4, "%s: loss differs from PyTorch by %.2e of the largest |logit|" % (arch, worst))
    print("%s: %d samples, top-%d equal PyTorch's, loss within %.1e of max|logit| (%s)" % (
        arch, len(rows), k, worst, g["transform"]), flush=True)
    assert_no_leftovers(out)
    os.remove(weights)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
