"""Elastic training (docs/ELASTIC.md): a rank lost during `ddpipe train` costs
the interrupted step, not the job. A small WideResNet, 232 Fashion-MNIST
samples, 3 ranks, G = 64 (4 steps an epoch), 2 epochs, --sync-bn, plain SGD
at lr 0.001, seed 3: test_train_invariance.py's job, whose weights agree
within 4e-6 for W = 1, 2 and 3 (with 3 epochs, or seed 5, W = 2 and 3
already differ by 2-4e-5 in a running_var: float rounding of the summed
statistics, not elasticity, would be under test):

  kill1    --fault 1:5 (rank 1 SIGKILLs itself before step 5): exit 0,
           membership.csv and summary.json record the loss, and the final
           weights equal an uninterrupted 3-rank run's within 1e-5;
  kill2    --fault 0:3 (rank 0, the checkpoint writer and the ring's first
           segment), then, once the survivors formed generation 1, the old
           rank 2 is killed too: one rank finishes, exit 0, weights equal;
  sigstop  rank 2 is paused (SIGSTOP) once epoch 0's checkpoint exists,
           continued (SIGCONT) once a survivor committed a step of the new
           generation (its --verbose step line):
           exit 0, weights equal, the continued rank exits non-zero saying
           it was fenced out (its late gradients never count);
  minimum  --min-workers 3 and --fault 1:5: a clear error naming the rank,
           a checkpoint of the last committed step, from which --resume
           ends with the uninterrupted run's weights.

No assertion on speed: every wait is on an event (a log line, a file, an
exit) and bounded."""
import csv
import os
import signal
import subprocess
from ddp_it import *
from ddp_elastic import FLAGS as flags, SPE, data, file_has, finish, gpud_of, same_weights, wait_for
from ddp_elastic import check_lost, log_has, logged_after, membership_rows

train, val = data()
wd = workdir("elastic")


def gpud_pid(out, rank):
    return gpud_of(out, rank)[0]


# the uninterrupted run every other is compared with
base = os.path.join(wd, "straight")
run_train(train, base, 3, flags, val=val)
assert_no_leftovers(base)

# kill1: one rank of three, mid-epoch 1
out = os.path.join(wd, "kill1")
p = run_train(train, out, 3, flags + ["--fault", "1:%d" % (SPE + 1)], val=val)
assert_no_leftovers(out)
same_weights(base, out, "kill1")
check_lost(out, "kill1", [1], 2)
base_losses, losses = train_losses(base), train_losses(out)
check(losses.keys() == base_losses.keys() and
      all(abs(losses[e] - base_losses[e]) <= 1e-5 for e in losses),
      "kill1: train losses %r, uninterrupted %r" % (losses, base_losses))
print("kill1: one rank lost at step %d, the job went on with 2" % (SPE + 1), flush=True)

# kill2: rank 0 (writer, first segment) dies, then the old rank 2: one rank finishes
out = os.path.join(wd, "kill2")
proc = subprocess.Popen(train_cmd(train, out, 3, flags + ["--fault", "0:3"], val=val),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wait_for("generation 1 at rank 2", lambda: log_has(out, 2, "membership generation 1"), proc)
pid = gpud_pid(out, 2)
check(pid is not None, "kill2: no gpud process of rank 2")
os.kill(pid, signal.SIGKILL)
finish(proc, out, "kill2")
assert_no_leftovers(out)
same_weights(base, out, "kill2")
check_lost(out, "kill2", [0, 2], 1)
check(log_has(out, 1, "membership generation 2"), "kill2: rank 1 never formed generation 2")
print("kill2: ranks 0 and 2 lost, rank 1 finished alone", flush=True)

# sigstop: rank 2 paused, fenced out, continued late
out = os.path.join(wd, "sigstop")
ckpt = os.path.join(out, "checkpoint.safetensors")
proc = subprocess.Popen(train_cmd(train, out, 3, flags + ["--verbose"], val=val),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wait_for("epoch 0's checkpoint", lambda: os.path.exists(ckpt), proc)
pid = gpud_pid(out, 2)
check(pid is not None, "sigstop: no gpud process of rank 2")
os.kill(pid, signal.SIGSTOP)
try:
    # moved on: a step the survivors committed in the new generation
    wait_for("a committed step of generation 1", lambda: logged_after(
        out, 0, "membership generation 1", "generation 1)"), proc)
finally:
    os.kill(pid, signal.SIGCONT)
finish(proc, out, "sigstop")
assert_no_leftovers(out)
same_weights(base, out, "sigstop")
check_lost(out, "sigstop", [2], 2)
text = read(os.path.join(out, "logs", "gpud.2.log"))
check("fenced" in text and "exiting" in text, "sigstop: the continued rank does not say it was fenced:\n%s"
      % text[-2000:])
print("sigstop: rank 2 paused, removed, fenced when continued", flush=True)

# minimum: --min-workers 3: a loss stops the job with a resumable checkpoint
out = os.path.join(wd, "minimum")
p = run_train(train, out, 3, flags + ["--min-workers", "3", "--rejoin-timeout", "0", "--fault", "1:%d" % (SPE + 1)], val=val,
              expect_rc=None)
check(p.returncode not in (0, 130), "minimum: exit %d\nstderr:\n%s" % (p.returncode, p.stderr))
check("rank 1" in p.stderr and "--resume" in p.stderr, "minimum: the error does not name rank 1 "
      "and the resume:\n%s" % p.stderr)
assert_no_leftovers(out)
_, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
check(meta.get("ckpt.step") == str(SPE + 1) and meta.get("ckpt.epoch") == "1",
      "minimum: checkpoint %s, want epoch 1 step %d (the last committed step)" % (meta, SPE + 1))
run_train(train, out, 3, flags + ["--resume", out], val=val)
assert_no_leftovers(out)
same_weights(base, out, "minimum + resume")
print("1 passed, 0 failed")
