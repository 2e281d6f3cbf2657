"""Stop after epoch 2 and --resume to epoch 3 = 3 epochs straight: the final
weights within 1e-6 and the resumed epoch's metrics.csv row equal to the
straight run's; a resume with a different global batch is refused, and so
are initial weights of the wrong shape (naming the tensor)."""
import os
from ddp_it import *

train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-resume")
flags = ["--batch-size", "24", "--seed", "5", "--lr", "0.05", "--momentum", "0.9", "--worker-timeout", "20"]

straight = os.path.join(wd, "straight")
run_train(train, straight, 2, flags + ["--epochs", "3"], val=val)
assert_no_leftovers(straight)

split = os.path.join(wd, "split")
run_train(train, split, 2, flags + ["--epochs", "2"], val=val)
assert_no_leftovers(split)
ckpt = os.path.join(split, "checkpoint.safetensors")
check(os.path.exists(ckpt), "no checkpoint after --epochs 2")
_, meta = safetensors_read(ckpt)
spe = (160 + 47) // 48
check(meta.get("ckpt.epoch") == "2" and meta.get("ckpt.step") == str(2 * spe),
      "checkpoint metadata after 2 epochs of %d steps: %s" % (spe, meta))
check(meta.get("ckpt.global_batch") == "48" and meta.get("ckpt.steps_per_epoch") == str(spe),
      "checkpoint metadata: %s" % meta)

# a different global batch cannot continue this run
p = run_train(train, split, 3, flags + ["--epochs", "3", "--resume", split], val=val, expect_rc=None)
check(p.returncode != 0 and "global batch" in p.stderr,
      "resume with 3x24 instead of 2x24: exit %d, stderr:\n%s" % (p.returncode, p.stderr))

p = run_train(train, split, 2, flags + ["--epochs", "3", "--resume", split], val=val)
assert_no_leftovers(split)
d, name = weights_diff(os.path.join(straight, "model.safetensors"), os.path.join(split, "model.safetensors"))
print("straight vs resumed: largest weight difference %.3g (%s)" % (d, name), flush=True)
check(d <= 1e-6, "resumed weights differ from the straight run's: %s by %.3g" % (name, d))

a, b = train_losses(straight), train_losses(split)
check(2 in b, "the resumed run wrote no train row for epoch 2: %s" % metrics_rows(split))
check(abs(a[2] - b[2]) <= 1e-6, "epoch 2 train loss %.8f (straight) vs %.8f (resumed)" % (a[2], b[2]))
vals_a = {int(r["epoch"]): r for r in metrics_rows(straight) if r["phase"] != "train"}
vals_b = {int(r["epoch"]): r for r in metrics_rows(split) if r["phase"] != "train"}
check(2 in vals_b and vals_a[2]["top1"] == vals_b[2]["top1"] and vals_a[2]["samples"] == vals_b[2]["samples"],
      "epoch 2 validation rows differ:\n%s\n%s" % (vals_a.get(2), vals_b.get(2)))
_, meta = safetensors_read(os.path.join(split, "checkpoint.safetensors"))
check(meta.get("ckpt.epoch") == "3", "checkpoint after the resumed run: %s" % meta)

# --weights of another width: both ranks fail at once, the tensor is named
out = os.path.join(wd, "wrong-weights")
p = run_train(train, out, 2, flags + ["--epochs", "1", "--weights", DEMO_WEIGHTS], val=val, expect_rc=None)
check(p.returncode not in (0, 130) and "input_block.cbr.0.weight" in p.stderr,
      "wrong --weights: exit %d, stderr:\n%s" % (p.returncode, p.stderr))
# at once, not after a rank's 60 s --join-timeout: the bound sits under that
check(p.seconds < 50, "wrong --weights took %.1fs to fail" % p.seconds)
assert_no_leftovers(out)
print("1 passed, 0 failed")
