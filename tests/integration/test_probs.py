"""--predictions probs|all: predictions.csv carries the softmax probabilities
(4 decimals) beside the indices, and summary.json's ECE and per-class
ROC-AUC / average precision equal sklearn's (and the TorchMetrics 15-bin
l1 ECE formula) recomputed here from that CSV; W=1 and W=2 give identical
files. A wrong --predictions value is a one-line error, exit 2."""
import csv
import os
import subprocess
from ddp_it import *

try:
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score
except ImportError as e:
    print("skipped: %s (run with /usr/bin/python3)" % e)
    raise SystemExit(77)

N = 300
data = jpeg_folder(N)
wd = workdir("probs")


def rows(out):
    with open(os.path.join(out, "predictions.csv"), newline="") as f:
        return list(csv.DictReader(f))


def ece_torchmetrics(conf, correct):
    """MulticlassCalibrationError(n_bins=15, norm='l1'): bucketize(right=True) - 1
    over linspace(0, 1, 16); bins from the printed 4-decimal values as integers."""
    q = np.rint(conf * 10000).astype(np.int64)
    b = np.where(q >= 10000, 15, (q * 15) // 10000)
    ece = 0.0
    for k in range(16):
        m = b == k
        if m.any():
            ece += abs(correct[m].mean() - conf[m].mean()) * m.sum() / len(conf)
    return ece


def check_against_sklearn(out, mode):
    r = rows(out)
    s = summary(out)
    p = s["probabilities"]
    check(len(r) == N, "%s: %d rows, want %d" % (out, len(r), N))
    y = np.array([int(x["label"]) for x in r])
    top1 = np.array([int(x["top1"]) for x in r])
    nc = len(s["per_class"])
    if mode == "all":
        P = np.array([[float(x["prob_%d" % c]) for c in range(nc)] for x in r])
        conf = P[np.arange(len(r)), top1]
        check(abs(P.sum(axis=1) - 1).max() < 6e-4, "probabilities of a row do not sum to 1")
        for c in range(nc):
            want_auc = roc_auc_score(y == c, P[:, c]) if 0 < (y == c).sum() < len(y) else None
            want_ap = average_precision_score(y == c, P[:, c]) if (y == c).any() else None
            got = s["per_class"][c]
            for key, want in (("roc_auc", want_auc), ("average_precision", want_ap)):
                check((want is None and got[key] is None) or abs(got[key] - want) <= 1e-12,
                      "%s class %d %s: ddpipe %r, sklearn %r" % (out, c, key, got[key], want))
    else:
        conf = np.array([float(x["p1"]) for x in r])
        p1 = [float(x["p1"]) for x in r]
        p2 = [float(x["p2"]) for x in r]
        check(all(a >= b for a, b in zip(p1, p2)), "p1 < p2 somewhere: not best first")
    want = ece_torchmetrics(conf, (top1 == y).astype(float))
    check(abs(p["ece"] - want) <= 1e-12, "%s: ECE %r, recomputed %r" % (out, p["ece"], want))
    check(sum(b["count"] for b in p["calibration_bins"]) == N, "calibration bins do not count N")
    for f in ("reliability.png", "roc_worst.png", "pr_worst.png"):
        path = os.path.join(out, f)
        check(os.path.exists(path) and os.path.getsize(path) > 1000, "%s missing or empty" % path)


ref = {}
for mode in ("probs", "all"):
    for workers in (1, 2):
        out = os.path.join(wd, "%s-w%d" % (mode, workers))
        run_eval(data, out, workers, 16, extra=["--predictions", mode, "--limit", str(N)])
        check_against_sklearn(out, mode)
        got = (read(os.path.join(out, "predictions.csv")), summary(out)["probabilities"],
               [(c.get("roc_auc"), c.get("average_precision")) for c in summary(out)["per_class"]])
        if mode in ref:
            check(got == ref[mode], "%s: W=2 differs from W=1" % out)
        ref[mode] = got
        assert_no_leftovers(out)

# the top-k mode writes no probabilities and keeps the old header
out = os.path.join(wd, "topk")
run_eval(data, out, 1, 32, extra=["--predictions", "topk", "--limit", "50"])
header = read(os.path.join(out, "predictions.csv")).split("\n")[0]
check(header == "index,path,label,top1,top2,top3,top4,top5,loss", "topk header: %r" % header)
check("probabilities" not in summary(out), "topk mode wrote probability metrics")

# a wrong value: one line naming the flag and the accepted values, exit 2
p = run_eval(data, os.path.join(wd, "bad"), 1, 32, extra=["--predictions", "prob"], expect_rc=2)
lines = p.stderr.strip().split("\n")
check(len(lines) == 1 and "--predictions" in lines[0] and "topk, probs or all" in lines[0],
      "bad --predictions: %r" % p.stderr)
print("1 passed, 0 failed")
