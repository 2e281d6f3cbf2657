"""reducerd --train as a process between fake peers (python3-zmq/msgpack,
written from proto/PROTOCOL.md and docs/TRAINING.md): two gpud ranks, a
loaderd and a reporterd (a JOINed DEALER plus an event subscriber).

  gang:     no WELCOME before all --workers ranks joined; then WELCOME
            train=1 with next_ring = the ring of rank (r+1) % W; a JOIN
            beyond W gets STOP(1)
  epochs:   train and validation tallies side by side (the validation
            PLAN arrives before the last train result), exact counts of
            two epochs (failed sample, duplicates, PLAN skip), per-rank
            images/s from compute_s, the epoch's lr, EPOCH to loader and
            every rank, early stop by patience, end + STOP(0) + DONE
  dead:     a rank that stops its heartbeats fails the job: STOP(1) and an
            end event naming rank, epoch, step and the resume directory
  no-val:   --no-val decides on train tallies alone, by --epochs
"""
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from ddp_it import BIN, check, fail, workdir  # noqa: E402
from ddp_trust import auth  # noqa: E402

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

ctx = zmq.Context()
JOIN, WELCOME, PLAN, HEARTBEAT, RESULT, FAILED, STOP, DONE, EPOCH, ISSUED = 1, 2, 3, 5, 8, 9, 10, 11, 12, 13
MEMBERS, STEP, COMMIT = 15, 16, 17
TRAIN, EVAL = 1, 0
NAMES = ["a", "b", "c"]


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


class Peer:
    """A fake daemon's DEALER to reducerd and what it received."""

    def __init__(self, s, name):
        self.s = s
        self.name = name
        self.inbox = []
        self.rank = -1
        self.auth = {}         # job, session, token from its WELCOME (PROTOCOL.md "Trust")
        self.gen = 0           # its membership generation (MEMBERS)

    def send(self, frame):
        self.s.send(frame)


class Job:
    """reducerd plus the fake peers of one scenario."""

    def __init__(self, name, args):
        self.wd = workdir("reducerd-train-" + name)
        self.ep = "ipc://%s/reducer" % self.wd
        pub = "ipc://%s/events" % self.wd
        self.log = os.path.join(self.wd, "reducerd.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", self.ep, "--pub", pub,
                                          "--train", "--done-timeout", "10", "--verbose"] + args,
                                         stdout=log, stderr=log)
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.setsockopt(zmq.SUBSCRIBE, b"~reporter")   # counts as reporterd's subscription
        self.sub.connect(pub)
        self.events = []
        self.beating = []          # gpuds sending heartbeats while we wait
        self.last_beat = 0
        self.peers = []
        self.reporter = self.peer("reporterd-1", 3)
        # events published before the subscription arrives are lost (PUB):
        # start once reducerd has seen it, as the real reporterd's join does
        end = time.time() + 10
        while "reporterd subscribed" not in open(self.log).read():
            check(time.time() < end, "reducerd never saw the subscription\n" + open(self.log).read())
            time.sleep(0.02)

    def peer(self, name, role, ring="", want=-1):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(self.ep)
        s.send(pack(JOIN, role=role, pid=os.getpid(), want_rank=want, name=name, host="test",
                    backend="cpu" if role == 1 else "", ring=ring))
        peer = Peer(s, name)
        self.peers.append(peer)
        if role == 2:
            LOADER[0] = peer
        return peer

    def pump(self, dt=0.05):
        """Read everything that arrived (events, messages to peers) for dt
        seconds; heartbeats from the beating ranks every 0.3 s."""
        end = time.time() + dt
        while True:
            if time.time() - self.last_beat > 0.3:
                for g in self.beating:
                    g.send(pack(HEARTBEAT, worker=g.name, rank=g.rank, batches_done=0, **g.auth))
                self.last_beat = time.time()
            poller = zmq.Poller()
            poller.register(self.sub, zmq.POLLIN)
            for p in self.peers:
                poller.register(p.s, zmq.POLLIN)
            left = end - time.time()
            ready = dict(poller.poll(max(0, min(left, 0.1)) * 1000))
            if self.sub in ready:
                topic, body = self.sub.recv_multipart()
                ev = msgpack.unpackb(body, raw=False)
                ev["topic"] = topic.decode()
                self.events.append(ev)
                if ev["topic"] == "end":
                    self.reporter.send(pack(DONE, code=0, reason="ok"))
            for p in self.peers:
                if p.s in ready:
                    p.inbox.append(msgpack.unpackb(p.s.recv(), raw=False))
            if time.time() >= end and not ready:
                return

    def expect(self, sock, t, timeout=10.0):
        """The next message of type t to sock (others before it are kept)."""
        end = time.time() + timeout
        while time.time() < end:
            for i, m in enumerate(sock.inbox):
                if m["t"] == t:
                    if t == WELCOME and m.get("session"):
                        sock.rank = m["rank"] if "secret" not in m else -1
                        sock.auth = auth(m["job"], m["session"], m["token"])
                    if t == MEMBERS and m.get("session"):   # a new rank, a new token
                        sock.rank, sock.gen = m["rank"], m["gen"]
                        sock.auth = auth(sock.auth["job"], m["session"], m["token"])
                    return sock.inbox.pop(i)
            self.pump(0.05)
        fail("%s got no message of type %d within %.0fs (inbox %r)\n%s" % (
            sock.name, t, timeout, sock.inbox, open(self.log).read()))

    def quiet(self, sock, t, dt=0.4):
        self.pump(dt)
        check(all(m["t"] != t for m in sock.inbox), "%s got an early type-%d message: %r\n%s" % (
            sock.name, t, sock.inbox, open(self.log).read()))

    def metrics(self):
        return [e for e in self.events if e["topic"] == "metric"]

    def end(self, code, timeout=15):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("reducerd did not exit\n" + open(self.log).read())
        self.pump(0.2)
        check(rc == code, "reducerd exited %d, want %d\n%s" % (rc, code, open(self.log).read()))
        for p in self.peers:
            p.s.close()
        self.sub.close()
        ends = [e for e in self.events if e["topic"] == "end"]
        check(len(ends) == 1, "want one end event, got %r" % ends)
        return ends[0]


