"""Garbage pushed into a training job's gradient ring (issue 11: "a 7-byte
PUSH into the gradient ring killed a training job"). Two gpuds train over
loopback TCP with fixed ring endpoints; before the job starts, a stranger
(python3-zmq, no protocol) connects a PUSH to each rank's ring PULL and
queues junk: 7-byte frames, a ring-sized header with a foreign op, a header
alone, three-frame messages. ZeroMQ's fair queueing hands it to the ring
between the real chunks of the first reductions. The job must finish, each
rank must log the drops, and the trained weights and summary counts must be
byte-identical to a clean run's.
"""
import os
import shutil
import struct
import subprocess
import time
from ddp_it import *

try:
    import zmq
except ImportError:
    fail("python3-zmq is needed (scripts/install-deps.sh --test)")

wd = workdir("ring-garbage")
data = idx_subset("train", 0, 512)
procs = {}
deadline = time.time() + 400            # an upper bound on the whole test, never a pace


def start(out, name, argv):
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    log = open(os.path.join(out, "logs", name + ".log"), "w")
    procs[name] = subprocess.Popen([os.path.join(BIN, argv[0])] + argv[1:], stdout=log, stderr=log)


def logtext(out, name):
    return read(os.path.join(out, "logs", name + ".log"))


def all_logs(out):
    return "".join("---- %s\n%s\n" % (n, logtext(out, n)[-2500:]) for n in sorted(procs))


def finish(out):
    for name in ("reducerd", "reporterd", "loaderd", "gpud.0", "gpud.1"):
        try:
            rc = procs[name].wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            fail("%s did not finish\n%s" % (name, all_logs(out)))
        check(rc == 0, "%s exited %d\n%s" % (name, rc, all_logs(out)))
    procs.clear()


def train(out, before_coordinator=None):
    ep = {k: "tcp://127.0.0.1:%d" % free_port() for k in ("reducer", "events", "loader")}
    rings = ["tcp://127.0.0.1:%d" % free_port() for _ in range(2)]
    # the gpuds first: their rings are bound before anything is trained
    for r in range(2):
        start(out, "gpud.%d" % r, ["gpud", "--loader", ep["loader"], "--reducer", ep["reducer"],
              "--train", "--rank", str(r), "--threads", "1", "--window", "2", "--seed", "7",
              "--global-batch-size", "64", "--in-channels", "1", "--lr", "0.05", "--momentum",
              "0.9", "--ring-bind", rings[r], "--ring-timeout", "60", "--save-weights",
              os.path.join(out, "model.safetensors")] + TRAIN_MODEL)
    if before_coordinator:
        before_coordinator(rings)
    start(out, "reducerd", ["reducerd", "--bind", ep["reducer"], "--pub", ep["events"], "--train",
          "--workers", "2", "--epochs", "2", "--no-val", "--worker-timeout", "10"])
    start(out, "reporterd", ["reporterd", "--sub", ep["events"], "--reducer", ep["reducer"],
          "--out", out])
    start(out, "loaderd", ["loaderd", "--data", data, "--bind", ep["loader"], "--reducer",
          ep["reducer"], "--train", "--workers", "2", "--global-batch-size", "64",
          "--batch-size", "64", "--epochs", "2", "--seed", "7", "--threads", "1",
          "--worker-timeout", "10"])
    finish(out)


ctx = zmq.Context()
junk_socks = []


def push_junk(rings):
    hdr = struct.pack("<QIIQ", 99, 0, 0, 5)           # a ring header of another operation
    for ep in rings:
        s = ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IMMEDIATE, 1)                # queue only once connected to the ring
        s.setsockopt(zmq.SNDTIMEO, 60000)             # a bound, never a pace
        s.connect(ep)
        for i in range(30):
            s.send(b"garbage")                        # the 7-byte PUSH of the issue
            s.send_multipart([hdr, b"\0" * 20])
            s.send(hdr)
            s.send_multipart([b"a", b"b", b"c"])
        junk_socks.append(s)
    print("queued 120 junk messages into each rank's ring", flush=True)


clean = os.path.join(wd, "clean")
train(clean)
dirty = os.path.join(wd, "junk")
train(dirty, push_junk)
for s in junk_socks:
    s.close()
ctx.term()

for r in range(2):
    log = logtext(dirty, "gpud.%d" % r)
    check("gradient ring: dropped a frame" in log,
          "rank %d logged no dropped ring frame:\n%s" % (r, log[-3000:]))
check(counts(dirty) == counts(clean), "counts differ: %r\nclean: %r" % (counts(dirty), counts(clean)))
check(read(os.path.join(dirty, "model.safetensors"), "rb")
      == read(os.path.join(clean, "model.safetensors"), "rb"),
      "the weights trained with junk in the ring differ from the clean run's")
print("2 epochs, %d samples: junk dropped on both ranks, weights and counts equal the clean run's"
      % summary(dirty)["samples"], flush=True)
assert_no_leftovers(wd)
shutil.rmtree(wd, ignore_errors=True)
print("OK", flush=True)
