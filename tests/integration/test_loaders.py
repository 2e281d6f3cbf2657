"""Several loaderds for one dataset (docs/SCALE.md "Several loaderds"):
`ddpipe eval --loaders 3` splits the samples by id % 3 over three loaderds
and gives summary.json counts and predictions.csv byte-identical to one
loaderd (also with a sample that fails to decode in one shard, and with
--wire jpeg);
`ddpipe train --loaders 3` (2 ranks, 2 epochs, an uneven last step) ends
with bitwise-identical weights and the same train/val metrics as one
loaderd, also when a rank dies mid-epoch (elastic: the step is redone
over the survivors with every loaderd re-sending its parts). Bad input
ends with a clear error and no hang: `loaderd --shard 3/3` exits 2 with one
line; a second loaderd claiming a held shard is refused with a STOP naming
the shard (it exits 1); a shard's loaderd that dies (SIGKILL) fails the job
once it is silent for --worker-timeout, naming it; a shard whose loaderd
never starts is named when the job stalls (--stall-timeout); shards of
different datasets fail the job at the second plan."""
import filecmp
import os
import shutil
import signal
import subprocess
import time
from ddp_it import *

wd = workdir("loaders")

# ---- 1 vs 3 loaderds: identical counts and predictions --------------------
# 211 JPEGs (prime: 3 shards of 71, 70 and 70, no batch of 16 aligned with a
# shard): how samples are split by id % 3 and merged back shows on 211 as on
# the 997 this used to copy (4 x 5 s of it went into evaluating them)
N = 211
src = jpeg_folder(N)
data = os.path.join(wd, "data")
shutil.copytree(src, data)
# one corrupt file (id 5 of the sorted ImageFolder: shard 2 of 3): a failed
# sample must be reported by its shard's loaderd and counted once
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(data) for f in fs if f.endswith(".jpg"))
check(len(files) == N, "%d images in %s, want %d" % (len(files), data, N))
open(files[5], "wb").write(b"\xff\xd8\xff\xe0 not a jpeg")

ref = None
for loaders, workers, wire in ((1, 2, "uint8"), (3, 2, "uint8"), (3, 1, "uint8"),
                              (3, 2, "jpeg")):
    out = os.path.join(wd, "eval-l%d-w%d-%s" % (loaders, workers, wire))
    run_eval(data, out, workers, batch=16, extra=["--predictions", "topk", "--loaders",
                                                   str(loaders), "--wire", wire])
    s = summary(out)
    check(s["planned"] == N and s["samples"] == N - 1 and s["failed"] == 1,
          "%s: planned %s samples %s failed %s, want %d/%d/1" % (
              out, s["planned"], s["samples"], s["failed"], N, N - 1))
    logs = os.listdir(os.path.join(out, "logs"))
    want = ["loaderd.%d.log" % i for i in range(loaders)] if loaders > 1 else ["loaderd.log"]
    check(all(w in logs for w in want), "%s: logs %s, want %s" % (out, logs, want))
    if loaders > 1:
        red = read(os.path.join(out, "logs", "reducerd.log"))
        for i in range(loaders):
            check("holds shard %d/%d" % (i, loaders) in red, "reducerd never bound shard %d" % i)
        g0 = read(os.path.join(out, "logs", "gpud.0.log"))
        check("taking batches from %d loaderds" % loaders in g0, "gpud.0 did not connect to all")
        # the corrupt sample went through its own shard's loaderd only (with
        # --wire jpeg gpud finds it broken and reports it in its RESULT)
        failed_in = [i for i in range(loaders)
                     if "counted as failed" in read(os.path.join(out, "logs", "loaderd.%d.log" % i))]
        check(failed_in == ([5 % loaders] if wire == "uint8" else []),
              "sample 5 failed in loaderds %s (--wire %s)" % (failed_in, wire))
    preds = read(os.path.join(out, "predictions.csv"))
    if ref is None:
        ref = (counts(out), preds, out)
        continue
    c = counts(out)
    for k in COUNT_KEYS:
        check(c[k] == ref[0][k], "%s differs: %s=%r vs %s=%r" % (k, out, c[k], ref[2], ref[0][k]))
    check(preds == ref[1], "predictions.csv of %s differs from %s" % (out, ref[2]))
    assert_no_leftovers(out)
