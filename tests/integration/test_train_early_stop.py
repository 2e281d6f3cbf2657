"""Early stop by patience: with a target every epoch reaches, the run stops
after --patience epochs instead of --epochs, says so, and metrics.csv, the
checkpoint and the seed course's CSV end at that epoch."""
import os
from ddp_it import *

train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-early-stop")
out = os.path.join(wd, "run")
p = run_train(train, out, 2, ["--batch-size", "16", "--epochs", "6", "--lr", "0.05", "--momentum", "0.9",
                              "--target-accuracy", "0.01", "--patience", "2", "--worker-timeout", "20"],
              val=val)
assert_no_leftovers(out)
epochs = sorted(train_losses(out))
check(epochs == [0, 1], "train rows for epochs %s, want [0, 1] (stop after 2 epochs)" % epochs)
check("stopped early after epoch 2 of 6" in p.stdout, "no early-stop summary line:\n%s" % p.stdout)
check(os.path.exists(os.path.join(out, "model.safetensors")), "no final weights")
_, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
check(meta.get("ckpt.epoch") == "2" and meta.get("ckpt.streak") == "2",
      "checkpoint at the stop: want epoch 2 streak 2, metadata %s" % meta)
seed_csv = os.path.join(out, "2ranks-16bs-0.05lr-0.9m-0.0w.csv")
check(os.path.exists(seed_csv), "no seed-course CSV %s in %s" % (seed_csv, os.listdir(out)))
lines = read(seed_csv).strip().splitlines()
# the seed's layout: header, the on_train_begin row "0.0,0.0", one row per epoch
check(lines[0] == "time,val_accuracy" and lines[1] == "0.0,0.0" and len(lines) == 4,
      "seed CSV: want a header, 0.0,0.0 and 2 epoch rows:\n%s" % "\n".join(lines))
val_top1 = [float(r["top1"]) for r in metrics_rows(out) if r["phase"] != "train"]
check([float(l.split(",")[1]) for l in lines[2:]] == [round(v, 4) for v in val_top1],
      "seed CSV accuracies %s vs metrics.csv val top-1 %s" % (lines[2:], val_top1))

# without a reachable target the run goes the whole way
out = os.path.join(wd, "no-stop")
p = run_train(train, out, 1, ["--batch-size", "32", "--epochs", "2", "--target-accuracy", "1.0",
                              "--patience", "1", "--worker-timeout", "20"], val=val)
assert_no_leftovers(out)
check(sorted(train_losses(out)) == [0, 1] and "completed 2 epochs" in p.stdout,
      "unreachable target: %s\n%s" % (sorted(train_losses(out)), p.stdout))
print("1 passed, 0 failed")
