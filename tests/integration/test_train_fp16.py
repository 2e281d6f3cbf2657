"""ddpipe train --precision fp16 (docs/FP16.md): autocast's float16 values
with dynamic loss scaling, checked as processes through the four daemons.

1. The same model for any worker count, at fp16 tolerance: the sync-bn run
   of test_train_invariance_bf16.py (seed 3, global batch 64 on 1, 2 and 3
   ranks, N = 232 so each epoch's last step is split unevenly, SGD lr 0.001,
   2 epochs) with --precision fp16. As for bf16, a value within an fp32
   rounding of an fp16 tie rounds the other way when the per-rank sums are
   in another order, and each rank's conv weight gradient is rounded to
   fp16 before the all-reduce (as DDP under autocast). TOL bounds that, for
   the trainable tensors and for BatchNorm's running statistics (a
   variance of fp16 activations: one flipped tie moves it most); and the
   worker count may change each at most twice what fp16 itself does
   (against fp32 on 1 rank): in this short run both are a few flipped
   ties, the same order of magnitude. Measured here: trainable 7.8e-5
   (fp16's own 7.4e-5), running statistics 3.2e-4 (3.5e-4); before each
   branch of a residual got its own rounded gradient (docs/BF16.md "16-bit
   activations") 5.1e-5 (9.9e-5) and 2.3e-4 (4.2e-4). The scaler starts at 65536 and never overflows here:
   summary.json says 0 skipped steps and the checkpoint carries the scale.
2. Skipped steps: --loss-scale 2^40 makes every gradient of the 8 steps
   inf. Every step is skipped (summary.json skipped_steps 8, the
   checkpoint's scale 2^32 after 8 halvings) on 1 and on 2 ranks, and the
   trainable weights are bit for bit those of the same run at --lr 0 (no
   optimizer step touched them: GradScaler's skip).
3. Growth: --loss-scale 1 --loss-scale-growth 2: 8 finite steps double the
   scale every 2 (1 -> 16; the last step ran at 8).
4. Resume: the skipping run stopped after 1 epoch and resumed to 2 ends
   with the straight run's scaler state and weights (the scale, its growth
   tracker and the skip count travel in the checkpoint)."""
import os
from ddp_it import *

TOL = {"trainable": 1e-4, "running": 5e-4}
val = idx_subset("t10k", 0, 64)
wd = workdir("train-fp16")
base = ["--global-batch-size", "64", "--seed", "3", "--lr", "0.001", "--momentum", "0",
        "--worker-timeout", "20"]
common = base + ["--epochs", "2", "--sync-bn", "--precision", "fp16"]
train = idx_subset("train", 0, 232)


def summary_training(out):
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["training"]


def ckpt_meta(out):
    return safetensors_read(os.path.join(out, "checkpoint.safetensors"))[1]


def part_diff(a, b, part):
    """weights_diff's measure (|a-b| / max(1, |a|), the largest) over the
    trainable tensors or over BatchNorm's running statistics alone."""
    import numpy as np
    ta, _ = safetensors_read(os.path.join(a, "model.safetensors"))
    tb, _ = safetensors_read(os.path.join(b, "model.safetensors"))
    worst = (0.0, "")
    for k, v in ta.items():
        if k.endswith("num_batches_tracked") or ("running_" in k) != (part == "running"):
            continue
        d = float(np.max(np.abs(v.astype(np.float64) - tb[k]) / np.maximum(1, np.abs(v))))
        worst = max(worst, (d, k))
    return worst


def trainable(out):
    t, _ = safetensors_read(os.path.join(out, "model.safetensors"))
    return {k: v for k, v in t.items() if not k.endswith(("running_mean", "running_var",
                                                          "num_batches_tracked"))}


# 1. worker-count invariance
runs = {}
for w in (1, 2, 3):
    out = os.path.join(wd, "w%d" % w)
    run_train(train, out, w, common, val=val)
    assert_no_leftovers(out)
    losses = train_losses(out)
    check(sorted(losses) == [0, 1], "w%d: train rows for epochs %s, want 0 and 1" % (w, sorted(losses)))
    t = summary_training(out)
    check(t["skipped_steps"] == 0 and t["loss_scale"] == 65536.0,
          "w%d: summary loss_scale %s, skipped_steps %s, want 65536 and 0" %
          (w, t["loss_scale"], t["skipped_steps"]))
    m = ckpt_meta(out)
    check(m.get("ckpt.loss_scale") == "65536" and m.get("ckpt.loss_scale_tracker") == "8" and
          m.get("ckpt.skipped_steps") == "0", "w%d: checkpoint scaler state %s" % (w, m))
    runs[w] = (out, losses)
    print("fp16 w%d: train losses %s" % (w, losses), flush=True)

