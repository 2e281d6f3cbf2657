"""A training rank that dies before it joined (issue 28, item 5) is a
failed start that names it: `ddpipe train --workers 3` whose gpud rank 1
is killed (SIGKILL) as it starts - a wrapper in a DDPIPE_BIN folder execs
the real daemons and kills that one before it can reach reducerd. The job
ends at that event, not after a coordinator timeout, with exit 1 and a
message naming rank 1, that it exited before it joined, and its log;
likewise with --min-workers 2 (elasticity applies once training runs).
No process is left behind."""
import os
import re
import stat
import subprocess
import time
from ddp_it import *

train = idx_subset("train", 0, 96)
wd = workdir("train-startup")
bindir = os.path.join(wd, "bin")
os.makedirs(bindir)
for prog in ("reducerd", "reporterd", "loaderd"):
    os.symlink(os.path.join(os.path.realpath(BIN), prog), os.path.join(bindir, prog))
wrapper = os.path.join(bindir, "gpud")
with open(wrapper, "w") as f:
    f.write('#!/bin/sh\n'
            '# rank 1 dies before it can join; the others are the real gpud\n'
            'case " $* " in *" --rank 1 "*) kill -9 $$ ;; esac\n'
            'exec "%s" "$@"\n' % os.path.join(os.path.realpath(BIN), "gpud"))
os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
flags = ["--batch-size", "24", "--epochs", "1", "--worker-timeout", "10"]

for extra in ([], ["--min-workers", "2"]):
    out = os.path.join(wd, "run%d" % len(extra))
    cmd = train_cmd(train, out, 3, flags + extra)
    env = dict(os.environ, DDPIPE_BIN=bindir)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                       env=env)
    dt = time.time() - t0
    print("ran %s in %.1fs (exit %d)" % (" ".join(cmd[2:]), dt, p.returncode), flush=True)
    err = p.stderr
    check(p.returncode == 1, "exit %d, want 1\nstderr:\n%s" % (p.returncode, err))
    check(re.search(r"gpud rank 1 \(gpud\.1\) exited before it joined \(killed by signal 9\)", err),
          "the failure does not say rank 1 exited before it joined:\n%s" % err)
    check(os.path.join(out, "logs", "gpud.1.log") in err, "the failure does not name rank 1's "
          "log:\n%s" % err)
    check("neither re-formed" not in err, "the job waited for a coordinator verdict:\n%s" % err)
    assert_no_leftovers(out)
print("1 passed, 0 failed")