print("eval with 3 loaderds = eval with 1: counts and predictions.csv identical")

# ---- training: 1 vs 3 loaderds, bitwise ---------------------------------------
# N = 232, G = 64: the last step of an epoch has 40 samples; with 3 loaderds
# many parts are small or empty. --fault 1:3 kills rank 1 before step 3 of
# 3 ranks: the survivors redo it (elastic), every loaderd re-sends its parts.
val = idx_subset("t10k", 0, 64)
train = idx_subset("train", 0, 232)
# --worker-timeout: 5 s where nobody dies; 2 s (ddp_elastic's) where rank 1
# kills itself, as the lost rank is only noticed once it is silent that long
# (5 s made the two rank-lost runs ~9 s each, mostly waiting)
common = ["--global-batch-size", "64", "--epochs", "2", "--seed", "3", "--lr", "0.001",
          "--momentum", "0", "--sync-bn"]
for name, workers, extra in (("plain", 2, ["--worker-timeout", "5"]),
                             ("rank-lost", 3, ["--fault", "1:3", "--worker-timeout", "2",
                                               "--ring-timeout", "5"])):
    runs = {}
    for loaders in (1, 3):
        out = os.path.join(wd, "train-%s-l%d" % (name, loaders))
        run_train(train, out, workers, common + extra + ["--loaders", str(loaders)], val=val)
        assert_no_leftovers(out)
        rows = metrics_rows(out)
        check(all(int(r["samples"]) == (232 if r["phase"] == "train" else 64) for r in rows),
              "%s l%d: metric rows count %s" % (name, loaders, [r["samples"] for r in rows]))
        runs[loaders] = (out, rows, train_losses(out))
    (a, rows_a, loss_a), (b, rows_b, loss_b) = runs[1], runs[3]
    wa, wb = os.path.join(a, "model.safetensors"), os.path.join(b, "model.safetensors")
    check(filecmp.cmp(wa, wb, shallow=False),
          "%s: weights with 3 loaderds differ from 1: %s" % (name, weights_diff(wa, wb)))
    keys = ("epoch", "phase", "samples", "loss", "top1", "top5")
    check([{k: r[k] for k in keys} for r in rows_a] == [{k: r[k] for k in keys} for r in rows_b],
          "%s: metrics differ:\n%s\n%s" % (name, rows_a, rows_b))
    check(loss_a[1] < loss_a[0], "%s: the train loss did not fall: %s" % (name, loss_a))
    print("train %s: 3 loaderds = 1 loaderd, weights bitwise identical, losses %s" % (name, loss_b))

# ---- bad input --------------------------------------------------------------
idx = "idx:%s/t10k" % FMNIST
loaderd = os.path.join(BIN, "loaderd")
reducerd = os.path.join(BIN, "reducerd")

p = subprocess.run([loaderd, "--data", idx, "--bind", "ipc://%s/x" % wd, "--reducer",
                    "ipc://%s/y" % wd, "--shard", "3/3"], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True, timeout=60)
lines = p.stderr.strip().split("\n")
check(p.returncode == 2 and len(lines) == 1 and "--shard 3/3 is out of range" in lines[0],
      "loaderd --shard 3/3: exit %d, stderr %r; want 2 and one line" % (p.returncode, p.stderr))
print("out-of-range shard refused (exit 2)")

procs = []


def start(cmd, log):
    f = open(log, "w")
    p = subprocess.Popen(cmd, stdout=f, stderr=f)
    procs.append(p)
    return p


def wait_text(path, text, proc, bound=60):
    """Waits for text in a log; the bound only keeps a broken build from hanging."""
    end = time.time() + bound
    while time.time() < end:
        if os.path.exists(path) and text in read(path):
            return
        check(proc.poll() is None or text in read(path),
              "%s exited %s before logging %r:\n%s" % (path, proc.returncode, text, read(path)))
        time.sleep(0.05)
    fail("%s never logged %r:\n%s" % (path, text, read(path)))


def wait_exit(proc, what, bound=120):
    try:
        return proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        fail("%s did not exit within %ds" % (what, bound))


