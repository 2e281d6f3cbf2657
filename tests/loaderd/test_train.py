"""loaderd --train as a process between a fake reducerd and fake gpud ranks
(python3-zmq/msgpack, the wire format of proto/PROTOCOL.md), checking the
contract of docs/TRAINING.md (steps 3, 4, 8 and failed train samples):

- every sample id exactly once per epoch across the ranks; each shard is
  sampler_shard's (the permutation and the split re-derived here from
  common/image/sampler.h's documented RNG); step = e*spe + k; global_count;
- an uneven last step gives a rank an empty shard (n = 0, no pixels,
  c/h/w set);
- the same pixels for --workers 1 and 2 for each (seed, epoch, id), and
  --augment flip equals the raw image flipped per the (seed, epoch, id) draw;
- --start-epoch/--start-step skip what a resumed run already trained;
- EPOCH: decision 0 -> next epoch, 1 -> no more plans until STOP; --epochs
  caps the epochs even when reducerd says continue;
- --val: an EVAL plan and batches after each epoch's train part, seqs unique
  over the run; --val-limit cuts it apart from --limit (0: all of it); a
  --val with other classes is an error;
- a corrupt image is reported FAILED (phase TRAIN) and left out of its step
  and its global_count;
- the commit (docs/ELASTIC.md): END(e, TRAIN) only after reducerd's COMMIT of
  the epoch's last step; MEMBERS (3 -> 2 ranks mid-epoch) re-splits the
  first step not committed and those after it over the survivors (each
  sample of the epoch once over the committed steps and the re-sent ones,
  no committed step again), BATCHes carry the new generation, the removed
  rank's and stale CREDITs are ignored.
Exit 77 (skipped) without Fashion-MNIST or python3-zmq/msgpack."""
import gzip
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
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from ddp_trust import GPUD, LOADER, auth, new_secret, token  # noqa: E402

BIN = os.environ.get("DDPIPE_BIN") or os.path.join(os.path.dirname(__file__), "../../build/bin")
FMNIST = "/usr/share/datasets/fashion-mnist"
if not os.path.exists(FMNIST + "/t10k-images-idx3-ubyte.gz"):
    print("SKIP: Fashion-MNIST is not installed (dataset-fashion-mnist)")
    sys.exit(77)
