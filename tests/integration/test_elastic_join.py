"""Ranks joining a running training job (docs/ELASTIC.md "Joining"): the job
of test_elastic.py (a small WideResNet, 232 Fashion-MNIST samples, G = 64,
4 steps an epoch, 2 epochs, --sync-bn, seed 3), whose weights agree within
1e-5 for any number of ranks. A joiner is a gpud started by hand with a
live rank's command line, --reducer turned into --join (what a compose
file's numprocs raise starts):

  scaleup   2 ranks, 2 loaderds (--loaders 2: the joiner gets both
            endpoints from the live rank's command line), --max-workers 3,
            --pause-at-step 5 (the test hook that
            pauses the job before step 5 until a rank joins, so the joiner
            enters at a known step whatever the machine's speed): first a
            joiner with another --lr is refused with the flag named and
            exits 1 while the job goes on, then a good one gets the state of
            step 4 from rank 0, enters as rank 2, and the job ends with exit
            0, ranks_joined 1, world_size 3, a "joined" row in
            membership.csv, and weights equal to an uninterrupted run's;
  replace   2 ranks, --min-workers 2, --fault 1:5: rank 1 dies, the job
            pauses (one rank is below the minimum); a joiner takes the
            empty place and the job ends as if nothing happened;
  expire    the same without a joiner and --rejoin-timeout 1: the job
            stops with the reason and a checkpoint of the last committed
            step.

Every wait is on an event (a log line, an exit) and bounded."""
import atexit
import os
import subprocess
import time
from ddp_it import *
from ddp_elastic import FLAGS as flags, SPE, data, file_has, finish, gpud_of, joiner_cmd, same_weights, wait_for

train, val = data()
wd = workdir("elastic_join")
JOINERS = []   # started by hand, so ended by hand: a failed check leaves none behind


@atexit.register
def _end_joiners():
    for p in JOINERS:
        if p.poll() is None:
            p.kill()


def start_job(out, extra):
    return subprocess.Popen(train_cmd(train, out, 2, flags + ["--verbose"] + extra, val=val),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_joiner(out, name, change=None):
    args = None
    for _ in range(200):   # rank 0 is up once the job paused
        args = gpud_of(out, 0)[1]
        if args:
            break
        time.sleep(0.05)
    check(args is not None, "no gpud of rank 0 in %s" % out)
    log = os.path.join(out, "%s.log" % name)
    f = open(log, "w")
    p = subprocess.Popen(joiner_cmd(args, name, change), stdout=f, stderr=subprocess.STDOUT)
    JOINERS.append(p)
    f.close()
    return p, log


def wait_exit(p, what, timeout=300):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("%s did not exit within %d s" % (what, timeout))


def check_joined(out, what, world, lost):
    import csv
    with open(os.path.join(out, "membership.csv")) as f:
        rows = list(csv.DictReader(f))
    check(any(r.get("change") == "joined" and r.get("name") == "joiner-%s" % what for r in rows),
          "%s: membership.csv has no row of joiner-%s joining: %s" % (what, what, rows))
    t = summary(out).get("training") or {}
    check(t.get("ranks_joined") == 1 and t.get("ranks_lost") == lost and
          t.get("world_size") == world,
          "%s: summary.json's training %r, want ranks_joined 1, ranks_lost %d, world_size %d"
          % (what, t, lost, world))


base = os.path.join(wd, "straight")
run_train(train, base, 2, flags, val=val)
assert_no_leftovers(base)

# scaleup: 2 -> 3 at step 5; a joiner with another --lr is refused first
out = os.path.join(wd, "scaleup")
proc = start_job(out, ["--max-workers", "3", "--pause-at-step", str(SPE + 1),
                       "--rejoin-timeout", "300", "--loaders", "2"])
reducer_log = os.path.join(out, "logs", "reducerd.log")
wait_for("the pause", lambda: file_has(reducer_log, "paused with 2 ranks"), proc)
bad, bad_log = start_joiner(out, "joiner-bad", {"--lr": "0.002"})
rc = wait_exit(bad, "the mismatched joiner")
text = read(bad_log)
check(rc == 1 and "refused" in text and "--lr 0.002" in text and "0.001" in text,
      "scaleup: the joiner with --lr 0.002 exited %d without naming the flag:\n%s" % (rc, text[-2000:]))
good, good_log = start_joiner(out, "joiner-scaleup")
finish(proc, out, "scaleup")
check(wait_exit(good, "the joiner") == 0, "scaleup: the joiner failed:\n%s" % read(good_log)[-3000:])
check("entered the job as rank 2 of 3 at step %d" % (SPE + 1) in read(good_log),
      "scaleup: the joiner does not say it entered as rank 2 at step %d:\n%s" % (SPE + 1, read(good_log)[-3000:]))
assert_no_leftovers(out)
same_weights(base, out, "scaleup")
check_joined(out, "scaleup", 3, 0)
print("scaleup (2 loaderds): a mismatched joiner refused, a third rank joined at step %d"
      % (SPE + 1), flush=True)

# replace: rank 1 dies below --min-workers 2; a joiner takes its place
out = os.path.join(wd, "replace")
proc = start_job(out, ["--min-workers", "2", "--fault", "1:%d" % (SPE + 1), "--rejoin-timeout", "300"])
wait_for("the pause", lambda: file_has(os.path.join(out, "logs", "reducerd.log"), "paused with 1 rank"), proc)
good, good_log = start_joiner(out, "joiner-replace")
finish(proc, out, "replace")
check(wait_exit(good, "the joiner") == 0, "replace: the joiner failed:\n%s" % read(good_log)[-3000:])
assert_no_leftovers(out)
same_weights(base, out, "replace")
check_joined(out, "replace", 2, 1)
print("replace: rank 1 lost, the job paused, a joiner took its place", flush=True)

# expire: nobody joins within --rejoin-timeout 1
out = os.path.join(wd, "expire")
p = run_train(train, out, 2, flags + ["--min-workers", "2", "--fault", "1:%d" % (SPE + 1),
                                      "--rejoin-timeout", "1"], val=val, expect_rc=None)
check(p.returncode not in (0, 130) and "--rejoin-timeout" in p.stderr and "--resume" in p.stderr,
      "expire: exit %d, stderr does not name --rejoin-timeout and --resume:\n%s" % (p.returncode, p.stderr))
assert_no_leftovers(out)
_, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
check(meta.get("ckpt.step") == str(SPE + 1),
      "expire: checkpoint %s, want step %d (the last committed step)" % (meta, SPE + 1))
print("expire: no joiner within --rejoin-timeout: a clear stop, resumable")
print("1 passed, 0 failed")