fp32_out = os.path.join(wd, "fp32-w1")
run_train(train, fp32_out, 1, common[:-2], val=val)
check("ckpt.loss_scale" not in ckpt_meta(fp32_out), "fp32: a loss scale in the checkpoint")
check(summary_training(fp32_out)["loss_scale"] is None, "fp32: summary.json has a loss scale")
base_out, base_losses = runs[1]
prec = {part: part_diff(fp32_out, base_out, part) for part in TOL}
print("fp16 vs fp32 (w1): %s" % prec, flush=True)
for w in (2, 3):
    out, losses = runs[w]
    for part, tol in TOL.items():
        d, tensor = part_diff(base_out, out, part)
        print("fp16 w1 vs w%d, %s: largest difference %.3g (%s), tolerance %g, fp16's own %.3g" %
              (w, part, d, tensor, tol, prec[part][0]), flush=True)
        check(d <= tol, "fp16 w1 vs w%d: %s differs by %.3g > %g" % (w, tensor, d, tol))
        check(d <= 2 * prec[part][0], "fp16 w1 vs w%d: %s %.3g, over twice fp16's own effect "
              "%.3g" % (w, part, d, prec[part][0]))
    for e in base_losses:
        check(abs(base_losses[e] - losses[e]) <= TOL["trainable"],
              "fp16 w1 vs w%d: epoch %d train loss %.8f vs %.8f" % (w, e, base_losses[e], losses[e]))
check(base_losses[1] < base_losses[0], "fp16: the train loss did not fall: %s" % base_losses)

# 2. every step skipped: the weights are untouched, on any worker count
big = ["--loss-scale", str(2.0 ** 40)]
lr0 = os.path.join(wd, "lr0")
run_train(train, lr0, 1, [a if a != "0.001" else "0" for a in common], val=val)
want = trainable(lr0)
for w in (1, 2):
    out = os.path.join(wd, "big-w%d" % w)
    run_train(train, out, w, common + big, val=val)
    t = summary_training(out)
    check(t["skipped_steps"] == 8 and t["loss_scale"] == 2.0 ** 33,
          "big w%d: summary skipped_steps %s (want 8), last step's scale %s (want 2^33)" %
          (w, t["skipped_steps"], t["loss_scale"]))
    m = ckpt_meta(out)
    check(m.get("ckpt.loss_scale") == str(2 ** 32) and m.get("ckpt.skipped_steps") == "8" and
          m.get("ckpt.loss_scale_tracker") == "0", "big w%d: checkpoint scaler state %s" % (w, m))
    got = trainable(out)
    bad = [k for k in want if k not in got or got[k].tobytes() != want[k].tobytes()]
    check(not bad, "big w%d: skipped steps changed %s (vs --lr 0)" % (w, bad[:3]))
    print("big w%d: 8 steps skipped, trainable weights are --lr 0's bit for bit" % w, flush=True)

# 3. growth after --loss-scale-growth finite steps
out = os.path.join(wd, "grow")
run_train(train, out, 1, common + ["--loss-scale", "1", "--loss-scale-growth", "2"], val=val)
t, m = summary_training(out), ckpt_meta(out)
check(t["skipped_steps"] == 0 and t["loss_scale"] == 8.0 and m.get("ckpt.loss_scale") == "16" and
      m.get("ckpt.loss_scale_tracker") == "0",
      "grow: summary %s / %s, checkpoint %s: want last step at 8, next 16" %
      (t["loss_scale"], t["skipped_steps"], m))

# 4. resume: the scaler continues where the checkpoint left it
split = os.path.join(wd, "split")
one = [a if a != "2" else "1" for a in common]   # --epochs 1
run_train(train, split, 1, one + big, val=val)
check(ckpt_meta(split).get("ckpt.loss_scale") == str(2 ** 36), "split: after 1 epoch %s" % ckpt_meta(split))
run_train(train, split, 1, common + big + ["--resume", split], val=val)
straight = os.path.join(wd, "big-w1")
ms, mr = ckpt_meta(straight), ckpt_meta(split)
for k in ("ckpt.loss_scale", "ckpt.loss_scale_tracker", "ckpt.skipped_steps"):
    check(ms.get(k) == mr.get(k), "resumed %s %s, straight %s" % (k, mr.get(k), ms.get(k)))
check(summary_training(split)["skipped_steps"] == 8, "resumed summary: %s" % summary_training(split))
d, name = weights_diff(os.path.join(straight, "model.safetensors"), os.path.join(split, "model.safetensors"))
check(d <= 1e-6, "resumed weights differ from the straight run's: %s by %.3g" % (name, d))

# a scale that is not a power of two is refused before anything starts
p = run_train(train, os.path.join(wd, "bad"), 1, common + ["--loss-scale", "1000"], val=val,
              expect_rc=None)
check(p.returncode != 0 and "a power of two" in p.stderr,
      "--loss-scale 1000: exit %d, stderr:\n%s" % (p.returncode, p.stderr))
print("1 passed, 0 failed")
