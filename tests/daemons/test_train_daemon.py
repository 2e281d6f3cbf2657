"""gpud --train between a fake loaderd and a fake reducerd (python3-zmq/msgpack,
written from docs/TRAINING.md and proto/PROTOCOL.md), with real gpud ranks on
a real ring:

  run 1: 2 ranks, 2 epochs x 2 steps, one step with an empty shard (n = 0):
         JOIN carries a resolved ring endpoint, RESULTs carry step/lr/loss,
         every rank sends STEP(gen 0, step, status 0) and takes the step on
         the fake reducerd's COMMIT (docs/ELASTIC.md), CREDITs carry the rank,
         a train batch of epoch 1 waits for EPOCH(0), EPOCH(stop) writes the
         checkpoint (ckpt.* metadata) and the final weights, STOP(0) exits 0;
  run 2: a rank killed before step 1 (--fault-at-step): the other rank
         reports it (STEP status 1, suspect 1), and with no answer from the
         fake reducerd names it ("all-reduce with rank ... failed"), writes
         the last committed step's checkpoint and exits non-zero within the
         ring timeout plus the commit timeout;
  run 3: SIGTERM to a rank blocked in the all-reduce: it stops within 2 s
         (not the ring timeout), saves the last completed step, exits non-zero;
  run 4: reducerd vanishes while the rank idles: gpud stops on its own once
         no heartbeat could reach it for --join-timeout, rank 0 saves the
         last step;
  run 5: --sync-bn with 1 and 2 ranks over the same global steps (one with
         an empty shard): the final weights agree within 1e-5.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

try:
    import msgpack
    import zmq
except ImportError:
    print("SKIP: python3-zmq and python3-msgpack are needed")
    sys.exit(0)

BIN = os.environ.get("DDPIPE_BIN") or os.path.join(os.path.dirname(__file__), "../../build/bin")
WRN = ["--model", "wideresnet", "--channels", "4,8,8,12", "--threads", "1"]
G = 6   # global batch
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


def recv(sock, want, timeout_s=30.0):
    """Next message of type `want` (an int or a tuple of them; others, e.g.
    heartbeats, are skipped)."""
    want = want if isinstance(want, tuple) else (want,)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if not sock.poll(int(max(1, (deadline - time.time()) * 1000))):
            break
        frames = sock.recv_multipart()
        m = msgpack.unpackb(frames[1], raw=False)
        if m["t"] in want:
            return frames[0], m
    raise TimeoutError("no message of type %r within %.0fs" % (want, timeout_s))


def batch(seq, epoch, step, ids, labels, gcount, phase=1):
    n = len(ids)
    px = bytes(((i * 37 + s * 11) % 256) for s in ids for i in range(28 * 28))
    hdr = dict(seq=seq, epoch=epoch, phase=phase, n=n, c=1, h=28, w=28,
               ids=struct.pack("<%dQ" % n, *ids), labels=struct.pack("<%di" % n, *labels))
    if phase == 1:
        hdr.update(step=step, global_count=gcount)
    return [pack(6, **hdr), px]


def safetensors_meta(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


class Job:
    def __init__(self, wd, world, extra_per_rank):
        self.ctx = zmq.Context()
        self.loader = self.ctx.socket(zmq.ROUTER)
        self.reducer = self.ctx.socket(zmq.ROUTER)
        self.loader.bind("ipc://%s/loader" % wd)
        self.reducer.bind("ipc://%s/reducer" % wd)
        self.procs, self.logs = [], []
        for r in range(world):
            log = open(os.path.join(wd, "gpud%d.log" % r), "w")
            cmd = [os.path.join(BIN, "gpud"), "--train", "--loader", "ipc://%s/loader" % wd,
                   "--reducer", "ipc://%s/reducer" % wd, "--name", "g%d" % r, "--rank", str(r),
                   "--seed", "3", "--lr", "0.05", "--momentum", "0.9", "--ring-timeout", "4",
                   "--window", "4"] + WRN + extra_per_rank[r]
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log))
            self.logs.append(log.name)
        self.world = world

    def handshake(self):
        joins = {}
        while len(joins) < self.world:
            ident, j = recv(self.reducer, 1)
            joins[j["name"]] = (ident, j)
        names = sorted(joins)
        for r, name in enumerate(names):
            ring = joins[name][1].get("ring", "")
            check(ring.startswith("ipc://") or
                  (ring.startswith("tcp://127.0.0.1:") and int(ring.rsplit(":", 1)[1]) > 0),
                  "JOIN ring %r is not a resolved endpoint" % ring)
        self.rid = [joins[n][0] for n in names]
        for r, name in enumerate(names):
            nxt = joins[names[(r + 1) % self.world]][1]["ring"]
            self.reducer.send_multipart([self.rid[r], pack(2, rank=r, world=self.world, job="t",
                                                           train=1, next_ring=nxt)])
        self.lid = {}
        while len(self.lid) < self.world:   # the window CREDITs, with the rank
            ident, c = recv(self.loader, 4)
            check(c.get("rank", -1) in range(self.world), "CREDIT without rank: %r" % c)
            self.lid[c["rank"]] = ident

    def send(self, rank, frames):
        self.loader.send_multipart([self.lid[rank]] + frames)

    def to_reducer_all(self, frames):
        for ident in self.rid:
            self.reducer.send_multipart([ident] + frames)

    def wait(self, timeout=120):
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("hung")
        return codes

    def log(self, r):
        with open(self.logs[r]) as f:
            return f.read()

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        self.ctx.destroy(linger=0)


# shards of each absolute step: (ids, labels) per rank; step 3 has an empty shard
SHARDS = {
    0: [([0, 1, 2], [0, 1, 2]), ([3, 4, 5], [3, 4, 5])],
    1: [([6, 7, 8], [6, 7, 8]), ([9, 10, 11], [9, 0, 1])],
    2: [([12, 13, 14], [2, 3, 4]), ([15, 16, 17], [5, 6, 7])],
    3: [([18], [8]), ([], [])],
}


def shards_of(step, world, table):
    if world == 2:
        return table[step]
    return [(table[step][0][0] + table[step][1][0], table[step][0][1] + table[step][1][1])]


def train_step(job, seq, epoch, step, expect_results=True, table=SHARDS):
    shards = shards_of(step, job.world, table)
    gcount = sum(len(s[0]) for s in shards)
    for r in range(job.world):
        ids, labels = shards[r]
        job.send(r, batch(seq + r, epoch, step, ids, labels, gcount))
    if expect_results:
        commit_step(job, epoch, step, sum(1 for ids, _ in shards if ids))


def commit_step(job, epoch, step, n_results):
    """The ranks' RESULTs (an empty shard sends none) and STEPs of `step`,
    then COMMIT to every rank, as reducerd does."""
    steps = set()
    while n_results > 0 or len(steps) < job.world:
        _, m = recv(job.reducer, (8, 16))
        if m["t"] == 16:
            check(m["step"] == step and m["status"] == 0 and m["gen"] == 0 and m["suspect"] == -1
                  and m["epoch"] == epoch, "STEP %r for step %d" % (m, step))
            steps.add(m["rank"])
            continue
        n_results -= 1
        check(m["rank"] not in steps, "rank %d's RESULT after its STEP" % m["rank"])
        check(m["phase"] == 1 and m["step"] == step, "RESULT %r for step %d" % (
            {k: m[k] for k in ("phase", "step", "rank")}, step))
        check(abs(m["lr"] - 0.05) < 1e-12, "RESULT lr %r" % m.get("lr"))
        losses = struct.unpack("<%df" % m["n"], m["loss"])
        check(all(math.isfinite(x) and x > 0 for x in losses), "losses %r" % (losses,))
    job.to_reducer_all([pack(17, gen=0, epoch=epoch, step=step)])


def wait_acks(job, seqs):
    """Reads the ranks' CREDITs until every seq in seqs was acked."""
    left = set(seqs)
    while left:
        _, c = recv(job.loader, 4)
        acks = c.get("acks", b"")
        left -= set(struct.unpack("<%dQ" % (len(acks) // 8), acks))


def run_ok(wd):
    ckpt, final = os.path.join(wd, "ckpt.safetensors"), os.path.join(wd, "final.safetensors")
    job = Job(wd, 2, [["--checkpoint", ckpt, "--save-weights", final], []])
    try:
        job.handshake()
        train_step(job, 100, 0, 0)
        train_step(job, 110, 0, 1)
        for r in range(2):
            job.send(r, [pack(7, epoch=0, phase=1)])
        job.send(1, batch(120, 0, 0, [30, 31], [1, 2], 0, phase=0))   # validation
        _, res = recv(job.reducer, 8)
        check(res["phase"] == 0 and res["n"] == 2, "validation RESULT %r" % res)
        # epoch 1's first step before EPOCH(0): no rank may start it
        train_step(job, 200, 1, 2, expect_results=False)
        try:
            recv(job.reducer, 8, timeout_s=1.5)
            check(False, "a train step of epoch 1 ran before EPOCH(0)")
        except TimeoutError:
            pass
        job.to_reducer_all([pack(12, epoch=0, decision=0, streak=1, val_top1=0.5, reason="go on")])
        commit_step(job, 1, 2, 2)
        train_step(job, 210, 1, 3)
        for r in range(2):
            job.send(r, [pack(7, epoch=1, phase=1)])
        job.to_reducer_all([pack(12, epoch=1, decision=1, streak=2, val_top1=0.9, reason="done")])
        time.sleep(1.0)
        job.to_reducer_all([pack(10, code=0, reason="finished")])
        codes = job.wait()
        check(codes == [0, 0], "exit codes %r, want [0, 0]" % codes)
        meta = safetensors_meta(ckpt) if os.path.exists(ckpt) else {}
        want = {"ckpt.epoch": "2", "ckpt.step": "4", "ckpt.seed": "3", "ckpt.streak": "2",
                "ckpt.global_batch": str(G), "ckpt.steps_per_epoch": "2", "arch": "wideresnet"}
        for k, v in want.items():
            check(meta.get(k) == v, "checkpoint %s = %r, want %r" % (k, meta.get(k), v))
        check(os.path.exists(final), "final weights not written")
        check(not os.path.exists(os.path.join(wd, "ckpt1")), "rank 1 wrote a checkpoint")
    finally:
        job.close()
    return job


def run_fault(wd):
    ckpt = os.path.join(wd, "ckpt.safetensors")
    # --commit-timeout 3: the fake reducerd never answers, so rank 0 waits it
    # out whole; its default (2 x --ring-timeout, 8 s) was a quarter of the test
    job = Job(wd, 2, [["--checkpoint", ckpt, "--commit-timeout", "3"], ["--fault-at-step", "1"]])
    try:
        job.handshake()
        train_step(job, 100, 0, 0)
        # wait for both ranks' acks (sent after the committed optimizer step)
        # so that step 0 is complete on both, whatever the machine's speed,
        # before rank 1 dies at step 1
        wait_acks(job, {100, 101})
        train_step(job, 110, 0, 1, expect_results=False)
        _, st = recv(job.reducer, 16)   # within the 4 s ring timeout
        check(st["rank"] == 0 and st["status"] == 1 and st["suspect"] == 1 and st["step"] == 1,
              "rank 0's report of the silent rank 1: %r" % st)
        # no answer: 4 s ring + 3 s commit timeout; 120 s only guards against a hang
        codes = job.wait(timeout=120)
        check(codes[1] == -9, "rank 1 exit %r, want SIGKILL" % codes[1])
        check(codes[0] not in (0, "hung"), "rank 0 exit %r, want non-zero" % codes[0])
        log0 = job.log(0)
        check("all-reduce with rank 1 failed" in log0 and "resume with --resume" in log0,
              "rank 0's log does not name rank 1:\n" + log0[-1500:])
        meta = safetensors_meta(ckpt) if os.path.exists(ckpt) else {}
        check(meta.get("ckpt.step") == "1" and meta.get("ckpt.epoch") == "0",
              "failure checkpoint step %r epoch %r, want 1, 0" % (meta.get("ckpt.step"),
                                                                  meta.get("ckpt.epoch")))
    finally:
        job.close()


def run_sigterm(wd):
    ckpt = os.path.join(wd, "ckpt.safetensors")
    job = Job(wd, 2, [["--checkpoint", ckpt, "--ring-timeout", "60", "--ring-bind",
                       "ipc://%s/ring0" % wd], ["--ring-timeout", "60"]])   # ipc and tcp mixed
    try:
        job.handshake()
        train_step(job, 100, 0, 0)
        ids, labels = SHARDS[1][0]
        job.send(0, batch(110, 0, 1, ids, labels, 6))   # rank 1 never gets its shard
        # rank 0 sends nothing until its all-reduce ends (RESULT follows the
        # sum): give it time to enter it; SIGTERM during the (ms-long)
        # forward pass would end the run just as well, only sooner
        time.sleep(1.0)
        job.procs[0].send_signal(15)
        # The ring timeout is 60 s: the log tells whether SIGTERM or the
        # timeout ended the run (no clock is read; 150 s only bounds a hang).
        try:
            code = job.procs[0].wait(150)
        except subprocess.TimeoutExpired:
            code = "hung"
        log0 = job.log(0)
        check(code not in (0, "hung") and "interrupted by a signal" in log0,
              "SIGTERM in the all-reduce: exit %r; rank 0's log:\n%s" % (code, log0[-1500:]))
        meta = safetensors_meta(ckpt) if os.path.exists(ckpt) else {}
        check(meta.get("ckpt.step") == "1", "SIGTERM checkpoint step %r, want 1" % meta.get("ckpt.step"))
    finally:
        job.close()


def read_weights(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in hdr.items():
        if name != "__metadata__" and t["dtype"] == "F32":
            a, b = t["data_offsets"]
            out[name] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out


def run_reducer_gone(wd):
    """reducerd vanishes (its socket closed, as a killed process's) while
    the rank idles between steps: no batch will ever come. gpud stops on
    its own once no heartbeat could be delivered for --join-timeout (3 s),
    saying so, and rank 0 saves the last step (exit non-zero). The bound
    of the wait below is for a hung gpud, not a speed check."""
    ckpt = os.path.join(wd, "ckpt.safetensors")
    job = Job(wd, 1, [["--checkpoint", ckpt, "--join-timeout", "3"]])
    try:
        job.handshake()
        train_step(job, 300, 0, 0)
        job.reducer.close(linger=0)
        try:
            code = job.procs[0].wait(120)
        except subprocess.TimeoutExpired:
            code = "hung"
        text = open(job.logs[0]).read()
        check(code not in (0, "hung") and "unreachable" in text,
              "reducerd gone: exit %r, log:\n%s" % (code, text[-1500:]))
        meta = safetensors_meta(ckpt) if os.path.exists(ckpt) else {}
        check(meta.get("ckpt.step") == "1", "reducerd gone: checkpoint step %r, want 1" %
              meta.get("ckpt.step"))
        print("reducer gone: gpud stopped on its own, exit %r, checkpoint of step 1" % code,
              flush=True)
    finally:
        job.close()


def run_syncbn(wd):
    table = {0: SHARDS[0], 1: SHARDS[3]}   # step 1: rank 1's shard is empty
    finals = []
    for world in (1, 2):
        d = os.path.join(wd, "w%d" % world)
        os.makedirs(d)
        final = os.path.join(d, "final.safetensors")
        job = Job(d, world, [["--sync-bn", "--save-weights", final], ["--sync-bn"]])
        try:
            job.handshake()
            train_step(job, 100, 0, 0, table=table)
            train_step(job, 110, 0, 1, table=table)
            for r in range(world):
                job.send(r, [pack(7, epoch=0, phase=1)])
            job.to_reducer_all([pack(12, epoch=0, decision=1, streak=0, val_top1=-1.0, reason="e")])
            time.sleep(0.5)
            job.to_reducer_all([pack(10, code=0, reason="finished")])
            codes = job.wait()
            check(codes == [0] * world, "sync-bn world %d: exit codes %r" % (world, codes))
        finally:
            job.close()
        if not os.path.exists(final):
            check(False, "sync-bn world %d: no final weights" % world)
            return
        finals.append(read_weights(final))
    worst, where = 0.0, ""
    for name, a in finals[0].items():
        b = finals[1].get(name)
        if b is None or len(a) != len(b):
            check(False, "sync-bn: %s missing or reshaped with 2 ranks" % name)
            continue
        for x, y in zip(a, b):
            d = abs(x - y) / max(1.0, abs(x))
            if d > worst:
                worst, where = d, name
    check(worst <= 1e-5, "sync-bn: 1 vs 2 ranks differ by %g (%s)" % (worst, where))
    print("sync-bn: 1 vs 2 ranks, worst relative difference %.2g (%s)" % (worst, where))


def main():
    base = tempfile.mkdtemp(prefix="ddpipe-trd-")
    try:
        for name, fn in (("ok", run_ok), ("fault", run_fault), ("sigterm", run_sigterm),
                         ("gone", run_reducer_gone), ("syncbn", run_syncbn)):
            wd = os.path.join(base, name)
            os.makedirs(wd)
            n = len(failures)
            fn(wd)
            if len(failures) > n:
                for f in sorted(os.listdir(wd)):
                    if f.endswith(".log"):
                        print("---- %s/%s" % (name, f))
                        print(open(os.path.join(wd, f)).read()[-3000:])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)


main()