def reducer(name, extra=()):
    d = os.path.join(wd, name)
    os.makedirs(d)
    ep = "ipc://%s/reducer" % d
    log = os.path.join(d, "reducerd.log")
    p = start([reducerd, "--bind", ep, "--pub", "ipc://%s/events" % d, "--reporters", "0",
               "--done-timeout", "1"] + list(extra), log)
    return d, ep, log, p


def loader(d, ep, shard, tag, extra=()):
    log = os.path.join(d, "loaderd-%s.log" % tag)
    p = start([loaderd, "--data", idx, "--limit", "300", "--threads", "1", "--bind",
               "ipc://%s/loader-%s" % (d, tag), "--reducer", ep, "--shard", shard] + list(extra),
              log)
    return log, p


try:
    # two loaderds claim shard 1/3: the second is told why and exits 1
    d, ep, rlog, red = reducer("same-shard")
    alog, a = loader(d, ep, "1/3", "a")
    wait_text(rlog, "holds shard 1/3", red)
    blog, b = loader(d, ep, "1/3", "b")
    rc = wait_exit(b, "the second loaderd of shard 1/3")
    said = read(blog)
    check(rc == 1 and "reducerd refuses this loaderd" in said and
          "two loaderds claim shard 1/3" in said and "loaderd-" in said,
          "second loaderd of shard 1/3: exit %s, log:\n%s" % (rc, said))
    check(a.poll() is None, "the first loaderd of shard 1/3 went away:\n%s" % read(alog))
    print("a second loaderd for a held shard is refused: %s" % [
        l for l in said.split("\n") if "refuses" in l][0].split("ERROR ")[-1])
    for p in (a, red):
        p.kill()
        p.wait()

    # a shard's loaderd dies: reducerd ends the job once it is silent for
    # --worker-timeout, naming it (no gpud: nothing else could end it)
    d, ep, rlog, red = reducer("dead-shard", ["--worker-timeout", "2"])
    l0log, l0 = loader(d, ep, "0/2", "0")
    l1log, l1 = loader(d, ep, "1/2", "1")
    wait_text(rlog, "holds shard 0/2", red)
    wait_text(rlog, "holds shard 1/2", red)
    l1.send_signal(signal.SIGKILL)
    l1.wait()
    rc = wait_exit(red, "reducerd after a dead loaderd")
    said = read(rlog)
    check(rc == 1 and "(shard 1/2) silent for" in said and "job failed" in said,
          "reducerd after loaderd 1/2 died: exit %s, log:\n%s" % (rc, said))
    print("a dead loaderd fails the job: %s" % [
        l for l in said.split("\n") if "job failed" in l][0].split("ERROR ")[-1])
    wait_exit(l0, "loaderd 0/2 after the job failed")

    # shards of different datasets (another --limit): the job fails at the
    # second plan, naming it, instead of counting a wrong union
    d, ep, rlog, red = reducer("other-dataset")
    l0log, l0 = loader(d, ep, "0/2", "0")
    wait_text(rlog, "plan: epoch 0", red)
    l1log, l1 = loader(d, ep, "1/2", "1", ["--limit", "200"])
    rc = wait_exit(red, "reducerd with shards of two datasets")
    said = read(rlog)
    check(rc == 1 and "plans 200 samples of 10 classes, but the job counts 300 of 10" in said,
          "reducerd with shards of two datasets: exit %s, log:\n%s" % (rc, said))
    print("shards of different datasets fail the job at the second plan")
    for p in (l0, l1):
        wait_exit(p, "a loaderd after the job failed")

    # a shard's loaderd never starts: named when the job stalls
    d, ep, rlog, red = reducer("missing-shard", ["--stall-timeout", "2"])
    l0log, l0 = loader(d, ep, "0/2", "0")
    rc = wait_exit(red, "reducerd without shard 1/2")
    said = read(rlog)
    check(rc == 1 and "no loaderd joined for shard 1/2 (is it running?)" in said,
          "reducerd without shard 1/2: exit %s, log:\n%s" % (rc, said))
    print("a missing shard is named at the stall timeout")
    wait_exit(l0, "loaderd 0/2 after the job failed")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
print("1 passed, 0 failed")
