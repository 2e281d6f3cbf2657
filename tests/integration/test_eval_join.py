"""An eval worker that joins mid-run (docs/ELASTIC.md, issue 13 item 4):
`ddpipe eval` with one worker on 300 Fashion-MNIST JPEGs; once it answered
a batch it is paused (SIGSTOP), so the job cannot end without help, and a
second gpud started by hand with the first one's command line (another
--name) joins. It takes the batches (the paused worker's in-flight ones
are handed out again when reducerd declares it dead), and the job ends
with exit 0 and the same exact counts as an uninterrupted run, the joiner
having answered batches. Every wait is on an event and bounded.

300 images (5 batches of 64), not 997: what is checked is the hand-over of
batches (the paused worker's first, the rest to the joiner) and the exact
counts, for which the first batch and a few more suffice; the 997 were
two more whole evaluations' worth of images under ASan."""
import atexit
import os
import re
import signal
import subprocess
import time
from ddp_it import *
from ddp_elastic import gpud_of

data = jpeg_folder(300)
wd = workdir("eval_join")
extra = ["--worker-timeout", "2", "--verbose"]

base = os.path.join(wd, "straight")
run_eval(data, base, 1)
want = counts(base)


def answered_a_batch(out):
    try:
        return " samples in " in read(os.path.join(out, "logs", "gpud.0.log"), "rb").decode(errors="replace")
    except OSError:
        return False


out = os.path.join(wd, "joined")
proc = subprocess.Popen(eval_cmd(data, out, 1, extra=extra), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
deadline = time.time() + 180
pid, args = None, None
while time.time() < deadline and proc.poll() is None:
    pid, args = gpud_of(out, 0)
    if pid and answered_a_batch(out):
        break
    time.sleep(0.02)
check(pid is not None and proc.poll() is None, "eval_join: the worker never answered a batch")
os.kill(pid, signal.SIGSTOP)
try:
    joiner = [a for a in args]
    if "--name" in joiner:
        i = joiner.index("--name")
        del joiner[i:i + 2]
    joiner += ["--name", "gpud-joiner"]
    log = open(os.path.join(wd, "joiner.log"), "w")
    jp = subprocess.Popen(joiner, stdout=log, stderr=subprocess.STDOUT)
    atexit.register(lambda: jp.poll() is None and jp.kill())   # never left behind
    log.close()
    try:
        so, se = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        so, se = proc.communicate()
        fail("eval_join: the job did not end\n%s" % se)
    jrc = jp.wait(timeout=120)
finally:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass   # ddpipe ended it with the job
check(proc.returncode == 0, "eval_join: exit %d\n%s" % (proc.returncode, se))
check(jrc == 0, "eval_join: the joiner exited %d:\n%s" % (jrc, read(os.path.join(wd, "joiner.log"))))
got = counts(out)
check(got == want, "eval_join: counts %r, uninterrupted %r" % (got, want))
# the joiner did the work (it may have taken the paused worker's rank if
# reducerd declared that one dead first: the summary's worker count varies)
m = re.search(r"exiting: (\d+) batches", read(os.path.join(wd, "joiner.log")))
check(m is not None and int(m.group(1)) > 0, "eval_join: the joiner answered no batch:\n%s"
      % read(os.path.join(wd, "joiner.log"))[-2000:])
assert_no_leftovers(out)
print("eval_join: a worker joined mid-run while the first was paused; counts exact %r" % (got,))
print("1 passed, 0 failed")
