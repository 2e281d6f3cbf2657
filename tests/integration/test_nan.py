"""A model whose outputs are NaN or inf is evaluated to the end, not hung.
Its weights are finite (non-finite weights are refused at load:
test_nonfinite_weights.py) but overflow: the demo WideResNet's last
BatchNorm is made to output 1e6 everywhere (weight 0, bias 1e6), so every
feature the fc sees is about 1e6, and fc weights of +-FLT_MAX make the
products +-inf. "nan": each fc row alternates +FLT_MAX / -FLT_MAX, so every
logit is inf + -inf = NaN (in any summation order); "inf": row 3 is all
+FLT_MAX, so logit 3 is +inf. On 300 Fashion-MNIST test images with 1 and 2
workers: every sample is a result (top-1 as torch.argmax: NaN ranks first,
ties by lower id), its loss is non-finite (torch's cross_entropy gives NaN
or inf), summary.json says how many (nonfinite_loss) with loss null, the
CLI warns, exit 0, and the counts are identical for 1 and 2 workers."""
import os
from ddp_it import *

N = 300
FLT_MAX = 3.4028234663852886e38
FEATURES_1E6 = {"block6.layer2.cbr.1.weight": lambda i, v: 0.0,
                "block6.layer2.cbr.1.bias": lambda i, v: 1e6}
FC_IN = 128   # fc.weight is [10, 128]


def overflowing_weights(path, fc_weight):
    """The demo weights, features about 1e6, fc.weight element i set by fc_weight(i, v)."""
    return safetensors_poison(DEMO_WEIGHTS, path, dict(FEATURES_1E6, **{"fc.weight": fc_weight}))


def labels_of(data):
    prefix = data[len("idx:"):]
    with open(prefix + "-labels-idx1-ubyte", "rb") as f:
        return list(f.read()[8:])


wd = workdir("nan")
data = idx_subset("t10k", 0, N)
labels = labels_of(data)
check(len(labels) == N, "subset has %d labels" % len(labels))

cases = [
    # all logits NaN: top-k is classes 0..4 (all NaN, ties by id)
    ("nan", overflowing_weights(os.path.join(wd, "nan.safetensors"),
                                lambda i, v: FLT_MAX if i % 2 == 0 else -FLT_MAX),
     sum(1 for l in labels if l == 0), sum(1 for l in labels if l < 5)),
    # logit 3 is +inf: top-1 is class 3 for every image
    ("inf", overflowing_weights(os.path.join(wd, "inf.safetensors"),
                                lambda i, v: FLT_MAX if i // FC_IN == 3 else v),
     sum(1 for l in labels if l == 3), None),
]
for name, weights, want_top1, want_top5 in cases:
    seen = None
    for workers in (1, 2):
        out = os.path.join(wd, "%s-w%d" % (name, workers))
        p = run_eval(data, out, workers=workers, batch=64,
                     extra=["--weights", weights, "--predictions", "topk"], timeout=300)
        s = summary(out)
        check(s["samples"] == N and s["failed"] == 0,
              "%s: samples %r failed %r, want %d, 0" % (name, s["samples"], s["failed"], N))
        check(s["nonfinite_loss"] == N, "%s: nonfinite_loss %r, want %d" % (name, s["nonfinite_loss"], N))
        check(s["loss"] is None, "%s: loss %r, want null" % (name, s["loss"]))
        check(s["correct_top1"] == want_top1,
              "%s: correct_top1 %r, want %d" % (name, s["correct_top1"], want_top1))
        if want_top5 is not None:
            check(s["correct_top5"] == want_top5,
                  "%s: correct_top5 %r, want %d" % (name, s["correct_top5"], want_top5))
        check("non-finite loss" in p.stderr, "%s: no warning from ddpipe:\n%s" % (name, p.stderr))
        got = (counts(out), read(os.path.join(out, "predictions.csv")))
        check(seen is None or got == seen, "%s: 1 and 2 workers differ" % name)
        seen = got
print("PASS")
