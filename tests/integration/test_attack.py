"""Attacks on a running eval job (issue 11, "only valid messages count", "no
hang, ever"): real daemons over loopback TCP, attackers written from
proto/PROTOCOL.md with python3-zmq/msgpack. The job must end with exactly
the clean run's counts and predictions.csv, and summary.json must count the
rejected messages.

  forged:   RESULTs from a socket that never joined (claiming rank 0, every
            prediction right), a PLAN and 1000 FAILEDs from a non-loader
  replay:   a real gpud's RESULT, captured by a relay between it and
            reducerd, sent again on its own connection (same seq twice) and
            by a stranger
  class:    a worker that joined (valid token) answers its batches with
            class 99 of a 10-class dataset: refused (not job-fatal), the
            batches go to the real gpuds, the operator hint is logged
  stranger: a CREDIT to loaderd without a token (and one with a made-up
            token) gets no batch
  stuck:    a worker that joined, takes batches and heart-beats to both
            daemons but never answers: dropped after --worker-timeout, its
            batches re-issued; no hang
"""
import os
import re
import struct
import subprocess
import threading
import time
from ddp_it import *
from ddp_trust import auth

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

JOIN, WELCOME, PLAN, CREDIT, HEARTBEAT, BATCH, END, RESULT, FAILED, STOP = range(1, 11)
ctx = zmq.Context()
data = jpeg_folder(997)
wd = workdir("attack")
ref = os.path.join(wd, "ref")
run_eval(data, ref, 1, 32, extra=["--predictions", "topk"])
ref_counts = counts(ref)
check(summary(ref).get("rejected_messages") == 0,
      "a clean run rejected messages: %r" % summary(ref).get("rejected_messages"))

out = os.path.join(wd, "run")
os.makedirs(os.path.join(out, "logs"))
ep = {k: "tcp://127.0.0.1:%d" % free_port() for k in ("reducer", "events", "loader", "relay")}
procs = {}
deadline = time.time() + 240        # an upper bound on the whole attack run, never a pace


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


def unpack(b):
    return msgpack.unpackb(b, raw=False)


def start(name, argv):
    log = open(os.path.join(out, "logs", name + ".log"), "w")
    procs[name] = subprocess.Popen([os.path.join(BIN, argv[0])] + argv[1:], stdout=log, stderr=log)


def logtext(name):
    return read(os.path.join(out, "logs", name + ".log"))


def wait_for(what, cond, timeout=60):
    end = min(deadline, time.time() + timeout)
    while time.time() < end:
        if cond():
            return
        for name, p in procs.items():
            check(p.poll() is None, "%s exited %s while waiting for %s:\n%s" % (
                name, p.returncode, what, logtext(name)[-3000:]))
        time.sleep(0.05)
    fail("timed out waiting for %s\nreducerd:\n%s\nloaderd:\n%s" % (
        what, logtext("reducerd")[-3000:], logtext("loaderd")[-3000:]))


def dealer(endpoint, identity=None):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if identity:
        s.setsockopt(zmq.IDENTITY, identity)
    s.connect(endpoint)
    return s


def recv(sock, timeout_ms):
    if not sock.poll(timeout_ms):
        return None
    frames = sock.recv_multipart()
    return unpack(frames[0]), frames


