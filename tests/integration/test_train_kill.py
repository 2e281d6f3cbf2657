"""A rank that dies mid-training, leaving fewer than --min-workers ranks (2
of 2 here; an elastic job goes on: test_elastic.py), ends the job in
bounded time with a message naming it, leaves no process behind and a checkpoint of the last completed
step, from which --resume finishes with the uninterrupted run's weights.
Ctrl-C checkpoints too (exit 130)."""
import os
import signal
import subprocess
import time
from ddp_it import *

train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-kill")
spe = (160 + 47) // 48  # 4 steps of 48 per epoch
flags = ["--batch-size", "24", "--seed", "9", "--lr", "0.05", "--momentum", "0.9", "--epochs", "3",
         "--min-workers", "2", "--rejoin-timeout", "0", "--worker-timeout", "2", "--ring-timeout", "5"]
FAULT_STEP = spe + 2      # epoch 1, step 2

out = os.path.join(wd, "killed")
p = run_train(train, out, 2, flags + ["--fault", "1:%d" % FAULT_STEP], val=val, expect_rc=None)
check(p.returncode not in (0, 130), "a killed rank: exit %d\nstderr:\n%s" % (p.returncode, p.stderr))
# bounded, not fast: what this rules out is waiting for --stall-timeout (600 s)
# or the commit timeouts; 120 s leaves a loaded 2-core CI box under ASan room
check(p.seconds < 120, "a killed rank: the job took %.1fs to fail (bound 120s)" % p.seconds)
check("rank 1" in p.stderr, "the failure does not name rank 1:\n%s" % p.stderr)
check("--resume" in p.stderr, "the failure does not say how to resume:\n%s" % p.stderr)
assert_no_leftovers(out)
ckpt = os.path.join(out, "checkpoint.safetensors")
check(os.path.exists(ckpt), "no checkpoint after the failure")
_, meta = safetensors_read(ckpt)
check(meta.get("ckpt.step") == str(FAULT_STEP) and meta.get("ckpt.epoch") == "1",
      "checkpoint after rank 1 died before step %d: want epoch 1 step %d (the last completed step), "
      "metadata %s" % (FAULT_STEP, FAULT_STEP, meta))
check(not os.path.exists(os.path.join(out, "model.safetensors")), "final weights written by a failed run")

run_train(train, out, 2, flags + ["--resume", out], val=val)
assert_no_leftovers(out)
straight = os.path.join(wd, "straight")
run_train(train, straight, 2, flags, val=val)
d, name = weights_diff(os.path.join(straight, "model.safetensors"), os.path.join(out, "model.safetensors"))
print("straight vs killed+resumed: largest weight difference %.3g (%s)" % (d, name), flush=True)
check(d <= 1e-5, "weights after kill + resume differ from the straight run's: %s by %.3g" % (name, d))

# Ctrl-C once the first epoch is done: exit 130, a checkpoint, nothing left
out = os.path.join(wd, "sigint")
proc = subprocess.Popen(train_cmd(train, out, 2, flags[:-1] + ["50"], val=val), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
while time.time() < deadline and not os.path.exists(os.path.join(out, "checkpoint.safetensors")):
    time.sleep(0.1)
proc.send_signal(signal.SIGINT)
_, err = proc.communicate(timeout=120)   # bounds a hang; no speed is judged
check(proc.returncode == 130, "Ctrl-C: exit %d, want 130; stderr:\n%s" % (proc.returncode, err))
check("--resume" in err, "Ctrl-C: no resume hint:\n%s" % err)
assert_no_leftovers(out)
_, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
check(int(meta.get("ckpt.step", "0")) >= spe, "checkpoint after Ctrl-C: %s" % meta)
print("1 passed, 0 failed")
