"""A worker that dies mid-run (a crash hook, and a real kill -9) changes
nothing: its unanswered batches go to the others and the summary counts and
predictions.csv are byte-identical to a one-worker run.

The kill -9 runs 211 one-sample batches (the prime-sized folder of
test_exact.py) against a one-worker run of the same 211: one-sample batches
keep the job running long after rank 0 joins, and loaderd declaring the
victim dead proves the kill landed mid-job. 997 one-sample batches took
45 s here for the same property."""
import os
import signal
import subprocess
import time
from ddp_it import *

data = jpeg_folder(997)
wd = workdir("fault")
ref = os.path.join(wd, "ref")
run_eval(data, ref, 1, 16, extra=["--predictions", "topk"])
ref_counts, ref_preds = counts(ref), read(os.path.join(ref, "predictions.csv"))


def same_as_ref(out):
    c = counts(out)
    for k in COUNT_KEYS:
        check(c[k] == ref_counts[k], "%s: %s=%r, one-worker run has %r" % (out, k, c[k], ref_counts[k]))
    check(read(os.path.join(out, "predictions.csv")) == ref_preds,
          "%s: predictions.csv differs from the one-worker run" % out)


# 1. rank 1 dies (SIGKILL from inside) when it receives its 4th batch
out = os.path.join(wd, "crash-hook")
run_eval(data, out, 3, 7, extra=["--predictions", "topk", "--fault", "1:3", "--worker-timeout", "2"])
same_as_ref(out)
check("declared dead" in read(os.path.join(out, "logs", "loaderd.log")),
      "loaderd did not report the dead worker")
assert_no_leftovers(out)

# 2. a real kill -9 of rank 0 from outside while it works
data = jpeg_folder(211)
ref = os.path.join(wd, "ref-211")
run_eval(data, ref, 1, 16, extra=["--predictions", "topk"])
ref_counts, ref_preds = counts(ref), read(os.path.join(ref, "predictions.csv"))
out = os.path.join(wd, "kill9")
cmd = eval_cmd(data, out, 2, 1, extra=["--predictions", "topk", "--worker-timeout", "2"])
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
victim = None
deadline = time.time() + 60
while victim is None and time.time() < deadline and proc.poll() is None:
    for pid, name in our_processes(out):
        if name == "gpud" and b"--rank\x000\x00" in read("/proc/%d/cmdline" % pid, "rb"):
            log = os.path.join(out, "logs", "gpud.0.log")
            if os.path.exists(log) and "joined job" in read(log):
                victim = pid
    time.sleep(0.05)
check(victim is not None, "could not find a running gpud rank 0 to kill")
# at once: a job of 211 one-sample batches is still running (no timer
# decides whether the kill lands mid-job; the "declared dead" check below
# fails if it did not)
os.kill(victim, signal.SIGKILL)
stdout, stderr = proc.communicate(timeout=300)
check(proc.returncode == 0, "job with a killed worker failed (%d): %s" % (proc.returncode, stderr))
same_as_ref(out)
check("declared dead" in read(os.path.join(out, "logs", "loaderd.log")),
      "loaderd did not report the killed worker: the kill did not land mid-job")
assert_no_leftovers(out)
print("1 passed, 0 failed")