class Worker:
    """A fake gpud that JOINs reducerd for real (so it holds a valid token)
    and takes batches from loaderd; answer(batch) -> RESULT fields or None."""

    def __init__(self, name, answer):
        self.name, self.answer = name, answer
        self.red = dealer(ep["reducer"], name.encode())
        self.loader = dealer(ep["loader"], name.encode())
        self.hb_red = dealer(ep["reducer"], (name + ".hb").encode())
        self.hb_loader = dealer(ep["loader"], (name + ".hb").encode())
        self.batches, self.sent, self.stop = [], 0, False
        self.red.send(pack(JOIN, role=1, pid=os.getpid(), want_rank=-1, name=name, host="attacker",
                           backend="cpu"))
        while True:
            m = recv(self.red, 20000)
            check(m is not None, "%s: no WELCOME from reducerd" % name)
            if m[0]["t"] == WELCOME:
                break
        w = m[0]
        self.rank, self.auth = w["rank"], auth(w["job"], w["session"], w["token"])
        self.credit(2)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def credit(self, n, acks=()):
        self.loader.send(pack(CREDIT, worker=self.name, credits=n, rank=self.rank,
                              acks=struct.pack("<%dQ" % len(acks), *acks), **self.auth))

    def run(self):
        last_beat = 0
        while not self.stop:
            if time.time() - last_beat > 0.3:   # heart-beats, always (they must not matter)
                for s in (self.hb_red, self.hb_loader):
                    s.send(pack(HEARTBEAT, worker=self.name, rank=self.rank, batches_done=0, **self.auth))
                last_beat = time.time()
            m = recv(self.loader, 50)
            if not m or m[0]["t"] != BATCH:
                continue
            b = m[0]
            self.batches.append(b)
            res = self.answer(b)
            if res is not None:
                self.red.send(pack(RESULT, rank=self.rank, epoch=b["epoch"], phase=b["phase"],
                                   seq=b["seq"], n=b["n"], ids=b["ids"], labels=b["labels"],
                                   compute_s=0.01, **res, **self.auth))
                self.sent += 1
                self.credit(1, [b["seq"]])

    def close(self):
        self.stop = True
        self.thread.join(timeout=10)
        for s in (self.red, self.loader, self.hb_red, self.hb_loader):
            s.close()


def class99(b):
    n = b["n"]
    return dict(k=5, topk=struct.pack("<%di" % (5 * n), *([99, 0, 1, 2, 3] * n)),
                loss=struct.pack("<%df" % n, *([0.5] * n)))


class Relay:
    """Forwards a real gpud's reducer traffic (both of its sockets) and
    keeps the first RESULT it carries."""

    def __init__(self):
        self.front = ctx.socket(zmq.ROUTER)
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.bind(ep["relay"])
        self.back, self.captured, self.stop, self.replay = {}, None, False, False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        while not self.stop:
            if self.replay and self.captured:   # the captured bytes again, same connection
                ident, frame = self.captured
                self.back[ident].send(frame)
                self.replay = False
            for s, _ in poller.poll(50):
                if s is self.front:
                    frames = self.front.recv_multipart()
                    ident = frames[0]
                    if ident not in self.back:
                        self.back[ident] = dealer(ep["reducer"], ident)
                        poller.register(self.back[ident], zmq.POLLIN)
                    if self.captured is None and unpack(frames[1])["t"] == RESULT:
                        self.captured = (ident, frames[1])
                    self.back[ident].send_multipart(frames[1:])
                else:
                    ident = next(i for i, d in self.back.items() if d is s)
                    self.front.send_multipart([ident] + s.recv_multipart())

    def close(self):
        self.stop = True
        self.thread.join(timeout=10)
        for s in list(self.back.values()) + [self.front]:
            s.close()


