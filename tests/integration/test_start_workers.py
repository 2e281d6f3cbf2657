"""An eval's gpuds start together (reducerd --start-workers, which
`ddpipe eval` sets to --workers): reducerd over loopback, gpuds written
from proto/PROTOCOL.md.

  held:    --workers 2 --start-workers 2 --worker-timeout 1: the first
           gpud's JOIN is logged and left unanswered, and it is not
           declared dead while it waits without heartbeats (two liveness
           checks pass); the second's JOIN brings both their WELCOME,
           ranks 0 and 1 of 2.
  timeout: --workers 3 --start-workers 3 --start-timeout 1: the only gpud
           is welcomed after the timeout, with a warning saying how many
           came; a later one is welcomed at its JOIN.
  default: --workers 2 alone (--start-workers 1): a gpud is welcomed at
           its JOIN, as before.
  refused: --start-workers 3 with --workers 2: exit 2, saying why.
  failed:  --workers 3 --start-workers 3 --start-timeout 600: one gpud
           joins and is held; a real gpud whose weights file does not
           exist exits 1 and its JOIN `failed` reaches reducerd, which logs
           why once (a repeat is not logged again); a third whose start
           failed too (a fake's JOIN `failed`) ends the hold: the held one
           is welcomed, rank 0 of 3, long before --start-timeout. A loader
           JOIN with `failed` is refused as malformed.

Why: with a gpud ready first taking batches at once, a short job (it_exact's
four batches) was over before the third joined on a loaded machine, and
its summary said 2 workers for --workers 3. Every wait is on an event and
bounded; the two fixed pauses only prove an absence."""
import os
import subprocess
import time
from ddp_it import *

try:
    import msgpack
    import zmq
    from ddp_fake import pack, new_dealer, expect_msg, wait_log
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

JOIN, WELCOME = 1, 2
ctx = zmq.Context()
wd = workdir("start_workers")
procs = []


def reducerd(name, args):
    log = os.path.join(wd, name + ".log")
    ep = "tcp://127.0.0.1:%d" % free_port()
    with open(log, "w") as f:
        p = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", ep, "--pub",
                              "ipc://%s/%s-events" % (wd, name)] + args, stdout=f, stderr=f)
    procs.append(p)
    return p, ep, log


def join(ep, name):
    s = new_dealer(ctx, ep, name.encode())
    s.send(pack(JOIN, role=1, pid=os.getpid(), want_rank=-1, name=name, host="h", backend="cpu"))
    return s


try:
    # ---- held until the second joins --------------------------------------
    p, ep, log = reducerd("held", ["--workers", "2", "--start-workers", "2", "--worker-timeout", "1",
                                   "--start-timeout", "600"])
    a = join(ep, "gpud-a")
    wait_log(p, log, "1 of --start-workers 2 gpuds joined")
    # two of reducerd's once-a-second liveness checks: a held gpud is not judged
    check(not a.poll(2500), "gpud-a was answered before the second gpud joined:\n" + read(log))
    check("declared dead" not in read(log), "a held gpud was declared dead:\n" + read(log))
    b = join(ep, "gpud-b")
    wa, wb = expect_msg(a, WELCOME, log), expect_msg(b, WELCOME, log)
    check(sorted([wa["rank"], wb["rank"]]) == [0, 1] and wa["world"] == wb["world"] == 2,
          "WELCOMEs %r %r, want ranks 0 and 1 of 2" % (wa, wb))
    p.kill()

    # ---- started by the timeout; a later one at its JOIN --------------------
    p, ep, log = reducerd("timeout", ["--workers", "3", "--start-workers", "3",
                                      "--start-timeout", "1"])
    a = join(ep, "gpud-a")
    wa = expect_msg(a, WELCOME, log, timeout=60)
    check("only 1 of --start-workers 3 gpuds joined within --start-timeout 1s" in read(log),
          "no warning naming the gpuds that came:\n" + read(log))
    b = join(ep, "gpud-b")
    wb = expect_msg(b, WELCOME, log)
    check(wa["rank"] == 0 and wb["rank"] == 1 and wb["world"] == 3, "WELCOMEs %r %r" % (wa, wb))
    p.kill()

    # ---- the default: at once -------------------------------------------------
    p, ep, log = reducerd("default", ["--workers", "2"])
    a = join(ep, "gpud-a")
    wa = expect_msg(a, WELCOME, log)
    check(wa["rank"] == 0 and wa["world"] == 2, "WELCOME %r" % wa)
    check("--start-workers" not in read(log), "the default held a gpud:\n" + read(log))
    p.kill()

    # ---- the others could not start: no wait for --start-timeout ---------------
    p, ep, log = reducerd("failed", ["--workers", "3", "--start-workers", "3",
                                     "--start-timeout", "600"])
    a = join(ep, "gpud-a")
    wait_log(p, log, "1 of --start-workers 3 gpuds joined")
    g = subprocess.run([os.path.join(BIN, "gpud"), "--reducer", ep, "--loader",
                        "tcp://127.0.0.1:%d" % free_port(), "--model", "resnet18", "--weights",
                        os.path.join(wd, "no-such-weights.safetensors"), "--name", "gpud-b",
                        "--join-timeout", "5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    check(g.returncode == 1 and "no-such-weights" in g.stdout,
          "gpud with a missing weights file: exit %d\n%s" % (g.returncode, g.stdout))
    wait_log(p, log, "gpud gpud-b on ")
    check("could not start: cannot set up model resnet18" in read(log) and
          "no-such-weights" in read(log), "reducerd's log names why gpud-b failed:\n" + read(log))
    check(not a.poll(300), "gpud-a was answered with one of three still to come:\n" + read(log))
    c = new_dealer(ctx, ep, b"gpud-c")
    for _ in range(2):   # said twice, logged once
        c.send(pack(JOIN, role=1, pid=os.getpid(), want_rank=-1, name="gpud-c", host="h",
                    backend="cpu", failed="cannot set up model resnet18: out of device memory"))
    wa = expect_msg(a, WELCOME, log, timeout=60)
    check(wa["rank"] == 0 and wa["world"] == 3, "WELCOME %r, want rank 0 of 3" % wa)
    check("the others could not start: they start now" in read(log) and
          "--start-timeout" not in read(log).split("could not start: they start now")[1],
          "the hold ended on the failed starts, not on the timeout:\n" + read(log))
    check(read(log).count("gpud gpud-c on h") == 1, "gpud-c's failure logged once:\n" + read(log))
    check(not c.poll(300), "a gpud that failed to start was answered:\n" + read(log))
    ld = new_dealer(ctx, ep, b"loader-x")
    ld.send(pack(JOIN, role=2, pid=os.getpid(), want_rank=-1, name="loader-x", host="h",
                 backend="", failed="nothing"))
    wait_log(p, log, "rejected JOIN: 'failed' on a loaderd JOIN")
    p.kill()

    # ---- more to wait for than the world ---------------------------------------
    r = subprocess.run([os.path.join(BIN, "reducerd"), "--bind", "tcp://127.0.0.1:1",
                        "--pub", "ipc://%s/x" % wd, "--workers", "2", "--start-workers", "3"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    check(r.returncode == 2 and "--start-workers 3 is more than --workers 2" in r.stdout,
          "reducerd --start-workers 3 --workers 2: exit %d\n%s" % (r.returncode, r.stdout))
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
print("1 passed, 0 failed")
