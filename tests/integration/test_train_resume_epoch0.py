"""SIGTERM in the first epoch, then --resume (issue 28 item 4): the
checkpoint written on the signal is of epoch 0, ddpipe says to continue with
--resume, and the resumed run ends (exit 0) with the weights of an
uninterrupted run. The signal lands in epoch 0 by construction, not by
timing: rank 1 dies before step 2 (--fault), and with --min-workers 2 and a
long --rejoin-timeout the job waits in epoch 0 for a rank to join; the test
waits for that death, then SIGTERMs ddpipe."""
import os
import signal
import subprocess
import time
from ddp_it import *
from ddp_it import _logs

train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-resume-epoch0")
spe = (160 + 47) // 48  # 4 steps of 48 per epoch
FAULT_STEP = 2          # epoch 0, after steps 0 and 1
flags = ["--batch-size", "24", "--seed", "3", "--lr", "0.05", "--momentum", "0.9", "--epochs", "2",
         "--min-workers", "2", "--worker-timeout", "2", "--ring-timeout", "5"]

out = os.path.join(wd, "sigterm")
cmd = train_cmd(train, out, 2, flags + ["--rejoin-timeout", "300", "--fault", "1:%d" % FAULT_STEP],
                val=val)
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
log1 = os.path.join(out, "logs", "gpud.1.log")
deadline = time.time() + 120    # bounds a hang; no speed is judged
while time.time() < deadline and proc.poll() is None:
    if os.path.exists(log1) and "--fault-at-step %d reached" % FAULT_STEP in read(log1, "rb").decode(
            errors="replace"):
        break   # rank 1 dies before step 2: with --min-workers 2 the job cannot leave epoch 0
    time.sleep(0.05)
if proc.poll() is not None:
    fail("the job ended before the SIGTERM (exit %s):\n%s" % (proc.returncode, proc.communicate()[1]))
proc.send_signal(signal.SIGTERM)
_, err = proc.communicate(timeout=120)
check(proc.returncode == 130, "SIGTERM: exit %d, want 130; stderr:\n%s" % (proc.returncode, err))
check("continue with --resume" in err, "SIGTERM: no resume hint:\n%s" % err)
assert_no_leftovers(out)
ckpt = os.path.join(out, "checkpoint.safetensors")
check(os.path.exists(ckpt), "no checkpoint after the SIGTERM:\n%s" % err)
_, meta = safetensors_read(ckpt)
check(meta.get("ckpt.epoch") == "0" and meta.get("ckpt.step") == str(FAULT_STEP),
      "checkpoint after the SIGTERM: want epoch 0 step %d (the last completed step), metadata %s"
      % (FAULT_STEP, meta))
# the plan is known from the first step (loaderd's BATCH): written from epoch 0 on
check(meta.get("ckpt.steps_per_epoch") == str(spe),
      "checkpoint of epoch 0: ckpt.steps_per_epoch %s, want %d" % (meta.get("ckpt.steps_per_epoch"), spe))

p = run_train(train, out, 2, flags + ["--rejoin-timeout", "0", "--resume", out], val=val, expect_rc=None)
check(p.returncode == 0, "--resume of the epoch-0 checkpoint: exit %d, stderr:\n%s\n%s" % (
    p.returncode, p.stderr, _logs(out)))
assert_no_leftovers(out)
_, meta = safetensors_read(ckpt)
check(meta.get("ckpt.epoch") == "2" and meta.get("ckpt.steps_per_epoch") == str(spe),
      "checkpoint after the resumed run: %s" % meta)

straight = os.path.join(wd, "straight")
run_train(train, straight, 2, flags + ["--rejoin-timeout", "0"], val=val)
assert_no_leftovers(straight)
d, name = weights_diff(os.path.join(straight, "model.safetensors"), os.path.join(out, "model.safetensors"))
print("straight vs SIGTERM in epoch 0 + resumed: largest weight difference %.3g (%s)" % (d, name), flush=True)
check(d == 0, "weights after SIGTERM in epoch 0 + resume differ from the straight run's: %s by %.3g"
      % (name, d))
a, b = train_losses(straight), train_losses(out)
check(a.get(1) == b.get(1), "epoch 1 train loss %s (straight) vs %s (resumed)" % (a.get(1), b.get(1)))
print("1 passed, 0 failed")
