"""No hang, ever (issue 11): heartbeats and rejected messages are not
progress. A fake loader plans 10 samples and issues one batch; a worker that
joined answers it with an out-of-range class (refused, and reducerd asks the
loader to REISSUE it), then only heart-beats and sends more refused
RESULTs. reducerd --stall-timeout 3 must fail the job, saying what is
missing and why, although messages never stop arriving."""
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
from ddp_fake import expect_msg, new_dealer, pack

JOIN, WELCOME, PLAN, HEARTBEAT, RESULT, STOP, ISSUED, REISSUE = 1, 2, 3, 5, 8, 10, 13, 14
ctx = zmq.Context()
wd = workdir("attack-stall")
ep = "ipc://%s/reducer" % wd
logpath = os.path.join(wd, "reducerd.log")


def dealer(identity):
    return new_dealer(ctx, ep, identity)


def expect(sock, t, timeout=20):
    return expect_msg(sock, t, logpath, timeout)


with open(logpath, "w") as log:
    proc = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", ep, "--pub", "ipc://%s/events" % wd,
                             "--reporters", "0", "--stall-timeout", "3", "--worker-timeout", "30"],
                            stdout=log, stderr=log)
try:
    loader = dealer(b"loader")
    loader.send(pack(JOIN, role=2, pid=1, want_rank=-1, name="fake-loader", host="h", backend=""))
    loader.send(pack(PLAN, epoch=0, phase=0, n=10, class_names=["c%d" % i for i in range(10)],
                     dataset="fake"))
    ack = expect(loader, WELCOME)
    check(len(ack.get("secret", b"")) == 32 and len(ack.get("token", b"")) == 16 and ack.get("session"),
          "the plan ack carries no session/token/secret: %r" % ack)
    la = auth(ack["job"], ack["session"], ack["token"])
    gpud = dealer(b"worker")
    hb = dealer(b"worker.hb")
    gpud.send(pack(JOIN, role=1, pid=2, want_rank=-1, name="worker", host="h", backend="cpu"))
    w = expect(gpud, WELCOME)
    ga = auth(w["job"], w["session"], w["token"])
    ids = struct.pack("<5Q", 0, 1, 2, 3, 4)
    labels = struct.pack("<5i", 0, 1, 2, 3, 4)
    loader.send(pack(ISSUED, seq=1, epoch=0, phase=0, rank=w["rank"], n=5, ids=ids, labels=labels, **la))

    def bad_result(seq):
        gpud.send(pack(RESULT, rank=w["rank"], epoch=0, phase=0, seq=seq, n=5, k=1, ids=ids, labels=labels,
                       topk=struct.pack("<5i", 99, 0, 1, 2, 3), loss=struct.pack("<5f", *[1.0] * 5),
                       compute_s=0.1, **ga))

    bad_result(1)
    re_ask = expect(loader, REISSUE)
    check(re_ask["seq"] == 1 and "predicts class 99" in re_ask["reason"], "REISSUE %r" % re_ask)
    # keep talking: heartbeats (valid) and refused RESULTs, never progress
    t0 = time.time()
    seq = 2
    while proc.poll() is None and time.time() - t0 < 60:
        hb.send(pack(HEARTBEAT, worker="worker", rank=w["rank"], batches_done=0, **ga))
        bad_result(1)          # answered already: a replay
        seq += 1
        time.sleep(0.2)
    check(proc.poll() is not None, "reducerd still running after 60 s of heartbeats without progress:\n%s"
          % read(logpath))
    check(proc.returncode == 1, "reducerd exited %d, want 1" % proc.returncode)
    st = expect(loader, STOP, timeout=5)
finally:
    if proc.poll() is None:
        proc.kill()
reason = st["reason"]
check(st["code"] == 1 and "no progress for 3s" in reason and "0 of 10 samples" in reason and
      "RESULTs were rejected" in reason and "class 99" in reason, "STOP reason: %r" % reason)
print("stalled job failed after %.1fs of heartbeats: %s" % (time.time() - t0, reason), flush=True)
print("1 passed, 0 failed")
