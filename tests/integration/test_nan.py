"""A model whose outputs are NaN or inf is evaluated to the end, not hung:
the demo WideResNet with NaN (then +inf) written into fc.bias, on 300
Fashion-MNIST test images with 1 and 2 workers. Every sample is a result
(top-1 as torch.argmax: NaN ranks first, ties by lower id), its loss is
non-finite (torch's cross_entropy gives NaN for both), summary.json says
how many (nonfinite_loss) with loss null, the CLI warns, exit 0, and the
counts are identical for 1 and 2 workers."""
import json
import os
import struct
from ddp_it import *

N = 300


def poisoned_weights(path, value, index=None):
    """The demo weights with fc.bias set to value (all entries, or one)."""
    with open(DEMO_WEIGHTS, "rb") as f:
        raw = bytearray(f.read())
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    t = header["fc.bias"]
    check(t["dtype"] == "F32", "fc.bias dtype %s" % t["dtype"])
    a, b = t["data_offsets"]
    base = 8 + hlen
    for i in range((b - a) // 4):
        if index is None or i == index:
            raw[base + a + 4 * i:base + a + 4 * i + 4] = struct.pack("<f", value)
    with open(path, "wb") as f:
        f.write(raw)
    return path


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
    ("nan", poisoned_weights(os.path.join(wd, "nan.safetensors"), float("nan")),
     sum(1 for l in labels if l == 0), sum(1 for l in labels if l < 5)),
    # logit 3 is +inf: top-1 is class 3 for every image
    ("inf", poisoned_weights(os.path.join(wd, "inf.safetensors"), float("inf"), index=3),
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
