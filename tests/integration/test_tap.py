"""reporterd's tap under a fake reducerd (python3-zmq/msgpack, written from
proto/PROTOCOL.md): every event is re-published; a monitor that subscribes
mid-run first gets the last worker (per rank), progress and metric events,
then every later event -- checked with the Python example monitor of
PROTOCOL.md (extracted from the document and run as is) and with
`ddpipe tap --json`. A subscriber that never reads cannot slow the reporter
down: 5000 events still go through at once and the job ends normally."""
import ast
import json
import os
import re
import struct
import subprocess
import sys
import time
from ddp_it import *

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

ctx = zmq.Context()
wd = workdir("tap")
ipc = lambda name: "ipc://%s/%s" % (wd, name)
NAMES = ["c0", "c1", "c2"]


def ev(**kw):
    return msgpack.packb(dict(v=2, **kw), use_bin_type=True)


def progress(done, total=100):
    return [b"progress", ev(epoch=0, phase=0, done=done, total=total, images_per_sec=50.0,
                            eta_s=(total - done) / 50.0, workers=2, elapsed_s=done / 50.0,
                            failed=0, rejected=0, rank_done=struct.pack("<2Q", done // 2, done - done // 2))]


def worker(rank, state="joined"):
    return [b"worker", ev(rank=rank, name="gpud-%d" % rank, host="h", state=state, images_per_sec=0.0)]


def metric(correct, final=False):
    dense = (2, 1, 0, 0, 3, 0, 0, 0, 1)    # the nonzero cells: (true, pred, count) each
    conf = b"".join(struct.pack("<IIQ", i // 3, i % 3, n) for i, n in enumerate(dense) if n)
    return [b"metric", ev(epoch=0, phase=0, final=final, planned=7, samples=7, failed=0,
                          correct_top1=correct, correct_top5=7, duplicates=0, loss_sum=1.75,
                          class_names=NAMES, workers=2, wall_s=1.0, images_per_sec=7.0, lr=0.0,
                          confusion_cells=conf)]


def example_monitor():
    """The Python example of PROTOCOL.md, byte for byte."""
    doc = read(os.path.join(SRC, "proto", "PROTOCOL.md"))
    m = re.search(r"### Example monitor.*?```python\n(.*?)```", doc, re.S)
    check(m, "PROTOCOL.md lost its Python example monitor")
    code = m.group(1)
    check(len(code.strip().splitlines()) <= 30, "the example monitor is longer than 30 lines")
    path = os.path.join(wd, "tap_example.py")
    with open(path, "w") as f:
        f.write(code)
    return path


class Lines:
    """A child's stdout read line by line with a deadline."""

    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        os.set_blocking(self.p.stdout.fileno(), False)
        self.buf = ""
        self.lines = []

    def wait_for(self, pred, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, line in enumerate(self.lines):
                if pred(line):
                    return i
            try:
                chunk = os.read(self.p.stdout.fileno(), 65536).decode(errors="replace")
            except BlockingIOError:
                chunk = None
            if chunk:
                self.buf += chunk
                *done, self.buf = self.buf.split("\n")
                self.lines += done
            elif self.p.poll() is not None:
                break
            else:
                time.sleep(0.05)
        fail("%s: not seen in %ds; got:\n%s" % (what, timeout, "\n".join(self.lines + [self.buf])))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()


def example_event(line):
    topic, _, body = line.partition(" ")
    return topic, ast.literal_eval(body)


def json_event(line):
    e = json.loads(line)
    return e["topic"], e


pub = ctx.socket(zmq.XPUB)
pub.setsockopt(zmq.SNDHWM, 0)  # as reducerd: never drop on the way to the reporter
pub.bind(ipc("events"))
router = ctx.socket(zmq.ROUTER)
router.bind(ipc("coord"))
out = os.path.join(wd, "run")
port = free_port()
log = open(os.path.join(wd, "reporterd.log"), "w")
rep = subprocess.Popen([os.path.join(BIN, "reporterd"), "--sub", ipc("events"), "--reducer", ipc("coord"),
                        "--out", out, "--tap", ipc("tap"), "--metrics-http", "127.0.0.1:%d" % port],
                       stdout=log, stderr=log)
monitors = []
try:
    deadline = time.time() + 20
    seen = set()
    while b"~reporter" not in seen and time.time() < deadline:
        if pub.poll(200):
            seen.add(pub.recv()[1:])
    check(b"~reporter" in seen, "reporterd never subscribed")

    # an early monitor sees the live stream
    early = ctx.socket(zmq.SUB)
    early.setsockopt(zmq.SUBSCRIBE, b"")
    early.connect(ipc("tap"))
    # the subscription reaches the tap when it does: log events (never
    # replayed) until one comes through, then a marker drains the rest
    probes, deadline = 0, time.time() + 60
    while not early.poll(100):
        check(time.time() < deadline, "the early monitor's subscription never reached the tap")
        pub.send_multipart([b"log", ev(level="info", daemon="reducerd", rank=-1, msg="probe")])
        probes += 1
    pub.send_multipart([b"log", ev(level="info", daemon="reducerd", rank=-1, msg="subscribed")])
    while b"subscribed" not in early.recv_multipart()[1]:
        check(early.poll(10000), "the early monitor lost the marker")
    for m in (worker(0), worker(1), progress(10), metric(5), progress(20)):
        pub.send_multipart(m)
    got = []
    while not (got and got[-1][0] == b"progress" and msgpack.unpackb(got[-1][1])["done"] == 20):
        check(early.poll(10000), "early monitor: stream stopped after %r" % [g[0] for g in got])
        got.append(early.recv_multipart())
    check([g[0] for g in got] == [b"worker", b"worker", b"progress", b"metric", b"progress"],
          "early monitor saw %r" % [g[0] for g in got])
    check(got[3][1] == metric(5)[1], "the tap changed the bytes of the metric event")
    print("early monitor saw every event, bytes unchanged", flush=True)

    # a stuck monitor: subscribes, never reads
    stuck = ctx.socket(zmq.SUB)
    stuck.setsockopt(zmq.RCVHWM, 1)
    stuck.setsockopt(zmq.SUBSCRIBE, b"")
    stuck.connect(ipc("tap"))

    # late monitors: the last state first, then every later event
    ex = Lines(["/usr/bin/python3", "-u", example_monitor(), ipc("tap")])
    js = Lines([os.path.join(BIN, "ddpipe"), "tap", "--json", ipc("tap")])
    monitors = [ex, js]
    for mon, parse in ((ex, example_event), (js, json_event)):
        i = mon.wait_for(lambda l: l.startswith("metric") or '"topic":"metric"' in l, "replayed metric")
        state = [parse(l) for l in mon.lines[:i + 1]]
        topics = [t for t, _ in state]
        check(topics.count("worker") == 2 and "progress" in topics,
              "late monitor's replay: %r" % topics)
        prog = [e for t, e in state if t == "progress"][-1]
        check(prog["done"] == 20, "replayed progress is not the last one: %r" % prog)
        met = [e for t, e in state if t == "metric"][-1]
        check(met["correct_top1"] == 5, "replayed metric %r" % met)
        if parse is json_event:  # the JSON names the phase as README and summary.json do
            check(met["phase"] == "eval" and prog["phase"] == "eval", "JSON phase: %r" % met)
    print("late monitors (PROTOCOL.md example, ddpipe tap --json) got the last state", flush=True)

    pub.send_multipart(progress(30))
    pub.send_multipart([b"log", ev(level="info", daemon="reducerd", rank=-1, msg="hello monitors")])
    pub.send_multipart(metric(6))
    for mon in monitors:
        mon.wait_for(lambda l: "hello monitors" in l, "a live log event")
        mon.wait_for(lambda l: ("'correct_top1': 6" in l) or ('"correct_top1":6' in l), "the new metric")
    print("late monitors see every later event", flush=True)

    # 5000 events with a stuck subscriber: the reporter keeps pace
    t0 = time.time()
    for k in range(5000):
        pub.send_multipart(progress(30 + k % 70))
    pub.send_multipart(metric(6, final=True))
    pub.send_multipart([b"end", ev(code=0, reason="ok")])
    while True:
        check(router.poll(30000), "reporterd never sent DONE (blocked by the stuck subscriber?)")
        frames = router.recv_multipart()
        done = msgpack.unpackb(frames[-1], raw=False)
        if done["t"] == 11:
            break
    dt = time.time() - t0
    check(done["code"] == 0, "DONE %r" % done)
    # blocked, it would never have sent DONE (the bounded waits above); the
    # time is a figure, not a check: no test depends on the machine's speed
    print("5000 events past a stuck subscriber in %.2fs" % dt, flush=True)
    check(rep.wait(timeout=30) == 0, "reporterd exited %s" % rep.returncode)
finally:
    for mon in monitors:
        mon.stop()
    if rep.poll() is None:
        rep.kill()
stuck_got = 0
while stuck.poll(100):
    stuck.recv_multipart()
    stuck_got += 1
check(stuck_got < 5000, "the stuck subscriber got all %d events: no high-water mark?" % stuck_got)
rlog = read(os.path.join(wd, "reporterd.log"))
check("exiting (%d events, 0 rejected" % (5011 + probes) in rlog,
      "reporterd did not take every one of the %d events" % (5011 + probes) + ":\n" + rlog[-2000:])
for f in ("summary.json", "throughput.png", "confusion.png", "f1.svg"):
    check(os.path.getsize(os.path.join(out, f)) > 0, "%s missing" % f)
print("1 passed, 0 failed")
