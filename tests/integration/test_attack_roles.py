"""Roles are bound to the sockets that joined (proto/PROTOCOL.md "Trust"):
reducerd between fake peers. A second loader cannot JOIN while the first is
alive, nor PLAN, ISSUE or report FAILED; a live worker's name cannot be
taken over; a HEARTBEAT with a wrong token and a DONE from a non-reporter
are refused. Then the real loader's plan completes with exact counts and
the refusals counted in the metric's `rejected`."""
import os
import struct
import subprocess
import time
from ddp_it import *
from ddp_trust import auth

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")
from ddp_fake import expect_msg, new_dealer, pack, wait_log

JOIN, WELCOME, PLAN, HEARTBEAT, RESULT, FAILED, STOP, DONE, ISSUED = 1, 2, 3, 5, 8, 9, 10, 11, 13
ctx = zmq.Context()
wd = workdir("attack-roles")
ep, pub = "ipc://%s/reducer" % wd, "ipc://%s/events" % wd
logpath = os.path.join(wd, "reducerd.log")


def dealer(identity):
    return new_dealer(ctx, ep, identity)


def expect(sock, t, timeout=20):
    return expect_msg(sock, t, logpath, timeout)




sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"metric")
sub.setsockopt(zmq.SUBSCRIBE, b"~reporter")      # counts as reporterd's subscription
sub.connect(pub)
with open(logpath, "w") as log:
    proc = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", ep, "--pub", pub,
                             "--worker-timeout", "30", "--done-timeout", "10", "--verbose"], stdout=log, stderr=log)
try:
    wait_log(proc, logpath, "reporterd subscribed")
    loader = dealer(b"loader")
    loader.send(pack(JOIN, role=2, pid=1, want_rank=-1, name="loader-1", host="h", backend=""))
    names = ["c0", "c1", "c2"]
    loader.send(pack(PLAN, epoch=0, phase=0, n=4, class_names=names, dataset="real"))
    ack = expect(loader, WELCOME)
    la = auth(ack["job"], ack["session"], ack["token"])
    loader.send(pack(HEARTBEAT, worker="loader-1", rank=-1, batches_done=0, rejected=0, **la))

    # a second loader while the first is alive: its JOIN, PLAN, ISSUED, FAILED are refused
    rogue = dealer(b"rogue")
    rogue.send(pack(JOIN, role=2, pid=2, want_rank=-1, name="loader-2", host="h", backend=""))
    wait_log(proc, logpath, "rejected JOIN from loader-2: a second loader while loader-1 is alive")
    rogue.send(pack(PLAN, epoch=0, phase=0, n=2, class_names=["x"], dataset="hijack"))
    rogue.send(pack(FAILED, epoch=0, phase=0, id=0, path="p", reason="forged", **la))   # stolen token
    rogue.send(pack(ISSUED, seq=1, epoch=0, phase=0, rank=0, n=1, ids=struct.pack("<Q", 0),
                    labels=struct.pack("<i", 2), **la))
    wait_log(proc, logpath, "rejected PLAN from unjoined")
    wait_log(proc, logpath, "rejected FAILED from unjoined")
    wait_log(proc, logpath, "rejected ISSUED from unjoined")
    # the real loader without its token
    loader.send(pack(FAILED, epoch=0, phase=0, id=1, path="p", reason="no token"))
    wait_log(proc, logpath, "rejected FAILED from loader-1: missing or wrong session token")

    # a worker, and a stranger taking its name while it is alive
    gpud = dealer(b"worker-a")
    gpud.send(pack(JOIN, role=1, pid=3, want_rank=-1, name="worker-a", host="h", backend="cpu"))
    w = expect(gpud, WELCOME)
    ga = auth(w["job"], w["session"], w["token"])
    thief = dealer(b"thief")
    thief.send(pack(JOIN, role=1, pid=4, want_rank=-1, name="worker-a", host="h", backend="cpu"))
    wait_log(proc, logpath, "rejected JOIN from worker-a: the name is held by a live gpud")
    check(not thief.poll(500), "the name thief got an answer")
    hb = dealer(b"worker-a.hb")
    hb.send(pack(HEARTBEAT, worker="worker-a", rank=w["rank"], batches_done=0,
                 **auth(w["job"], w["session"], b"\0" * 16)))
    wait_log(proc, logpath, "rejected HEARTBEAT from")
    stranger = dealer(b"stranger")
    stranger.send(pack(DONE, code=0, reason="forged"))
    wait_log(proc, logpath, "rejected DONE from unjoined")

    # the real job: ids 0..3 issued to the worker, answered once, all right
    ids, labels = [0, 1, 2, 3], [0, 1, 2, 0]
    loader.send(pack(ISSUED, seq=1, epoch=0, phase=0, rank=w["rank"], n=4, ids=struct.pack("<4Q", *ids),
                     labels=struct.pack("<4i", *labels), rejected=3, **la))
    topk = []
    for lab in labels:
        topk += [lab] + [c for c in range(3) if c != lab]
    gpud.send(pack(RESULT, rank=w["rank"], epoch=0, phase=0, seq=1, n=4, k=3, ids=struct.pack("<4Q", *ids),
                   labels=struct.pack("<4i", 2, 2, 2, 2),     # ignored: the ISSUED labels count
                   topk=struct.pack("<12i", *topk), loss=struct.pack("<4f", *[0.25] * 4), compute_s=0.1, **ga))
    metric = None
    end = time.time() + 30
    while metric is None and time.time() < end:
        if sub.poll(100):
            topic, body = sub.recv_multipart()
            if topic == b"metric":
                metric = msgpack.unpackb(body, raw=False)
    check(metric is not None, "no metric:\n" + read(logpath))
    reporter = dealer(b"reporter")
    reporter.send(pack(JOIN, role=3, pid=5, want_rank=-1, name="reporterd", host="h", backend=""))
    time.sleep(0.2)
    reporter.send(pack(DONE, code=0, reason="ok"))
    check(proc.wait(timeout=30) == 0, "reducerd exited %s:\n%s" % (proc.returncode, read(logpath)))
finally:
    if proc.poll() is None:
        proc.kill()
check(metric["samples"] == 4 and metric["correct_top1"] == 4 and metric["failed"] == 0 and
      metric["planned"] == 4, "metric %r" % metric)
# JOIN, PLAN, FAILED, ISSUED (rogue), FAILED (no token), JOIN (thief), HEARTBEAT, DONE
# = 8 by reducerd, plus loaderd's reported 3
check(metric.get("rejected", 0) >= 8 + 3, "metric rejected %r, want >= 11" % metric.get("rejected"))
print("roles bound: %d rejected, counts exact" % metric["rejected"], flush=True)
print("1 passed, 0 failed")
