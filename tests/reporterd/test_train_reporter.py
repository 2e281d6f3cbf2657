"""reporterd in a training job, as a process under a fake reducerd
(python3-zmq/msgpack XPUB + ROUTER): the metric events of two epochs (train
and validation rows with per-rank images/s and the decision) give
metrics.csv in the training layout, the seed course's time,val_accuracy
CSV and summary.json with its "training" object; a resumed run
(--start-epoch 1) keeps epoch 0's rows, redoes epoch 1 and adds epoch 2."""
import csv
import json
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from ddp_it import BIN, check, fail, workdir  # noqa: E402

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

ctx = zmq.Context()
wd = workdir("reporterd-train")
out = os.path.join(wd, "run")
SEED = "2ranks-16bs-0.1lr-0.9m-5.0w.csv"
NAMES = ["t-shirt", "trouser", "pullover"]


def metric(epoch, phase, right, wall_s, decision, streak, reason, final=False, ranks=None):
    """18 samples, `right` of them correct (the rest predicted as the next class)."""
    conf = [0] * 9
    per = [6, 6, 6]
    left = right
    for c in range(3):
        ok = min(per[c], left)
        left -= ok
        conf[c * 3 + c] = ok
        conf[c * 3 + (c + 1) % 3] = per[c] - ok
    ev = dict(v=2, epoch=epoch, phase=phase, final=final, planned=18, samples=18, failed=0,
              correct_top1=right, correct_top5=18, duplicates=0, loss_sum=18 * (1.0 / (epoch + 1)),
              class_names=NAMES, workers=2, wall_s=wall_s, images_per_sec=18 / wall_s,
              lr=0.1 if phase else 0.0, confusion_cells=b"".join(
                  struct.pack("<IIQ", i // 3, i % 3, n) for i, n in enumerate(conf) if n),
              decision=decision, streak=streak, epochs=5, decision_reason=reason)
    if ranks:
        ev["rank_images_per_sec"] = struct.pack("<%dd" % len(ranks), *ranks)
    return [b"metric", msgpack.packb(ev, use_bin_type=True)]


def membership(gen, world, change, ranks, names, step, epoch, redone, reason):
    ev = dict(v=2, gen=gen, world=world, change=change, ranks=struct.pack("<%di" % len(ranks), *ranks),
              names=names, step=step, epoch=epoch, redone=redone, reason=reason)
    return [b"membership", msgpack.packb(ev, use_bin_type=True)]


def run(extra, epochs):
    """One reporterd run: the given epochs' metrics, then end; its exit code."""
    tag = "-".join(str(e[0]) for e in epochs)
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind("ipc://%s/events-%s" % (wd, tag))
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("ipc://%s/coord-%s" % (wd, tag))
    log = open(os.path.join(wd, "reporterd-%s.log" % tag), "w")
    rep = subprocess.Popen([os.path.join(BIN, "reporterd"), "--sub", "ipc://%s/events-%s" % (wd, tag),
                            "--reducer", "ipc://%s/coord-%s" % (wd, tag), "--out", out] + extra,
                           stdout=log, stderr=log)
    try:
        deadline = time.time() + 20
        seen = set()
        while b"~reporter" not in seen and time.time() < deadline:
            if pub.poll(200):
                seen.add(pub.recv()[1:])
        check(b"~reporter" in seen, "reporterd never subscribed")
        for e in epochs:
            for frames in e[1]:
                pub.send_multipart(frames)
        pub.send_multipart([b"end", msgpack.packb(dict(v=2, code=0, reason="ok"), use_bin_type=True)])
        while True:
            if not router.poll(20000):
                fail("no DONE from reporterd\n" + open(log.name).read())
            frames = router.recv_multipart()
            msg = msgpack.unpackb(frames[-1], raw=False)
            if msg["t"] == 11:
                break
        check(msg["code"] == 0, "DONE says %r\n%s" % (msg, open(log.name).read()))
        return rep.wait(timeout=20)
    finally:
        if rep.poll() is None:
            rep.kill()
        pub.close()
        router.close()


def epoch(e, train_right, val_right, decision, streak, reason, final=False):
    return (e, [metric(e, 1, train_right, 2.25 + e, decision, streak, reason, ranks=[40.0 + e, 38.5]),
                metric(e, 0, val_right, 0.5, decision, streak, reason, final=final)])


def rows():
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


# ---- first run: epochs 0 and 1, then the job is "killed" (it ends anyway here)
rc = run(["--seed-csv", SEED], [epoch(0, 9, 10, 0, 0, "continue after epoch 0"),
                                epoch(1, 12, 12, 0, 0, "continue after epoch 1")])
check(rc == 0, "reporterd exited %d" % rc)
r = rows()
check([(x["epoch"], x["phase"]) for x in r] == [("0", "train"), ("0", "val"), ("1", "train"), ("1", "val")],
      "rows %r" % r)
check(r[0]["epoch_seconds"] == "2.25" and r[0]["images_per_sec_rank0"] == "40.0" and
      r[0]["images_per_sec_rank1"] == "38.5" and r[1]["images_per_sec_rank0"] == "", "row 0 %r" % r[0])
first_time = r[0]["time"]

# ---- resumed at epoch 1: epoch 1 redone with other numbers, epoch 2 stops early
# (elastic training: the gang forms with 3 ranks, rank 1 is lost in epoch 2 step 9)
gang = (1, [membership(0, 3, "formed", [0, 1, 2], ["g-a", "g-b", "g-c"], 6, 1, False, "the gang formed")])
lost = membership(1, 2, "lost", [1], ["g-b"], 9, 2, True, 'rank 1 (g-b) lost: silent, "kill -9"')
e2 = epoch(2, 15, 16, 1, 2, "early stop after epoch 2: val top-1 0.8889", final=True)
rc = run(["--seed-csv", SEED, "--start-epoch", "1"],
         [gang, epoch(1, 13, 14, 0, 1, "continue after epoch 1"), (2, [lost] + e2[1])])
check(rc == 0, "resumed reporterd exited %d" % rc)
r = rows()
check([(x["epoch"], x["phase"]) for x in r] ==
      [("0", "train"), ("0", "val"), ("1", "train"), ("1", "val"), ("2", "train"), ("2", "val")],
      "rows after the resume %r" % r)
check(r[0]["time"] == first_time, "epoch 0's row was rewritten: %r" % r[0])
check(abs(float(r[3]["top1"]) - 14 / 18) < 1e-15, "epoch 1 validation is the resumed run's: %r" % r[3])
with open(os.path.join(out, SEED)) as f:
    seed = f.read()
want = "time,val_accuracy\n0.0,0.0\n2.2,0.5556\n5.5,0.7778\n9.8,0.8889\n"
check(seed == want, "seed CSV:\n%s\nwant:\n%s" % (seed, want))
with open(os.path.join(out, "summary.json")) as f:
    s = json.load(f)
t = s["training"]
check(s["epoch"] == 2 and s["phase"] == "eval" and s["correct_top1"] == 16, "summary %r" % s)
check(t["epochs_run"] == 3 and t["last_epoch"] == 2 and t["stopped_early"] and
      t["stop_reason"].startswith("early stop after epoch 2") and t["best_val_epoch"] == 2 and
      abs(t["best_val_top1"] - 16 / 18) < 1e-15 and abs(t["final_train_top1"] - 15 / 18) < 1e-15 and
      t["total_seconds"] == 2.25 + 3.25 + 4.25 + 3 * 0.5, "training object %r" % t)
check(t["ranks_lost"] == 1 and t["ranks_joined"] == 0 and t["steps_redone"] == 1 and t["world_size"] == 2,
      "elastic counts in the training object %r" % t)
with open(os.path.join(out, "membership.csv")) as f:
    mrows = list(csv.DictReader(f))
check([(x["gen"], x["world"], x["change"], x["rank"], x["name"], x["step"]) for x in mrows] ==
      [("0", "3", "formed", "0", "g-a", "6"), ("0", "3", "formed", "1", "g-b", "6"),
       ("0", "3", "formed", "2", "g-c", "6"), ("1", "2", "lost", "1", "g-b", "9")],
      "membership.csv rows %r" % mrows)
check(mrows[3]["reason"] == 'rank 1 (g-b) lost: silent, "kill -9"' and mrows[3]["time"].endswith("Z"),
      "membership.csv reason/time %r" % mrows[3])
for name in ("loss.png", "accuracy.svg", "throughput.png", "classification_report.txt", "confusion.png"):
    check(os.path.getsize(os.path.join(out, name)) > 200, "%s missing or short" % name)
print("training run directory: metrics.csv, %s, summary.json training object, resume, "
      "membership.csv" % SEED)
print("1 passed, 0 failed")