def plan(loader, epoch, phase, n, skip=0):
    loader.send(pack(PLAN, epoch=epoch, phase=phase, n=n, skip=skip, class_names=NAMES,
                     dataset="fake", **loader.auth))


LOADER = [None]   # the scenario's loader: it ISSUEs every batch a RESULT answers
SEQ = [0]


def step(ranks, epoch, s, status=None):
    """STEP(s) from each rank (its share is summed): status maps a rank to
    (1, suspect) for a failed ring."""
    for g in ranks:
        st, suspect = (status or {}).get(g.rank, (0, -1))
        g.send(pack(STEP, rank=g.rank, gen=g.gen, epoch=epoch, step=s, status=st, suspect=suspect,
                    **g.auth))


def result(g, rank, epoch, phase, seq, ids, right, loss, lr=0.0, step=0, compute_s=0.5):
    """labels = id % 3; top-1 = the label where right(id), else the next class.
    The loader first ISSUEs the batch (a new seq each time: seq is ignored)."""
    SEQ[0] += 1
    seq = SEQ[0]
    labels = [i % 3 for i in ids]
    loader = LOADER[0]
    loader.send(pack(ISSUED, seq=seq, epoch=epoch, phase=phase, rank=rank, n=len(ids),
                     ids=struct.pack("<%dQ" % len(ids), *ids),
                     labels=struct.pack("<%di" % len(ids), *labels), **loader.auth))
    topk = []
    for i, lab in zip(ids, labels):
        first = lab if right(i) else (lab + 1) % 3
        topk += [first] + [c for c in range(3) if c != first]
    n = len(ids)
    g.send(pack(RESULT, rank=rank, epoch=epoch, phase=phase, seq=seq, n=n, k=3,
                ids=struct.pack("<%dQ" % n, *ids), labels=struct.pack("<%di" % n, *labels),
                topk=struct.pack("<%di" % (3 * n), *topk),
                loss=struct.pack("<%df" % n, *[loss(i) for i in ids]),
                compute_s=compute_s, lr=lr, step=step, gen=g.gen, **g.auth))