IDX = "idx:%s/t10k" % FMNIST
JOIN, WELCOME, PLAN, CREDIT, HEARTBEAT, BATCH, END, RESULT, FAILED, STOP, DONE, EPOCH = range(1, 13)
MEMBERS, STEP, COMMIT = 15, 16, 17
EVAL, TRAIN = 0, 1

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def fatal(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


# ---- common/image/sampler.h, re-derived ---------------------------------------
M64 = (1 << 64) - 1
GOLDEN = 0x9e3779b97f4a7c15


def mix64(z):
    z &= M64
    z ^= z >> 30
    z = (z * 0xbf58476d1ce4e5b9) & M64
    z ^= z >> 27
    z = (z * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


class Rng:
    def __init__(self, a, b, c, d):
        k = mix64(a + GOLDEN)
        k = mix64(k ^ ((b + 2 * GOLDEN) & M64))
        k = mix64(k ^ ((c + 3 * GOLDEN) & M64))
        self.key = mix64(k ^ ((d + 4 * GOLDEN) & M64))
        self.ctr = 0

    def u64(self):
        self.ctr += 1
        return mix64(self.key + self.ctr * GOLDEN)

    def unit(self):
        return (self.u64() >> 11) * (1.0 / 9007199254740992.0)

    def below(self, n):
        return (self.u64() * n) >> 64


def permutation(n, seed, epoch):
    r = Rng(seed, epoch, 0, 1)  # RNG_STREAM_SHUFFLE
    p = list(range(n))
    for i in range(n, 1, -1):
        j = r.below(i)
        p[i - 1], p[j] = p[j], p[i - 1]
    return p


def shard(n, step, g, world, rank):
    lo = step * g
    ln = min(n - lo, g)
    base, rem = divmod(ln, world)
    return lo + rank * base + min(rank, rem), base + (1 if rank < rem else 0)


def flipped(seed, epoch, i):
    return Rng(seed, epoch, i, 3).unit() < 0.5  # RNG_STREAM_FLIP, p = 0.5


def idx_images(count):
    with gzip.open(FMNIST + "/t10k-images-idx3-ubyte.gz") as f:
        f.read(16)
        data = f.read(count * 784)
    return [data[i * 784:(i + 1) * 784] for i in range(count)]


# ---- the fake peers ------------------------------------------------------
ctx = zmq.Context.instance()
BASE = tempfile.mkdtemp(prefix="ddpipe-loader-train-")


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


def unpack(b):
    return msgpack.unpackb(b, raw=False)


class Job:
    """One loaderd run: W fake ranks that ack every batch at once, and a fake
    reducerd that acks plans, commits a step once every rank of the
    generation has its shard (after `commit_delay` s for an epoch's last
    step), and sends EPOCH(e, decide(e)) once every rank has e's last END;
    after a stop (or the --epochs-th epoch) it waits `quiet` s (no new plan
    may come) and sends STOP.
    members=(step, lost rank): when every rank has step `step`, MEMBERS
    instead of its COMMIT; the lost rank falls silent (one stale CREDIT),
    the others are renumbered and CREDIT in generation 1."""

    def __init__(self, tag, args, workers, decide, has_val=False, window=2, quiet=0.8,
                 timeout=60, expect_rc=0, members=None, commit_delay=0.0):
        self.tag, self.workers = tag, workers
        self.g = int(args[args.index("--global-batch-size") + 1]) if "--global-batch-size" in args else 1
        self.epochs = int(args[args.index("--epochs") + 1]) if "--epochs" in args else 1
        self.gen, self.world, self.rank_of = 0, workers, list(range(workers))
        self.members_at, self.commit_delay = members, commit_delay
        self.have, self.commits, self.commit_times, self.end_times = {}, [], {}, {}
        self.due, self.stale = [], []
        self.spe = None
        self.secret, self.session = new_secret()
        wd = os.path.join(BASE, tag)
        os.makedirs(wd)
        red_ep, self.loader_ep = "ipc://%s/red" % wd, "ipc://%s/loader" % wd
        self.red = ctx.socket(zmq.ROUTER)
        self.red.bind(red_ep)
        self.logpath = os.path.join(wd, "loaderd.log")
        cmd = [os.path.join(BIN, "loaderd"), "--bind", self.loader_ep, "--reducer", red_ep,
               "--threads", "2", "--worker-timeout", "30", "--train"] + args
        with open(self.logpath, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        self.plans, self.batches, self.ends, self.failed, self.epochs_sent = [], [], [], [], []
        self.decide, self.has_val, self.window = decide, has_val, window
        self.ranks, self.events = [], [[] for _ in range(workers)]
        self.loader_id, self.last_decision = None, None
        try:
            self._run(quiet, timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for s in self.ranks + [self.red]:
                s.close(linger=0)
        self.log = open(self.logpath, errors="replace").read()
        check("runtime error" not in self.log and "Sanitizer" not in self.log,
              "%s: sanitizer report:\n%s" % (tag, self.log[-3000:]))
        if not check(self.proc.returncode == expect_rc, "%s: loaderd exited %s, want %d:\n%s" % (
                tag, self.proc.returncode, expect_rc, self.log[-3000:])):
            return

    def credit(self, r, n, acks=(), gen=None, rank=None):
        name = "rank%d" % r
        gen = self.gen if gen is None else gen
        rank = self.rank_of[r] if rank is None else rank
        extra = {"gen": gen} if gen else {}
        self.ranks[r].send(pack(CREDIT, worker=name, credits=n,
                                acks=struct.pack("<%dQ" % len(acks), *acks), rank=rank,
                                **extra, **auth("test", self.session,
                                                token(self.secret, self.session, GPUD, rank, name))))

    def _full(self, m):
        """Every rank of the generation has its shard of m's step."""
        step, e = m["step"], m["epoch"]
        if self.members_at and self.gen == 0 and step == self.members_at[0]:
            lost = self.members_at[1]
            self.gen, self.world = 1, self.world - 1
            self.rank_of = [None if r == lost else r - (r > lost) for r in range(self.workers)]
            names = ["rank%d" % r for r in range(self.workers) if r != lost]
            self.red.send_multipart([self.loader_id, pack(
                MEMBERS, gen=1, rank=-1, world=self.world, next_ring="", step=step, epoch=e,
                names=names, reason="test: rank %d lost" % lost)])
            self.credit(lost, 2, gen=0, rank=lost)  # late, of the old generation: ignored
            for r in range(self.workers):
                if self.rank_of[r] is not None:
                    self.credit(r, self.window)
            return
        last = self.spe is not None and (step + 1) % self.spe == 0
        self.due.append((time.time() + (self.commit_delay if last else 0), self.gen, e, step))

    def _commit_due(self):
        now = time.time()
        for item in [d for d in self.due if d[0] <= now]:
            self.due.remove(item)
            _, gen, e, step = item
            self.commits.append((gen, step))
            self.commit_times[step] = time.time()
            self.red.send_multipart([self.loader_id, pack(COMMIT, gen=gen, epoch=e, step=step)])

    def _on_reducer(self):
        ident, raw = self.red.recv_multipart()
        m = unpack(raw)
        self.loader_id = ident
        if m["t"] == PLAN:
            self.plans.append((m["epoch"], m["phase"], m["n"], m.get("skip", 0), m["class_names"]))
            if self.spe is None and m["phase"] == TRAIN:
                self.spe = (m["n"] + self.g - 1) // self.g
            if m["phase"] == TRAIN and self.last_decision == 0:
                self.stop_at = None   # the next epoch came
            # the plan ack carries the session, the loader's token and the secret
            self.red.send_multipart([ident, pack(
                WELCOME, rank=0, world=1, job="test", session=self.session,
                token=token(self.secret, self.session, LOADER, -1, "loaderd"), secret=self.secret)])
        elif m["t"] == FAILED:
            self.failed.append(m)

    def _on_rank(self, r):
        frames = self.ranks[r].recv_multipart()
        m = unpack(frames[0])
        if m["t"] == BATCH:
            m["ids"] = list(struct.unpack("<%dQ" % m["n"], m["ids"])) if m["n"] else []
            m["labels"] = list(struct.unpack("<%di" % m["n"], m["labels"])) if m["n"] else []
            if m["phase"] == TRAIN and (self.rank_of[r] is None or m.get("gen", 0) < self.gen):
                self.stale.append((r, m))  # a gpud drops a shard of an older generation
                return
            self.batches.append((r, m, frames[1] if len(frames) > 1 else None))
            self.events[r].append(("B", m["epoch"], m["phase"]))
            self.credit(r, 1, [m["seq"]])
            if m["phase"] == TRAIN:
                key = (self.gen, m["step"])
                self.have.setdefault(key, set()).add(r)
                if len(self.have[key]) == self.world:
                    self._full(m)
        elif m["t"] == END:
            self.end_times.setdefault((m["epoch"], m["phase"]), time.time())
            self.ends.append((r, m["epoch"], m["phase"]))
            self.events[r].append(("E", m["epoch"], m["phase"]))
            last = EVAL if self.has_val else TRAIN
            e = m["epoch"]
            done = {x for x, ee, ph in self.ends if ee == e and ph == last}
            if m["phase"] == last and len(done) == self.workers and e not in self.epochs_sent:
                d = self.decide(e)
                self.epochs_sent.append(e)
                self.last_decision = d
                self.red.send_multipart([self.loader_id, pack(
                    EPOCH, epoch=e, decision=d, streak=0, val_top1=-1.0, reason="test")])
                # no next epoch is due (a stop, or --epochs reached): STOP
                # unless a plan comes anyway within `quiet` s; a next epoch
                # that is due is awaited as an event, however slow the box
                if d == 1 or e + 1 >= self.epochs:
                    self.stop_at = time.time() + self.quiet

    def _run(self, quiet, timeout):
        self.quiet, self.stop_at = quiet, None
        for r in range(self.workers):
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.IDENTITY, b"rank%d" % r)
            s.connect(self.loader_ep)
            self.ranks.append(s)
            self.credit(r, self.window)
        poller = zmq.Poller()
        poller.register(self.red, zmq.POLLIN)
        for s in self.ranks:
            poller.register(s, zmq.POLLIN)
        deadline = time.time() + timeout
        stop_sent = False
        while time.time() < deadline and self.proc.poll() is None:
            for s, _ in poller.poll(50):
                if s is self.red:
                    self._on_reducer()
                else:
                    self._on_rank(self.ranks.index(s))
            self._commit_due()
            if self.stop_at and time.time() > self.stop_at and not stop_sent:
                self.red.send_multipart([self.loader_id, pack(STOP, code=0, reason="test done")])
                stop_sent = True
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                fatal("%s: loaderd did not finish in %d s (plans %r, ends %r); log:\n%s" % (
                    self.tag, timeout, self.plans, self.ends, open(self.logpath).read()[-3000:]))

    def train(self, epoch=None):
        return [(r, m, px) for r, m, px in self.batches
                if m["phase"] == TRAIN and (epoch is None or m["epoch"] == epoch)]


def check_train_epoch(job, e, n, g, seed, first_step=0):
    """Shards, steps, counts of epoch e against the re-derived sampler."""
    W, tag = job.workers, job.tag
    spe = (n + g - 1) // g
    perm = permutation(n, seed, e)
    got = {}
    for r, m, px in job.train(e):
        k = m["step"] - e * spe
        check(0 <= k < spe and (r, k) not in got, "%s: rank %d got step %d twice or out of range"
              % (tag, r, m["step"]))
        got[(r, k)] = m
        check(m["n"] == len(m["ids"]) and len(px or b"") == m["n"] * m["c"] * m["h"] * m["w"]
              and m["c"] >= 1 and m["h"] >= 1,
              "%s: batch %d pixel frame %d bytes for n=%d c/h/w=%d/%d/%d" % (
                  tag, m["seq"], len(px or b""), m["n"], m["c"], m["h"], m["w"]))
    seen = []
    for k in range(first_step, spe):
        step_ids = []
        for r in range(W):
            m = got.get((r, k))
            if not check(m is not None, "%s: epoch %d step %d: rank %d got no shard" % (tag, e, k, r)):
                continue
            f, c = shard(n, k, g, W, r)
            check(m["ids"] == perm[f:f + c], "%s: epoch %d step %d rank %d: ids %r, sampler_shard "
                  "says %r" % (tag, e, k, r, m["ids"], perm[f:f + c]))
            step_ids += m["ids"]
        for r in range(W):
            m = got.get((r, k))
            if m:
                check(m["global_count"] == len(step_ids), "%s: epoch %d step %d: global_count %d, "
                      "the step has %d samples" % (tag, e, k, m["global_count"], len(step_ids)))
        seen += step_ids
    check(len(got) == W * (spe - first_step), "%s: epoch %d: %d shards, want %d" % (
        tag, e, len(got), W * (spe - first_step)))
    want = sorted(perm[first_step * g:])
    check(sorted(seen) == want, "%s: epoch %d: ids are not each sample once" % (tag, e))
    # each rank's shards come in step order, and END(e, TRAIN) after its last one
    for r in range(W):
        steps = [m["step"] for rr, m, _ in job.train(e) if rr == r]
        check(steps == sorted(steps), "%s: rank %d steps out of order: %r" % (tag, r, steps))
        ev = job.events[r]
        end = ("E", e, TRAIN)
        check(end in ev and all(i < ev.index(end) for i, x in enumerate(ev) if x == ("B", e, TRAIN))
              and all(i > ev.index(end) for i, x in enumerate(ev) if x == ("B", e, EVAL)),
              "%s: rank %d: END(%d, TRAIN) missing or not between its train and validation "
              "batches: %r" % (tag, r, e, ev))
    return {(e, m["ids"][i]): px[i * 784:(i + 1) * 784]
            for r, m, px in job.train(e) for i in range(m["n"])}


def seqs_unique(job):
    seqs = [m["seq"] for _, m, _ in job.batches]
    check(len(seqs) == len(set(seqs)), "%s: batch seqs repeat" % job.tag)


N, G, SEED = 50, 8, 7
COMMON = ["--data", IDX, "--limit", str(N), "--global-batch-size", str(G), "--seed", str(SEED)]

# 1. two ranks, crop-flip + rotation, three epochs allowed, reducerd stops after epoch 1
aug = ["--augment", "crop-flip", "--rotate", "15", "--epochs", "3"]
j2 = Job("w2", COMMON + aug + ["--workers", "2"], 2, decide=lambda e: 1 if e >= 1 else 0)
check([p[:4] for p in j2.plans] == [(0, TRAIN, N, 0), (1, TRAIN, N, 0)],
      "w2: plans %r, want epochs 0 and 1 only (EPOCH(1) said stop)" % [p[:4] for p in j2.plans])
px2 = {}
for e in (0, 1):
    px2.update(check_train_epoch(j2, e, N, G, SEED))
seqs_unique(j2)
check(all(m["c"] == 1 and m["h"] == 28 and m["w"] == 28 for _, m, _ in j2.batches),
      "w2: idx train batches are not 1x28x28")
raw = idx_images(N)
check(any(px2[(0, i)] != raw[i] for i in range(N)), "w2: crop-flip changed no image")
check(any(px2[(0, i)] != px2[(1, i)] for i in range(N)), "w2: epochs 0 and 1 got the same pixels")
print("w2: 2 epochs, shards = sampler_shard, each id once per epoch, EPOCH stop honoured", flush=True)

# 2. one rank: same pixels for every (epoch, id)
j1 = Job("w1", COMMON + aug + ["--workers", "1"], 1, decide=lambda e: 1 if e >= 1 else 0)
px1 = {}
for e in (0, 1):
    px1.update(check_train_epoch(j1, e, N, G, SEED))
check(px1.keys() == px2.keys() and all(px1[k] == px2[k] for k in px1),
      "w1 vs w2: %d of %d samples got other pixels" % (
          sum(px1.get(k) != px2[k] for k in px2), len(px2)))
print("w1 == w2: same pixels per (seed, epoch, id)", flush=True)

# 3. three ranks: the last step (2 samples) leaves rank 2 empty; --augment flip
#    is the raw image flipped per its draw; validation after each epoch
j3 = Job("w3", COMMON + ["--workers", "3", "--augment", "flip", "--epochs", "2", "--val", IDX,
                         "--batch-size", "16"], 3, decide=lambda e: 0 if e < 1 else 1, has_val=True)
check([p[:4] for p in j3.plans] == [(0, TRAIN, N, 0), (0, EVAL, N, 0), (1, TRAIN, N, 0),
                                    (1, EVAL, N, 0)], "w3: plans %r" % [p[:4] for p in j3.plans])
for e in (0, 1):
    pix = check_train_epoch(j3, e, N, G, SEED)
    bad = [i for i in range(N) if pix[(e, i)] != (
        b"".join(raw[i][y * 28:(y + 1) * 28][::-1] for y in range(28)) if flipped(SEED, e, i) else raw[i])]
    check(not bad, "w3: epoch %d: --augment flip pixels wrong for ids %r" % (e, bad[:10]))
    last = [m for r, m, _ in j3.train(e) if m["step"] == e * 7 + 6]
    check(sorted(m["n"] for m in last) == [0, 1, 1] and all(m["global_count"] == 2 for m in last),
          "w3: epoch %d last step shards %r" % (e, [(m["n"], m["global_count"]) for m in last]))
    empty = [(m, px) for r, m, px in j3.train(e) if m["step"] == e * 7 + 6 and r == 2]
    check(empty and empty[0][0]["n"] == 0 and empty[0][1] == b"" and empty[0][0]["c"] == 1
          and empty[0][0]["h"] == 28 and empty[0][0]["w"] == 28,
          "w3: rank 2's empty shard is not n=0 with an empty frame and c/h/w set")
    val = [m for _, m, _ in j3.batches if m["phase"] == EVAL and m["epoch"] == e]
    val_ids = sorted(i for m in val for i in m["ids"])
    check(val_ids == list(range(N)), "w3: epoch %d validation ids %r" % (e, val_ids))
    check(all(m["n"] <= 16 for m in val), "w3: validation batches over --batch-size")
    check(all(raw[i] == px[k * 784:(k + 1) * 784] for _, m, px in j3.batches
              if m["phase"] == EVAL for k, i in enumerate(m["ids"])),
          "w3: validation pixels are not the eval transform's")
    check(all((r, e, EVAL) in j3.ends for r in range(3)), "w3: END(%d, EVAL) missing" % e)
seqs_unique(j3)
print("w3: empty last shard, flip pixels exact, validation each epoch, seqs unique", flush=True)

# 4. resume at epoch 1 step 3; reducerd says continue but --epochs 2 ends it
j4 = Job("resume", COMMON + ["--workers", "2", "--epochs", "2", "--start-epoch", "1",
                             "--start-step", "3"], 2, decide=lambda e: 0)
check([p[:4] for p in j4.plans] == [(1, TRAIN, N, 3 * G)], "resume: plans %r, want (1, TRAIN, "
      "%d, skip %d) only" % ([p[:4] for p in j4.plans], N, 3 * G))
check_train_epoch(j4, 1, N, G, SEED, first_step=3)
check(min(m["step"] for _, m, _ in j4.batches) == 7 + 3, "resume: first step is not 10")
check("--epochs is 2" in j4.log, "resume: no warning about --epochs when reducerd continues")
print("resume: --start-epoch/--start-step skip, --epochs cap", flush=True)

# 5. a corrupt image in an ImageFolder: FAILED, left out of its step and global_count
folder = os.path.join(BASE, "folder")
subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "--synthetic", "20", folder, "--size", "40x30",
                "--classes", "3"], check=True, stdout=subprocess.DEVNULL)
with open(os.path.join(folder, "class01", "00007zz.jpg"), "wb") as f:
    f.write(b"\xff\xd8\xff\xe0 this is not a JPEG")
j5 = Job("corrupt", ["--data", folder, "--global-batch-size", "8", "--workers", "2", "--seed", "3",
                     "--crop", "24"], 2, decide=lambda e: 1)
check(len(j5.failed) == 1 and j5.failed[0]["phase"] == TRAIN and j5.failed[0]["epoch"] == 0
      and j5.failed[0]["path"].endswith("00007zz.jpg"), "corrupt: FAILED %r" % j5.failed)
if j5.failed:
    bad = j5.failed[0]["id"]
    perm = permutation(21, 3, 0)
    k = perm.index(bad) // 8
    step = [m for _, m, _ in j5.train(0) if m["step"] == k]
    ids = sorted(i for _, m, _ in j5.train(0) for i in m["ids"])
    check(ids == sorted(set(range(21)) - {bad}), "corrupt: train ids %r" % ids)
    want = min(8, 21 - 8 * k) - 1
    check(all(m["global_count"] == want for m in step) and sum(m["n"] for m in step) == want,
          "corrupt: step %d global_count %r, want %d" % (k, [m["global_count"] for m in step], want))
    check(all(m["c"] == 3 and m["h"] == 24 and m["w"] == 24 for _, m, _ in j5.batches),
          "corrupt: train batches are not 3x24x24 (--crop)")
print("corrupt: reported FAILED, excluded from global_count", flush=True)

# 6. membership: 3 ranks, rank 1 lost when every rank has step 2 (not committed);
#    the survivors (0 -> 0, 2 -> 1) get steps 2.. of the epoch re-split over 2
#    ranks, and epoch 1 over 2; END(e, TRAIN) waits for the last step's COMMIT
j7 = Job("members", COMMON + ["--workers", "3", "--epochs", "2"], 3,
         decide=lambda e: 0 if e < 1 else 1, members=(2, 1), commit_delay=0.5)
spe7 = (N + G - 1) // G
want_commits = [(0, 0), (0, 1)] + [(1, s) for s in range(2, 2 * spe7)]
check(j7.commits == want_commits, "members: commits %r, want %r" % (j7.commits, want_commits))
for e in (0, 1):
    perm = permutation(N, SEED, e)
    new = {}
    for r, m, _ in j7.train(e):
        if m.get("gen", 0) != 1:
            continue
        nr = j7.rank_of[r]
        check(nr is not None and (nr, m["step"]) not in new,
              "members: epoch %d: generation 1 step %d twice at rank %r" % (e, m["step"], nr))
        new[(nr, m["step"])] = m
    first = 2 if e == 0 else 0
    seen = []
    if e == 0:   # the committed steps, as generation 0 sent them over 3 ranks
        seen = [i for r, m, _ in j7.train(0) if m.get("gen", 0) == 0 and m["step"] < 2
                for i in m["ids"]]
        check(not any(m["step"] < 2 for m in new.values()),
              "members: a committed step was sent again: %r" % sorted(new))
    for k in range(first, spe7):
        count = min(G, N - k * G)
        for nr in range(2):
            m = new.get((nr, e * spe7 + k))
            f, c = shard(N, k, G, 2, nr)
            if check(m is not None, "members: epoch %d step %d: no shard for new rank %d" % (e, k, nr)):
                check(m["ids"] == perm[f:f + c] and m["global_count"] == count,
                      "members: epoch %d step %d rank %d: ids %r (global %d), sampler_shard over 2 "
                      "ranks says %r (%d)" % (e, k, nr, m["ids"], m["global_count"], perm[f:f + c],
                                              count))
                seen += m["ids"]
    check(sorted(seen) == list(range(N)), "members: epoch %d: not each sample once over the "
          "committed and re-sent steps" % e)
    check(j7.end_times.get((e, TRAIN), 0) >= j7.commit_times.get(e * spe7 + spe7 - 1, 1e18),
          "members: END(%d, TRAIN) came before the COMMIT of the epoch's last step" % e)
check(not any(j7.rank_of[r] is None for r, m, _ in j7.train() if m.get("gen", 0) == 1),
      "members: the lost rank got a shard of generation 1")
check(all((r, e, TRAIN) in j7.ends for r in (0, 2) for e in (0, 1)),
      "members: END(TRAIN) missing at a survivor: %r" % j7.ends)
print("members: 3 -> 2 ranks mid-epoch: interrupted step re-split, committed steps not resent, "
      "END after the last COMMIT", flush=True)

# 6b. --val-limit: the validation set cut apart from --limit (20 of it, or all of it)
for vl, want in ((20, 20), (0, 10000)):
    jv = Job("val-limit-%d" % vl, COMMON + ["--workers", "1", "--epochs", "1", "--val", IDX,
                                            "--val-limit", str(vl), "--batch-size", "500"],
             1, decide=lambda e: 1, has_val=True)
    check([p[:4] for p in jv.plans] == [(0, TRAIN, N, 0), (0, EVAL, want, 0)],
          "val-limit %d: plans %r" % (vl, [p[:4] for p in jv.plans]))
    val_ids = sorted(i for _, m, _ in jv.batches if m["phase"] == EVAL for i in m["ids"])
    check(val_ids == list(range(want)), "val-limit %d: %d validation ids, want %d" % (
        vl, len(val_ids), want))
print("val-limit: 20 and all validation samples beside --limit %d" % N, flush=True)

# 7. errors: --val with other classes; training flags without --train
other = os.path.join(BASE, "other")
subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "--synthetic", "4", other, "--size", "40x30",
                "--classes", "2"], check=True, stdout=subprocess.DEVNULL)
j6 = Job("classes", ["--data", folder, "--val", other, "--workers", "1"], 1, decide=lambda e: 1,
         timeout=20, expect_rc=1)
check("classes" in j6.log and not j6.plans, "classes: no clear error:\n" + j6.log[-2000:])
p = subprocess.run([os.path.join(BIN, "loaderd"), "--data", IDX, "--bind", "ipc:///tmp/x",
                    "--reducer", "ipc:///tmp/y", "--val", IDX], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=20)
check(p.returncode == 2 and "--train" in p.stdout, "--val without --train: exit %d, %s" % (
    p.returncode, p.stdout))
print("errors: class mismatch, flags without --train", flush=True)

shutil.rmtree(BASE, ignore_errors=True)
print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
