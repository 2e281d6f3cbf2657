"""--wire jpeg lets a gpud report samples it could not decode (RESULT
'failed' + 'why', proto/PROTOCOL.md "Encoded samples"). reducerd takes
them only inside a RESULT that answers what was ISSUED to that rank: a
gpud that marks failed the ids of another batch is refused and those ids
stay uncounted; in a matching RESULT the failed rows count as failed
(named by the plan's path, with the gpud's reason) and the others as
results, with the ISSUED labels (not the ones the gpud sends).
reducerd between fake peers (python3-zmq, msgpack)."""
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

JOIN, WELCOME, PLAN, HEARTBEAT, RESULT, DONE, ISSUED, REISSUE = 1, 2, 3, 5, 8, 11, 13, 14
ctx = zmq.Context()
wd = workdir("wire-trust")
ep, pub = "ipc://%s/reducer" % wd, "ipc://%s/events" % wd
logpath = os.path.join(wd, "reducerd.log")




def result(seq, ids, failed=None, why=()):
    n = len(ids)
    topk = []
    for i in ids:
        lab = i % 3
        topk += [lab] + [c for c in range(3) if c != lab]
    extra = {}
    if failed is not None:
        extra = dict(failed=bytes(failed), why=list(why))
    return pack(RESULT, rank=w["rank"], epoch=0, phase=0, seq=seq, n=n, k=3,
                ids=struct.pack("<%dQ" % n, *ids), labels=struct.pack("<%di" % n, *[2] * n),
                topk=struct.pack("<%di" % (3 * n), *topk),
                loss=struct.pack("<%df" % n, *[0.5] * n), compute_s=0.1, **extra, **ga)


def issue(seq, ids):
    n = len(ids)
    loader.send(pack(ISSUED, seq=seq, epoch=0, phase=0, rank=w["rank"], n=n,
                     ids=struct.pack("<%dQ" % n, *ids),
                     labels=struct.pack("<%di" % n, *[i % 3 for i in ids]), **la))


sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"metric")
sub.setsockopt(zmq.SUBSCRIBE, b"failed")
sub.setsockopt(zmq.SUBSCRIBE, b"~reporter")
sub.connect(pub)
with open(logpath, "w") as log:
    proc = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", ep, "--pub", pub,
                             "--worker-timeout", "30", "--done-timeout", "10", "--verbose"],
                            stdout=log, stderr=log)
metric = None
failed_events = []
try:
    wait_log(proc, logpath, "reporterd subscribed")
    loader = new_dealer(ctx, ep, b"loader")
    loader.send(pack(JOIN, role=2, pid=1, want_rank=-1, name="loader-1", host="h", backend=""))
    paths = ["c%d/img%d.jpg" % (i % 3, i) for i in range(6)]
    loader.send(pack(PLAN, epoch=0, phase=0, n=6, class_names=["c0", "c1", "c2"],
                     dataset="wire", paths=paths))
    ack = expect_msg(loader, WELCOME, logpath)
    la = auth(ack["job"], ack["session"], ack["token"])
    gpud = new_dealer(ctx, ep, b"worker-a")
    gpud.send(pack(JOIN, role=1, pid=3, want_rank=-1, name="worker-a", host="h", backend="cpu"))
    w = expect_msg(gpud, WELCOME, logpath)
    ga = auth(w["job"], w["session"], w["token"])

    issue(1, [0, 1, 2])
    issue(2, [3, 4, 5])
    # batch 2 answered with batch 1's ids, all marked failed: refused, nothing counted
    gpud.send(result(2, [0, 1, 2], [1, 1, 1], ["forged"] * 3))
    wait_log(proc, logpath, "rejected RESULT from worker-a")
    re = expect_msg(loader, REISSUE, logpath)
    check(re["seq"] == 2, "REISSUE names seq %r, want 2" % re["seq"])
    # batch 1 answered right, its sample 1 did not decode at the gpud
    gpud.send(result(1, [0, 1, 2], [0, 1, 0], ["image file is truncated"]))
    issue(3, [3, 4, 5])
    gpud.send(result(3, [3, 4, 5]))
    end = time.time() + 30
    while metric is None and time.time() < end:
        if sub.poll(100):
            topic, body = sub.recv_multipart()
            if topic == b"metric":
                metric = msgpack.unpackb(body, raw=False)
            elif topic == b"failed":
                failed_events.append(msgpack.unpackb(body, raw=False))
    check(metric is not None, "no metric:\n" + read(logpath))
    reporter = new_dealer(ctx, ep, b"reporter")
    reporter.send(pack(JOIN, role=3, pid=5, want_rank=-1, name="reporterd", host="h", backend=""))
    time.sleep(0.2)
    reporter.send(pack(DONE, code=0, reason="ok"))
    check(proc.wait(timeout=30) == 0, "reducerd exited %s:\n%s" % (proc.returncode, read(logpath)))
finally:
    if proc.poll() is None:
        proc.kill()
check(metric["planned"] == 6 and metric["samples"] == 5 and metric["failed"] == 1 and
      metric["correct_top1"] == 5, "metric %r" % {k: metric.get(k) for k in
                                                  ("planned", "samples", "failed", "correct_top1")})
check(len(failed_events) == 1 and failed_events[0]["id"] == 1 and
      failed_events[0]["path"] == "c1/img1.jpg" and
      failed_events[0]["reason"] == "image file is truncated (decoded at gpud rank 0)",
      "failed events %r, want id 1 (c1/img1.jpg) only, the gpud's reason" % failed_events)
print("forged failures refused; a gpud's decode failure counted with the issued label")
print("1 passed, 0 failed")
