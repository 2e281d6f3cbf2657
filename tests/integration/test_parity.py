"""ddpipe's predictions equal PyTorch's: the demo WideResNet on the 10,000
Fashion-MNIST IDX test images and on 997 JPEGs made by ddpipe-mkjpeg, against
goldens computed with Debian's PyTorch/torchvision (tests/golden/ref_eval.py)."""
import csv
import hashlib
import os
from ddp_it import *

GOLDEN = os.path.join(SRC, "tests", "golden")
wd = workdir("parity")


def folder_md5(root):
    h = hashlib.md5()
    for c in sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))):
        for f in sorted(os.listdir(os.path.join(root, c))):
            h.update(read(os.path.join(root, c, f), "rb"))
    return h.hexdigest()


def compare(out, ref, what):
    s = summary(out)
    for k in ("samples", "correct_top1", "correct_top5"):
        check(s[k] == ref[k], "%s: %s %s, PyTorch %s" % (what, k, s[k], ref[k]))
    check(s["failed"] == 0, "%s: %d failed samples" % (what, s["failed"]))
    check(abs(s["loss"] - ref["loss_mean"]) <= 1e-5 * ref["loss_mean"],
          "%s: mean loss %.9f, PyTorch %.9f" % (what, s["loss"], ref["loss_mean"]))
    with open(os.path.join(out, "predictions.csv")) as f:
        rows = list(csv.DictReader(f))
    top1 = "".join(r["top1"] for r in rows)
    labels = "".join(r["label"] for r in rows)
    check(labels == ref["labels"], "%s: labels differ from torchvision's sample order" % what)
    diff = [i for i, (a, b) in enumerate(zip(top1, ref["top1"])) if a != b and i not in ref["near_ties"]]
    check(len(top1) == len(ref["top1"]) and not diff,
          "%s: top-1 differs from PyTorch at samples %s" % (what, diff[:20]))
    print("%s: top1 %d/%d equal to PyTorch, every sample's top-1 equal" % (
        what, s["correct_top1"], s["samples"]), flush=True)


# 1. the IDX test set, as torchvision.datasets.FashionMNIST + ToTensor sees it
ref = load_json(os.path.join(GOLDEN, "fmnist_t10k_ref.json"))
check(hashlib.md5(read(DEMO_WEIGHTS, "rb")).hexdigest() == ref["weights_md5"],
      "demo weights changed since the golden was made: rerun tests/golden/ref_eval.py")
out = os.path.join(wd, "idx")
run_eval("idx:%s/t10k" % FMNIST, out, 2, 128, extra=["--predictions", "topk"], model_args=WRN_ARGS + ["--threads", "1"])
compare(out, ref, "idx t10k")

# 2. JPEGs through libjpeg-turbo, as ImageFolder + Grayscale + ToTensor sees them
ref = load_json(os.path.join(GOLDEN, "fmnist_jpeg997_ref.json"))
data = jpeg_folder(997)
check(folder_md5(data) == ref["files_md5"],
      "ddpipe-mkjpeg made different JPEGs than the golden's (libjpeg-turbo changed?)")
out = os.path.join(wd, "jpeg")
run_eval(data, out, 3, 32, extra=["--predictions", "topk"])
compare(out, ref, "jpeg 997")
print("1 passed, 0 failed")
