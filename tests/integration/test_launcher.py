"""ddpipe eval as a user meets it: clear errors with a non-zero exit for wrong
weights or data, Ctrl-C stops everything, and no process is ever left behind."""
import os
import signal
import subprocess
import time
from ddp_it import *

data = jpeg_folder(997)
wd = workdir("launcher")

# wrong weights: default WideResNet widths against the small demo weights
out = os.path.join(wd, "wrong-weights")
p = run_eval(data, out, 2, 8, model_args=["--model", "wideresnet", "--weights", DEMO_WEIGHTS],
             expect_rc=None)
check(p.returncode != 0, "wrong weights: exit 0")
msg = p.stderr
check("input_block.cbr.0.weight" in msg or "block1" in msg,
      "wrong weights: the error does not name the tensor:\n" + msg)
assert_no_leftovers(out)

# a dataset that does not exist
out = os.path.join(wd, "no-data")
p = run_eval(os.path.join(wd, "nope"), out, 1, 8, expect_rc=None)
check(p.returncode != 0 and "nope" in p.stderr, "missing dataset: exit %d, stderr:\n%s" % (p.returncode, p.stderr))
assert_no_leftovers(out)

# Ctrl-C in the middle of a job
out = os.path.join(wd, "sigint")
proc = subprocess.Popen(eval_cmd("idx:%s/t10k" % FMNIST, out, 2, 1), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
while time.time() < deadline:
    log = os.path.join(out, "logs", "gpud.1.log")
    if os.path.exists(log) and "joined job" in read(log):
        break
    time.sleep(0.1)
# The workers are stopped while Ctrl-C lands, so the job cannot finish
# first on a fast machine; they go on only to receive the launcher's stop.
workers = [pid for pid, name in our_processes(out) if name == "gpud"]
for pid in workers:
    os.kill(pid, signal.SIGSTOP)
proc.send_signal(signal.SIGINT)
for pid in workers:
    os.kill(pid, signal.SIGCONT)
_, err = proc.communicate(timeout=60)
check(proc.returncode == 130, "Ctrl-C: exit %d, want 130; stderr:\n%s" % (proc.returncode, err))
assert_no_leftovers(out)

# the launcher killed with SIGKILL: its daemons die with it
out = os.path.join(wd, "sigkill")
proc = subprocess.Popen(eval_cmd("idx:%s/t10k" % FMNIST, out, 2, 1), stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
deadline = time.time() + 60
while time.time() < deadline:   # killed mid-job: once a worker has joined, not after a timer
    log = os.path.join(out, "logs", "gpud.1.log")
    if os.path.exists(log) and "joined job" in read(log):
        break
    time.sleep(0.1)
proc.kill()
proc.wait()
assert_no_leftovers(out)
print("1 passed, 0 failed")