def final_done(g):
    """Rank 0: the final checkpoint and weights are written (after EPOCH(stop))."""
    g.send(pack(DONE, code=0, reason="the final checkpoint and weights are written"))


def near(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def scenario_epochs():
    J = Job("epochs", ["--workers", "2", "--epochs", "5", "--target-accuracy", "0.5",
                       "--patience", "2"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41000")
    J.beating = [g0]
    J.quiet(g0, WELCOME, 0.5)                        # alone: no WELCOME yet
    g1 = J.peer("g1", 1, ring="tcp://127.0.0.1:41001")
    J.beating = [g0, g1]
    w0, w1 = J.expect(g0, WELCOME), J.expect(g1, WELCOME)
    check(w0["rank"] == 0 and w1["rank"] == 1 and w0["world"] == 2 == w1["world"], "ranks %r %r" % (w0, w1))
    check(w0["train"] == 1 and w1["train"] == 1, "WELCOME without train=1: %r" % w0)
    check(w0["next_ring"] == "tcp://127.0.0.1:41001" and w1["next_ring"] == "tcp://127.0.0.1:41000",
          "ring order %r %r" % (w0, w1))
    g2 = J.peer("g2", 1, ring="tcp://127.0.0.1:41002")
    s2 = J.expect(g2, STOP)
    check(s2["code"] == 1 and "the job is full" in s2["reason"] and "--max-workers" in s2["reason"],
          "third rank: %r" % s2)
    print("gang: WELCOME only with both ranks, ring order, third rank refused", flush=True)

    loader = J.peer("loaderd-1", 2)
    # ---- epoch 0: 10 train samples, id 9 fails to load; ids 4, 7, 8 wrong
    plan(loader, 0, TRAIN, 10)
    J.expect(loader, WELCOME)
    wrong = {4, 7, 8}
    quarter = lambda i: i * 0.25
    result(g0, 0, 0, TRAIN, 1, [0, 1, 2, 3, 4], lambda i: i not in wrong, quarter, lr=0.1, step=0)
    result(g0, 0, 0, TRAIN, 1, [0, 1], lambda i: True, quarter, lr=0.1, step=0, compute_s=0.2)  # re-sent
    step([g0], 0, 0)
    J.quiet(g0, COMMIT)                              # rank 1 has not summed step 0 yet
    step([g1], 0, 0)
    for s in (g0, g1, loader):
        c = J.expect(s, COMMIT)
        check(c["gen"] == 0 and c["step"] == 0 and c["epoch"] == 0, "COMMIT to %s: %r" % (s.name, c))
    plan(loader, 0, EVAL, 6)                         # validation plan before the last train result
    J.expect(loader, WELCOME)
    result(g1, 1, 0, TRAIN, 2, [5, 6, 7, 8], lambda i: i not in wrong, quarter, lr=0.1, step=1,
           compute_s=0.25)
    step([g0, g1], 0, 1)
    loader.send(pack(FAILED, epoch=0, phase=TRAIN, id=9, path="x/9.png", reason="truncated",
                     **loader.auth))
    J.quiet(loader, EPOCH)                           # train complete, validation not yet
    result(g0, 0, 0, EVAL, 3, [0, 1, 2], lambda i: True, lambda i: 0.5)
    result(g1, 1, 0, EVAL, 4, [3, 4, 5], lambda i: i == 3, lambda i: 1.0)
    for s in (loader, g0, g1):
        e = J.expect(s, EPOCH)
        check(e["epoch"] == 0 and e["decision"] == 0 and e["streak"] == 1 and near(e["val_top1"], 4 / 6),
              "EPOCH 0 to %s: %r" % (s.name, e))
    J.pump(0.2)
    m = J.metrics()
    check(len(m) == 2, "want 2 metric events after epoch 0, got %d" % len(m))
    t, v = m
    check(t["phase"] == TRAIN and t["epoch"] == 0 and t["planned"] == 10 and t["samples"] == 9 and
          t["failed"] == 1 and t["correct_top1"] == 6 and t["correct_top5"] == 9 and t["duplicates"] == 2 and
          t["loss_sum"] == 9.0 and near(t["lr"], 0.1) and not t["final"], "train metric %r" % t)
    ips = struct.unpack("<2d", t["rank_images_per_sec"])
    check(near(ips[0], 7 / 0.7) and near(ips[1], 16.0), "per-rank images/s %r" % (ips,))
    check(t["wall_s"] > 0 and near(t["images_per_sec"], 9 / t["wall_s"]), "train time %r" % t)
    check(t["decision"] == 0 and t["streak"] == 1 and t["epochs"] == 5, "decision on the train row %r" % t)
    check(v["phase"] == EVAL and v["samples"] == 6 and v["correct_top1"] == 4 and v["loss_sum"] == 4.5 and
          v["decision"] == 0 and not v["final"], "val metric %r" % v)
    failed = [e for e in J.events if e["topic"] == "failed"]
    check(len(failed) == 1 and failed[0]["id"] == 9 and failed[0]["path"] == "x/9.png", "failed %r" % failed)
    print("epoch 0: exact train/val counts, per-rank images/s, continue with streak 1", flush=True)

    # ---- epoch 1: resumed train plan (skip 4: 6 samples expected), val 5/6
    result(g0, 0, 5, TRAIN, 9, [0], lambda i: True, quarter)     # an epoch nobody plans: dropped
    plan(loader, 1, TRAIN, 10, skip=4)
    J.expect(loader, WELCOME)
    result(g0, 0, 1, TRAIN, 5, [0, 1, 2], lambda i: True, lambda i: 0.125, lr=0.05, step=2)
    result(g1, 1, 1, TRAIN, 6, [3, 4, 5], lambda i: True, lambda i: 0.125, lr=0.05, step=2)
    step([g0, g1], 1, 2)
    plan(loader, 1, EVAL, 6)
    J.expect(loader, WELCOME)
    result(g1, 1, 1, EVAL, 7, [0, 1, 2, 3, 4, 5], lambda i: i != 5, lambda i: 0.25)
    for s in (loader, g0, g1):
        e = J.expect(s, EPOCH)
        check(e["epoch"] == 1 and e["decision"] == 1 and e["streak"] == 2 and near(e["val_top1"], 5 / 6),
              "EPOCH 1 to %s: %r" % (s.name, e))
    J.quiet(g0, STOP)   # the job ends once rank 0 has written the final state
    final_done(g0)
    for s in (loader, g0, g1):
        st = J.expect(s, STOP)
        check(st["code"] == 0, "STOP after the early stop: %r" % st)
    end = J.end(0)
    check(end["code"] == 0 and "early stop after epoch 1" in end["reason"], "end %r" % end)
    m = J.metrics()
    check(len(m) == 4, "want 4 metric events, got %d" % len(m))
    t, v = m[2], m[3]
    check(t["epoch"] == 1 and t["samples"] == 6 and t["planned"] == 10 and t["loss_sum"] == 0.75 and
          near(t["lr"], 0.05) and not t["final"], "train metric of the resumed epoch %r" % t)
    check(v["final"] and v["decision"] == 1 and v["streak"] == 2 and v["correct_top1"] == 5,
          "final val metric %r" % v)
    print("epoch 1: skip honoured, early stop by patience 2, end + STOP(0) + DONE", flush=True)


def scenario_dead():
    J = Job("dead", ["--workers", "2", "--epochs", "3", "--worker-timeout", "1",
                     "--resume-dir", "/runs/x", "--min-workers", "2", "--rejoin-timeout", "0"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41010", want=0)
    g1 = J.peer("g1", 1, ring="tcp://127.0.0.1:41011", want=1)
    J.beating = [g0, g1]
    J.expect(g0, WELCOME)
    J.expect(g1, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 8)
    J.expect(loader, WELCOME)
    result(g0, 0, 0, TRAIN, 1, [0, 1], lambda i: True, lambda i: 1.0, lr=0.1, step=3)
    J.beating = [g0]                                 # g1 goes silent
    t0 = time.time()
    for s in (g0, loader):
        st = J.expect(s, STOP, timeout=8)
        check(st["code"] == 1 and st["reason"] ==
              "rank 1 (g1) died at epoch 0 step 3; resume with ddpipe train --resume /runs/x",
              "STOP to %s: %r" % (s.name, st))
    end = J.end(1)
    check(end["code"] == 1 and "rank 1 (g1) died at epoch 0 step 3" in end["reason"], "end %r" % end)
    print("dead rank: job failed in %.1fs with %r" % (time.time() - t0, end["reason"]), flush=True)


def scenario_no_val():
    J = Job("noval", ["--workers", "1", "--epochs", "2", "--no-val"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41020")
    J.beating = [g0]
    J.expect(g0, WELCOME)
    loader = J.peer("loaderd-1", 2)
    for epoch in (0, 1):
        plan(loader, epoch, TRAIN, 4)
        J.expect(loader, WELCOME)
        result(g0, 0, epoch, TRAIN, epoch, [0, 1, 2, 3], lambda i: i < 2, lambda i: 0.5, lr=0.1,
               step=epoch)
        step([g0], epoch, epoch)
        e = J.expect(loader, EPOCH)
        check(e["epoch"] == epoch and e["decision"] == epoch and e["val_top1"] == -1,
              "EPOCH %d without validation: %r" % (epoch, e))
        if epoch == 0:   # a DONE(0) from rank 0 before any stop: rejected, the job goes on
            final_done(g0)
    check("last of --epochs 2" in e["reason"], "stop reason %r" % e["reason"])
    J.quiet(loader, STOP)
    final_done(g0)
    check(J.expect(loader, STOP)["code"] == 0, "STOP after rank 0's final DONE")
    end = J.end(0)
    m = J.metrics()
    check(len(m) == 2 and all(x["phase"] == TRAIN for x in m) and m[1]["final"] and not m[0]["final"],
          "metrics without validation %r" % m)
    print("--no-val: decided on train alone, stop after --epochs (%s)" % end["reason"], flush=True)


def scenario_refusals():
    """Misconfigurations fail at once instead of hanging."""
    r = subprocess.run([os.path.join(BIN, "reducerd"), "--bind", "ipc:///nonexistent/x", "--pub",
                        "ipc:///nonexistent/y", "--train", "--no-val", "--target-accuracy", "0.9"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
    check(r.returncode == 2 and "needs validation" in r.stderr, "--no-val with a target: %r" % r.stderr)
    J = Job("refuse", ["--workers", "1", "--epochs", "4", "--start-epoch", "2"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41030")
    J.beating = [g0]
    J.expect(g0, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 4)                        # loaderd started without --start-epoch
    st = J.expect(loader, STOP)
    check(st["code"] == 1 and "same --start-epoch" in st["reason"], "wrong epoch plan: %r" % st)
    J.end(1)
    print("refusals: --no-val with a target, a plan of the wrong epoch", flush=True)


def expect_members(J, g, gen, rank, world, step_, names, next_ring):
    m = J.expect(g, MEMBERS)
    check(m["gen"] == gen and m["rank"] == rank and m["world"] == world and m["step"] == step_ and
          m["names"] == names and m["next_ring"] == next_ring, "MEMBERS to %s: %r" % (g.name, m))
    check((rank >= 0) == ("token" in m), "MEMBERS to %s: a token only for a rank: %r" % (g.name, m))
    return m


def scenario_elastic():
    """3 ranks; rank 2 dies in step 1: rank 0 times out on it, rank 1 on rank 0
    (stuck too). The survivors redo step 1 as ranks 0, 1 of generation 1."""
    J = Job("elastic", ["--workers", "3", "--epochs", "1", "--no-val", "--worker-timeout", "30"])
    rings = ["tcp://127.0.0.1:4104%d" % r for r in range(3)]
    g = [J.peer("g%d" % r, 1, ring=rings[r], want=r) for r in range(3)]
    J.beating = list(g)
    for x in g:
        J.expect(x, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 12)
    J.expect(loader, WELCOME)
    formed = [e for e in J.events if e["topic"] == "membership"]
    check(len(formed) == 1 and formed[0]["change"] == "formed" and formed[0]["world"] == 3 and
          formed[0]["names"] == ["g0", "g1", "g2"], "membership when the gang formed: %r" % formed)
    one = lambda i: 1.0
    for r in range(3):                               # step 0: ids 0..5, two per rank
        result(g[r], r, 0, TRAIN, 0, [2 * r, 2 * r + 1], lambda i: True, one, lr=0.1, step=0)
    step(g, 0, 0)
    for x in g + [loader]:
        J.expect(x, COMMIT)
    for r in range(2):                               # step 1, attempt 1: rank 2 never answers
        result(g[r], r, 0, TRAIN, 0, [6 + 2 * r, 7 + 2 * r], lambda i: True, lambda i: 9.0, lr=0.1,
               step=1)
    J.beating = g[:2]
    step([g[0]], 0, 1, {0: (1, 2)})                  # rank 0 timed out on rank 2
    J.quiet(g[0], MEMBERS)                           # one report is not enough
    step([g[1]], 0, 1, {1: (1, 0)})                  # rank 1 on rank 0: rank 2 is the silent one
    gen0_auth = dict(g[1].auth)
    expect_members(J, g[0], 1, 0, 2, 1, ["g0", "g1"], rings[1])
    expect_members(J, g[1], 1, 1, 2, 1, ["g0", "g1"], rings[0])
    expect_members(J, loader, 1, -1, 2, 1, ["g0", "g1"], "")
    J.pump(0.2)
    lost = [e for e in J.events if e["topic"] == "membership"][1:]
    check(len(lost) == 1 and lost[0]["change"] == "lost" and lost[0]["gen"] == 1 and
          lost[0]["world"] == 2 and lost[0]["names"] == ["g2"] and lost[0]["redone"] and
          lost[0]["step"] == 1 and struct.unpack("<i", lost[0]["ranks"]) == (2,) and
          "rank 2 (g2) lost" in lost[0]["reason"], "membership event %r" % lost)
    print("elastic: rank 2 lost by the blame rule after both reports: %s" % lost[0]["reason"], flush=True)

    # a late RESULT of generation 0 (its old rank and token) is stale; the
    # removed rank is fenced once
    new_auth = g[1].auth
    g[1].gen, g[1].auth = 0, gen0_auth
    result(g[1], 1, 0, TRAIN, 0, [8, 9], lambda i: True, lambda i: 7.0, step=1)
    g[1].gen, g[1].auth = 1, new_auth
    g[2].send(pack(HEARTBEAT, worker="g2", rank=2, batches_done=0, **g[2].auth))
    g[2].send(pack(HEARTBEAT, worker="g2", rank=2, batches_done=0, **g[2].auth))
    f = J.expect(g[2], STOP)
    check(f["code"] == 1 and f["reason"].startswith("fenced: removed from the job at generation 1"),
          "fenced STOP %r" % f)
    J.quiet(g[2], STOP)
    # step 1, attempt 2 over two ranks: ids 6..11, three each, with other losses
    for r in range(2):
        result(g[r], r, 0, TRAIN, 0, [6 + 3 * r, 7 + 3 * r, 8 + 3 * r], lambda i: i != 11,
               lambda i: 0.5, lr=0.1, step=1)
    step(g[:2], 0, 1)
    for x in (g[0], g[1], loader):
        c = J.expect(x, COMMIT)
        check(c["gen"] == 1 and c["step"] == 1, "COMMIT of the redone step to %s: %r" % (x.name, c))
    e = J.expect(loader, EPOCH)
    check(e["decision"] == 1, "EPOCH %r" % e)
    final_done(g[0])
    J.expect(loader, STOP)
    end = J.end(0)
    t = J.metrics()[0]
    check(t["samples"] == 12 and t["duplicates"] == 0 and t["loss_sum"] == 6 * 1.0 + 6 * 0.5 and
          t["correct_top1"] == 11,
          "the train tally counts the redone step once, not its first attempt: %r" % t)
    print("elastic: the redone step counted once (loss %.1f), fenced STOP once, %s" % (
        t["loss_sum"], end["reason"]), flush=True)


def scenario_elastic_dead():
    """2 ranks, rank 0 silent past --worker-timeout: rank 1 goes on alone as rank 0."""
    J = Job("elastic-dead", ["--workers", "2", "--epochs", "1", "--no-val", "--worker-timeout", "1"])
    g = [J.peer("g%d" % r, 1, ring="tcp://127.0.0.1:4105%d" % r, want=r) for r in range(2)]
    J.beating = list(g)
    for x in g:
        J.expect(x, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 4)
    J.expect(loader, WELCOME)
    result(g[1], 1, 0, TRAIN, 0, [2, 3], lambda i: True, lambda i: 1.0, step=0)
    step([g[1]], 0, 0)
    J.beating = [g[1]]
    expect_members(J, g[1], 1, 0, 1, 0, ["g1"], "")
    result(g[1], 0, 0, TRAIN, 0, [0, 1, 2, 3], lambda i: True, lambda i: 0.25, step=0)
    step([g[1]], 0, 0)
    J.expect(loader, COMMIT)
    J.expect(loader, EPOCH)
    final_done(g[1])   # rank 0 now
    J.expect(loader, STOP)
    J.end(0)
    t = J.metrics()[0]
    check(t["samples"] == 4 and t["loss_sum"] == 1.0, "one rank redid step 0: %r" % t)
    print("elastic: rank 0 dead by heartbeats, rank 1 finished alone as rank 0", flush=True)


def scenario_stopped():
    """Rank 0 ends the job: a non-finite step (DONE 5), a final state it
    could not write (DONE 4 after the stop), no DONE within --done-timeout."""
    J = Job("nonfinite", ["--workers", "1", "--epochs", "2", "--no-val"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41030")
    J.beating = [g0]
    J.expect(g0, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 8)
    J.expect(loader, WELCOME)
    result(g0, 0, 0, TRAIN, 0, [0, 1, 2, 3], lambda i: True, lambda i: 0.5, lr=0.1, step=0)
    step([g0], 0, 0)
    why = "rank 0: step 1: the summed gradient fc.weight: element 3 of 640 is nan: the model diverged"
    g0.send(pack(DONE, code=5, reason=why))
    for s in (g0, loader):
        st = J.expect(s, STOP)
        check(st["code"] == 5 and st["reason"] == why, "STOP to %s: %r" % (s.name, st))
    end = J.end(5)
    check(end["code"] == 5 and end["reason"] == why, "end %r" % end)
    m = J.metrics()
    check(len(m) == 1 and m[0]["samples"] == 4 and m[0]["planned"] == 8 and m[0]["decision"] == 1 and
          m[0]["decision_reason"] == why, "the epoch's tally so far %r" % m)
    print("non-finite: DONE(5) ends the job with its reason and the epoch's tally", flush=True)

    J = Job("final-failed", ["--workers", "1", "--epochs", "1", "--no-val"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41031")
    J.beating = [g0]
    J.expect(g0, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 4)
    J.expect(loader, WELCOME)
    result(g0, 0, 0, TRAIN, 0, [0, 1, 2, 3], lambda i: True, lambda i: 0.5, lr=0.1, step=0)
    step([g0], 0, 0)
    J.expect(loader, EPOCH)
    why = "rank 0: final weights (end of training) not written: No space left on device"
    g0.send(pack(DONE, code=4, reason=why))
    st = J.expect(loader, STOP)
    check(st["code"] == 4 and st["reason"] == why, "STOP after a failed final write: %r" % st)
    check(J.end(4)["reason"] == why, "end reason")

    J = Job("final-silent", ["--workers", "1", "--epochs", "1", "--no-val", "--done-timeout", "1"])
    g0 = J.peer("g0", 1, ring="tcp://127.0.0.1:41032")
    J.beating = [g0]
    J.expect(g0, WELCOME)
    loader = J.peer("loaderd-1", 2)
    plan(loader, 0, TRAIN, 4)
    J.expect(loader, WELCOME)
    result(g0, 0, 0, TRAIN, 0, [0, 1, 2, 3], lambda i: True, lambda i: 0.5, lr=0.1, step=0)
    step([g0], 0, 0)
    J.expect(loader, EPOCH)
    st = J.expect(loader, STOP)
    check(st["code"] == 1 and "did not answer within --done-timeout" in st["reason"],
          "STOP without rank 0's final DONE: %r" % st)
    J.end(1)
    print("final writes: DONE(4) ends the job failed, a silent rank 0 within --done-timeout",
          flush=True)


scenario_epochs()
scenario_stopped()
scenario_elastic()
scenario_elastic_dead()
scenario_dead()
scenario_no_val()
scenario_refusals()
print("1 passed, 0 failed")
