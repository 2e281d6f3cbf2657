"""gpud and reporterd only connect out, so garbage reaches them through their
peers: here a fake loaderd + reducerd (for gpud) and a fake reducerd (for
reporterd), written from proto/PROTOCOL.md with python3-zmq/msgpack, feed
them garbage, truncated and wrong-version messages between valid ones. They
must reject and count each one, and still answer the valid ones correctly."""
import os
import struct
import subprocess
import time
from ddp_it import *

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

ctx = zmq.Context()
wd = workdir("fake-peers")
ipc = lambda name: "ipc://%s/%s" % (wd, name)


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


GARBAGE = [
    [b"\x01\x02\x03"],                                  # not msgpack
    [pack(6)[:5]],                                      # truncated
    [msgpack.packb({"v": 99, "t": 10, "code": 0, "reason": "x"})],  # wrong version
    [pack(99)],                                         # unknown type
    [pack(6, seq=1, epoch=0, phase=0, n=2, c=1, h=28, w=28, ids=b"\0" * 16,
          labels=b"\0" * 8), b"\0" * 10],               # pixel frame too small
    [pack(10, code="zero", reason="x")],                # wrong field type
    [pack(10, code=0, reason="x"), b"extra frame"],     # extra frame
]


def recv_map(sock, timeout_ms=20000):
    if not sock.poll(timeout_ms):
        fail("no message within %d ms" % timeout_ms)
    frames = sock.recv_multipart()
    return frames[0], msgpack.unpackb(frames[-1], raw=False)


# ---- gpud between a fake loader and a fake reducer -----------------------
loader = ctx.socket(zmq.ROUTER)
loader.bind(ipc("loader"))
reducer = ctx.socket(zmq.ROUTER)
reducer.bind(ipc("reducer"))
log = open(os.path.join(wd, "gpud.log"), "w")
gpud = subprocess.Popen([os.path.join(BIN, "gpud"), "--loader", ipc("loader"), "--reducer", ipc("reducer"),
                         "--threads", "1", "--name", "fakeworker"] + WRN_ARGS, stdout=log, stderr=log)
try:
    ident, join = recv_map(reducer)
    check(join["t"] == 1 and join["role"] == 1 and join["name"] == "fakeworker", "bad JOIN %r" % join)
    for g in GARBAGE:
        reducer.send_multipart([ident] + g)
    reducer.send_multipart([ident, pack(2, rank=0, world=1, job="fake")])
    # the first CREDIT (window) arrives on the loader socket
    while True:
        lid, credit = recv_map(loader)
        if credit["t"] == 4:
            break
    check(credit["credits"] >= 1, "first CREDIT asks for nothing: %r" % credit)
    for g in GARBAGE:
        loader.send_multipart([lid] + g)
    # one valid batch: the first 3 Fashion-MNIST test images, all black here
    ids = struct.pack("<3Q", 5, 6, 7)
    labels = struct.pack("<3i", 9, 2, 1)
    loader.send_multipart([lid, pack(6, seq=42, epoch=0, phase=0, n=3, c=1, h=28, w=28, ids=ids, labels=labels),
                           bytes(3 * 28 * 28)])
    while True:
        _, res = recv_map(reducer)
        if res["t"] == 8:
            break
    check(res["seq"] == 42 and res["n"] == 3 and res["k"] == 5, "bad RESULT %r" % res)
    check(struct.unpack("<3Q", res["ids"]) == (5, 6, 7), "RESULT ids %r" % (res["ids"],))
    top = struct.unpack("<15i", res["topk"])
    check(all(0 <= c < 10 for c in top) and top[0:5] == top[5:10] == top[10:15],
          "identical images got different top-5: %r" % (top,))
    while True:
        _, ack = recv_map(loader)
        if ack["t"] == 4 and ack["acks"]:
            break
    check(struct.unpack("<Q", ack["acks"][:8])[0] == 42, "CREDIT does not ack batch 42: %r" % ack)
    reducer.send_multipart([ident, pack(10, code=0, reason="done")])
    check(gpud.wait(timeout=30) == 0, "gpud exited %s" % gpud.returncode)
finally:
    if gpud.poll() is None:
        gpud.kill()
glog = read(os.path.join(wd, "gpud.log"))
import re
m = re.search(r"rejected", glog)
check(glog.count("rejected") >= 2 * len(GARBAGE) - 2,
      "gpud logged %d rejects for %d garbage messages:\n%s" % (glog.count("rejected"), 2 * len(GARBAGE), glog))
print("gpud rejected the garbage and answered the valid batch", flush=True)

# ---- reporterd under a fake reducer ---------------------------------------
pub = ctx.socket(zmq.XPUB)
pub.bind(ipc("events"))
router = ctx.socket(zmq.ROUTER)
router.bind(ipc("coord"))
out = os.path.join(wd, "run")
log = open(os.path.join(wd, "reporterd.log"), "w")
rep = subprocess.Popen([os.path.join(BIN, "reporterd"), "--sub", ipc("events"), "--reducer", ipc("coord"),
                        "--out", out], stdout=log, stderr=log)
try:
    seen = set()
    deadline = time.time() + 20
    while b"~reporter" not in seen and time.time() < deadline:   # wait for its subscription
        if pub.poll(200):
            seen.add(pub.recv()[1:])
    check(b"~reporter" in seen, "reporterd never subscribed")
    names = ["c%d" % i for i in range(3)]
    dense = (2, 1, 0, 0, 3, 0, 0, 0, 1)                        # 7 samples, 6 right
    conf = b"".join(struct.pack("<IIQ", i // 3, i % 3, n) for i, n in enumerate(dense) if n)
    for g in GARBAGE:
        pub.send_multipart([b"metric"] + g[:1])
    pub.send_multipart([b"nonsense", pack(0)])
    pub.send_multipart([b"metric", msgpack.packb(dict(
        v=2, epoch=0, phase=0, final=True, planned=8, samples=7, failed=1, correct_top1=6, correct_top5=7,
        duplicates=0, loss_sum=1.75, class_names=names, workers=1, wall_s=1.0, images_per_sec=7.0, lr=0.0,
        confusion_cells=conf), use_bin_type=True)])
    pub.send_multipart([b"failed", msgpack.packb(dict(v=2, epoch=0, phase=0, id=3, path="c1/bad.jpg",
                                                      reason="truncated"), use_bin_type=True)])
    pub.send_multipart([b"end", msgpack.packb(dict(v=2, code=0, reason="ok"), use_bin_type=True)])
    while True:
        _, done = recv_map(router)
        if done["t"] == 11:
            break
    check(done["code"] == 0, "reporterd DONE says %r" % done)
    check(rep.wait(timeout=30) == 0, "reporterd exited %s" % rep.returncode)
finally:
    if rep.poll() is None:
        rep.kill()
s = summary(out)
check(s["samples"] == 7 and s["correct_top1"] == 6 and s["failed"] == 1, "summary from fake events: %r" % s)
check(abs(s["loss"] - 0.25) < 1e-12, "loss %r, want 0.25" % s["loss"])
check(s["failed_files"][0]["path"] == "c1/bad.jpg", "failed_files %r" % s["failed_files"])
rlog = read(os.path.join(wd, "reporterd.log"))
check(rlog.count("rejected") >= len(GARBAGE), "reporterd did not log its rejects:\n" + rlog)
print("reporterd rejected the garbage and wrote the run directory", flush=True)
print("1 passed, 0 failed")
