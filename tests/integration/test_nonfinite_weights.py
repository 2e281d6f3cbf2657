"""Non-finite weights are refused where they enter gpud, naming the tensor
and its first bad element, and the job exits non-zero (issue 28 item 1;
docs/TRAINING.md "Non-finite values"):

- `ddpipe eval` with one NaN in the demo WideResNet's first conv weight
  (before: a fused conv+ReLU turned it into 0, exit 0, top-1 ~805/1000 and
  no warning) and with a NaN in fc.bias;
- `ddpipe train --resume` from a checkpoint with one NaN weight;
- training that diverges (--lr 1e6 with momentum): every rank stops at the
  same step naming the tensor whose summed gradient (or updated value) is
  not finite, the same step and tensor for 1 and 2 workers, and what is
  left in the run directory (a checkpoint, if any) is finite."""
import glob
import os
import re
from ddp_it import *

NAN = float("nan")
wd = workdir("nonfinite-weights")


def refused(p, tensor, what):
    check(p.returncode not in (0, 130) and tensor in p.stderr and "is nan" in p.stderr,
          "%s: exit %d, want a refusal naming %s; stderr:\n%s" % (what, p.returncode, tensor,
                                                                  p.stderr))
    print("%s: refused (exit %d)" % (what, p.returncode), flush=True)


# ---- eval: weights at start -------------------------------------------------
data = idx_subset("t10k", 0, 200)
for tensor, element in (("input_block.cbr.0.weight", 5), ("fc.bias", 2)):
    weights = safetensors_poison(DEMO_WEIGHTS, os.path.join(wd, "%s.safetensors" % tensor),
                                 {tensor: lambda i, v: NAN if i == element else v})
    out = os.path.join(wd, "eval-" + tensor)
    p = run_eval(data, out, workers=2, batch=64, extra=["--weights", weights], expect_rc=None,
                 timeout=120)
    refused(p, "%s: element %d of" % (tensor, element), "eval with a NaN in %s" % tensor)
    check(not os.path.exists(os.path.join(out, "summary.json")),
          "eval with a NaN in %s wrote summary.json" % tensor)
    assert_no_leftovers(out)

# ---- train: a checkpoint on --resume ----------------------------------------
train = idx_subset("train", 0, 96)
flags = ["--batch-size", "24", "--seed", "3", "--worker-timeout", "20"]
run = os.path.join(wd, "resume")
run_train(train, run, 1, flags + ["--epochs", "1"])
ckpt = os.path.join(run, "checkpoint.safetensors")
check(os.path.exists(ckpt), "no checkpoint after --epochs 1")
safetensors_poison(ckpt, ckpt, {"block3.layer1.cbr.0.weight": lambda i, v: NAN if i == 7 else v})
p = run_train(train, run, 1, flags + ["--epochs", "2", "--resume", run], expect_rc=None,
              timeout=120)
refused(p, "block3.layer1.cbr.0.weight: element 7 of", "--resume from a NaN checkpoint")
assert_no_leftovers(run)

# ---- train: a step whose gradients are not finite ----------------------------
STOP = re.compile(r"step (\d+): the (summed gradient|parameter) (\S+): element (\d+) of (\d+) "
                  r"is (-?nan|-?inf)")


def diverge(out, workers, extra, model_args=None):
    """Run a training that must stop; the stop every gpud logged (one, the same on all ranks)."""
    p = run_train(train, out, workers, extra, model_args=model_args, expect_rc=None, timeout=180)
    found, ranks = set(), 0
    for log in glob.glob(os.path.join(out, "logs", "gpud*.log")):
        with open(log, errors="replace") as f:
            got = {m.groups() for m in STOP.finditer(f.read())}
        ranks += bool(got)
        found |= got
    check(p.returncode not in (0, 130) and len(found) == 1 and ranks == workers and
          "diverged" in p.stderr,
          "%s: exit %d, stops %s on %d of %d ranks (want one, the same on every rank); stderr:\n%s"
          % (out, p.returncode, found, ranks, workers, p.stderr))
    step, kind, tensor = list(found)[0][:3]
    # one error naming the step and tensor; no rank reported as lost
    said = [l for l in p.stderr.splitlines() if "diverged" in l]
    check(len(said) == 1 and said[0].startswith("ddpipe train failed: rank 0: step %s: the %s %s: "
                                                 % (step, kind, tensor)),
          "%s: want one console error naming step %s and %s; stderr:\n%s" % (out, step, tensor, p.stderr))
    check("survivors continue" not in p.stderr and "ended (exit" not in p.stderr,
          "%s: a rank reported as failed alone; stderr:\n%s" % (out, p.stderr))
    t = summary(out).get("training") or {}
    check(t.get("stopped") == "non-finite" and "step %s: the %s %s: element" % (step, kind, tensor)
          in (t.get("stop_reason") or "") and t.get("stopped_early") is False,
          "%s: summary.json's training object: %s" % (out, json.dumps(t, indent=1)))
    import numpy as np
    for f in glob.glob(os.path.join(out, "*.safetensors")):   # what is left must load
        tensors, _ = safetensors_read(f)
        for name, a in tensors.items():
            check(a.dtype.kind != "f" or bool(np.isfinite(a).all()),
                  "%s: %s holds non-finite values" % (f, name))
    assert_no_leftovers(out)
    print("%s: stopped at %s" % (out, sorted(found)[0]), flush=True)
    return found.pop()


# finite weights whose logits are NaN (test_nan.py's "nan" weights): the
# first step's gradients are NaN, whatever the worker count
FLT_MAX = 3.4028234663852886e38
overflow = safetensors_poison(DEMO_WEIGHTS, os.path.join(wd, "overflow.safetensors"), {
    "block6.layer2.cbr.1.weight": lambda i, v: 0.0, "block6.layer2.cbr.1.bias": lambda i, v: 1e6,
    "fc.weight": lambda i, v: FLT_MAX if i % 2 == 0 else -FLT_MAX})
stops = [diverge(os.path.join(wd, "overflow-w%d" % w), w,
                 ["--global-batch-size", "48", "--epochs", "1", "--seed", "3"],
                 model_args=WRN_ARGS[:2] + ["--weights", overflow] + WRN_ARGS[4:])
         for w in (1, 2)]
check(stops[0] == stops[1] and stops[0][0] == "0",
      "1 and 2 workers stop differently: %s vs %s (want step 0)" % (stops[0], stops[1]))
# a learning rate that diverges: both ranks stop at the same step
diverge(os.path.join(wd, "lr"), 2, flags + ["--epochs", "3", "--lr", "1e6", "--momentum", "0.9"])
print("PASS")