workers = []
relay = None
try:
    start("reducerd", ["reducerd", "--bind", ep["reducer"], "--pub", ep["events"], "--workers", "2",
                       "--predictions", "topk", "--worker-timeout", "3", "--stall-timeout", "120"])
    start("reporterd", ["reporterd", "--sub", ep["events"], "--reducer", ep["reducer"], "--out", out])
    start("loaderd", ["loaderd", "--data", data, "--bind", ep["loader"], "--reducer", ep["reducer"],
                      "--batch-size", "32", "--channels", "1", "--predictions", "topk", "--worker-timeout", "3",
                      "--threads", "1"])
    wait_for("the plan at reducerd", lambda: "plan: epoch 0 eval" in logtext("reducerd"))

    # ---- forged: a socket that never joined ------------------------------
    ids = list(range(997))
    labels = [0] * 997          # whatever: the issued labels count, not these
    forger = dealer(ep["reducer"], b"forger")
    for seq in (1, 2, 3, 10 ** 6):
        forger.send(pack(RESULT, rank=0, epoch=0, phase=0, seq=seq, n=997, k=1,
                         ids=struct.pack("<997Q", *ids), labels=struct.pack("<997i", *labels),
                         topk=struct.pack("<997i", *labels), loss=struct.pack("<997f", *([0.0] * 997)),
                         compute_s=0.1))
    forger.send(pack(PLAN, epoch=0, phase=0, n=5, class_names=["a"], dataset="hijack"))
    for i in range(1000):
        forger.send(pack(FAILED, epoch=0, phase=0, id=i % 997, path="x", reason="forged"))
    wait_for("reducerd to refuse the forged RESULT",
             lambda: re.search(r"rejected RESULT from unjoined .*did not join", logtext("reducerd")))
    wait_for("reducerd to refuse the forged PLAN and FAILED",
             lambda: "rejected PLAN from unjoined" in logtext("reducerd") and
             "rejected FAILED from unjoined" in logtext("reducerd"))

    # ---- stranger: CREDIT without a valid token gets no batch ------------
    stranger = dealer(ep["loader"], b"stranger")
    stranger.send(pack(CREDIT, worker="stranger", credits=8, acks=b"", rank=0))
    stranger.send(pack(CREDIT, worker="stranger", credits=8, acks=b"", rank=0, job="ddpipe",
                       session=12345, token=b"\x01" * 16))
    wait_for("loaderd to refuse the stranger's CREDIT",
             lambda: "rejected CREDIT from stranger" in logtext("loaderd"))

    # ---- class: a joined worker answering class 99 -----------------------
    bad = Worker("attacker-class99", class99)
    workers.append(bad)
    wait_for("the class-99 answer to be refused",
             lambda: "predicts class 99 but the dataset has 10 classes" in logtext("reducerd"))
    wait_for("loaderd to re-issue the refused batch", lambda: "handing it out again" in logtext("loaderd"))

    # ---- stuck: joined, heart-beating, never answering -------------------
    stuck = Worker("attacker-stuck", lambda b: None)
    workers.append(stuck)
    wait_for("the stuck worker to hold batches", lambda: len(stuck.batches) >= 1)

    # ---- the real workers: rank 0 through a relay that captures a RESULT --
    relay = Relay()
    for r in range(2):
        red = ep["relay"] if r == 0 else ep["reducer"]
        start("gpud.%d" % r, ["gpud", "--loader", ep["loader"], "--reducer", red, "--rank", str(r),
                              "--threads", "1", "--in-channels", "1", "--name", "real-gpud-%d" % r]
              + WRN_ARGS)
    wait_for("a RESULT of rank 0 through the relay", lambda: relay.captured is not None, timeout=120)
    ident, frame = relay.captured
    # the same bytes on the gpud's own connection (its seq answered twice),
    # and from a stranger's socket (token and all)
    relay.replay = True
    replayer = dealer(ep["reducer"], b"replayer")
    replayer.send(frame)
    wait_for("the replays to be refused",
             lambda: "not an unanswered batch" in logtext("reducerd") and
             re.search(r"rejected RESULT from unjoined 7265706c61796572: claims rank \d+ but this "
                       r"socket did not join", logtext("reducerd")))
    wait_for("the stuck worker to be dropped",
             lambda: "attacker-stuck has not answered a batch" in logtext("loaderd"), timeout=120)

    rc = procs["reporterd"].wait(timeout=max(1, deadline - time.time()))
    check(rc == 0, "reporterd exited %d" % rc)
    for name, p in procs.items():
        check(p.wait(timeout=30) == 0, "%s exited %d:\n%s" % (name, p.returncode, logtext(name)[-3000:]))
finally:
    for w in workers:
        w.close()
    if relay:
        relay.close()
    for p in procs.values():
        if p.poll() is None:
            p.kill()

check_counts(out, ref_counts)
check(read(os.path.join(out, "predictions.csv")) == read(os.path.join(ref, "predictions.csv")),
      "predictions.csv differs from the clean run")
s = summary(out)
# 4 forged RESULTs + 1 PLAN + 1000 FAILED + the class-99 answers + 2 replays
want = 4 + 1 + 1000 + 1 + 2
check(s.get("rejected_messages", 0) >= want, "rejected_messages %r, want >= %d" % (
    s.get("rejected_messages"), want))
print("counts exact; rejected_messages %d" % s["rejected_messages"], flush=True)
rlog, llog = logtext("reducerd"), logtext("loaderd")
check(bad.sent >= 1, "the class-99 worker never answered a batch")
check(not stranger.poll(0), "the stranger got a message from loaderd")
check("rank " in rlog and "--num-classes" in rlog, "no operator hint for the class mismatch")
# never a flood: at most a few lines per (peer, kind) although 1000 FAILEDs came
check(rlog.count("rejected FAILED") <= 3, "reducerd logged %d lines for the forged FAILEDs" %
      rlog.count("rejected FAILED"))
print("1 passed, 0 failed")
