"""ddpipe train --wire jpeg: loaderd ships each train sample's original file
with the augmentation's config and seed, gpud draws the same crop/flip per
(seed, epoch, id) and decodes with the same code: 2 ranks, 2 epochs, a small
ImageFolder of Fashion-MNIST JPEGs with --augment crop-flip and a --val set
give final weights equal bit for bit to --wire uint8, and the same summary.

A truncated JPEG whose header is fine sits in the train set: loaderd reads
it (jpeg) and it fails only at gpud, after loaderd counted it in the step's
global_count. The ranks agree on the step's failed count before the forward
pass and train on global_count - F, the divisor loaderd sends with uint8
(where it drops the sample itself): the weights are again equal bit for bit
(same samples, same order, same divisor; --sync-bn too, its statistics see
the same micro-batches), and each epoch counts the file failed, by its path,
with gpud's reason. A rank lost mid-run (--fault) gives the same weights
with jpeg as with uint8. --wire jpeg with --cache or --loaders 2 is
refused (exit 2)."""
import os
import shutil
import subprocess
from ddp_it import *

wd = workdir("wire-train")
src = jpeg_folder(997)
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
train, val = os.path.join(wd, "train"), os.path.join(wd, "val")
for c in classes:
    files = sorted(os.listdir(os.path.join(src, c)))
    for dst, part in ((train, files[:6]), (val, files[6:9])):
        os.makedirs(os.path.join(dst, c))
        for f in part:
            shutil.copy(os.path.join(src, c, f), os.path.join(dst, c, f))
n_train = 6 * len(classes)

FLAGS = ["--epochs", "2", "--batch-size", "8", "--seed", "7", "--lr", "0.05",
         "--augment", "crop-flip"]


def run(name, wire, extra=()):
    out = os.path.join(wd, name)
    run_train(train, out, 2, FLAGS + ["--wire", wire] + list(extra), val=val)
    assert_no_leftovers(out)
    return out


def same_weights(a, b, what):
    d, name = weights_diff(os.path.join(a, "model.safetensors"), os.path.join(b, "model.safetensors"))
    check(d == 0, "%s: %s differs by %.3g between --wire uint8 and jpeg" % (what, name, d))


def timeless(v):
    """A summary without what depends on the clock or the run's place."""
    if isinstance(v, dict):
        return {k: timeless(x) for k, x in v.items()
                if not any(w in k for w in ("seconds", "per_s", "time", "started", "finished",
                                            "host", "pid", "out", "argv", "config", "wire",
                                            "failed_files", "throughput", "rate",
                                            "last_good_checkpoint"))}
    if isinstance(v, list):
        return [timeless(x) for x in v]
    return v


def same_summary(a, b, what):
    sa, sb = timeless(summary(a)), timeless(summary(b))
    for key in sorted(set(sa) | set(sb)):
        check(sa.get(key) == sb.get(key), "%s: summary %s is %r with uint8, %r with jpeg"
              % (what, key, sa.get(key), sb.get(key)))
    check(metrics_rows(a) and [(r["epoch"], r["phase"], r["loss"], r.get("top1"))
                               for r in metrics_rows(a)] ==
          [(r["epoch"], r["phase"], r["loss"], r.get("top1")) for r in metrics_rows(b)],
          "%s: metrics.csv losses/top-1 differ" % what)


# 1. clean data: the same weights, summary and metrics
u8 = run("clean-uint8", "uint8")
jp = run("clean-jpeg", "jpeg")
same_weights(u8, jp, "clean")
same_summary(u8, jp, "clean")
check("--wire jpeg" in read(os.path.join(jp, "logs", "loaderd.log")),
      "loaderd.log does not say it ships files")
print("clean: --wire jpeg = --wire uint8 bit for bit (2 ranks, 2 epochs, crop-flip)", flush=True)

# 2. a truncated JPEG (header intact): fails at gpud with jpeg, at loaderd with uint8
a_jpeg = read(os.path.join(train, classes[1], sorted(os.listdir(os.path.join(train, classes[1])))[0]),
              "rb")
trunc = os.path.join(classes[1], "zz-truncated.jpg")
with open(os.path.join(train, trunc), "wb") as f:
    f.write(a_jpeg[: len(a_jpeg) * 2 // 3])
bu8 = run("bad-uint8", "uint8", ["--sync-bn"])
bjp = run("bad-jpeg", "jpeg", ["--sync-bn"])
same_weights(bu8, bjp, "truncated JPEG, --sync-bn")
same_summary(bu8, bjp, "truncated JPEG, --sync-bn")
# the summary's failed_files are the last (val) phase's; reducerd logs the train ones
rlog = read(os.path.join(bjp, "logs", "reducerd.log"))
for e in (0, 1):
    check("epoch %d train: %d samples, 1 failed" % (e, n_train) in rlog,
          "reducerd does not count epoch %d's %d samples and the truncated JPEG failed:\n%s"
          % (e, n_train, rlog[-2000:]))
    check("epoch %d train: failed %s: image file is truncated" % (e, trunc) in rlog
          and "(decoded at gpud rank" in rlog,
          "reducerd.log does not name epoch %d's failed file with gpud's reason" % e)
train_rows = metrics_rows(bjp, "train")
check(len(train_rows) == 2, "metrics.csv: %d train rows, want 2" % len(train_rows))
gpud_logs = "".join(read(os.path.join(bjp, "logs", f))
                    for f in os.listdir(os.path.join(bjp, "logs")) if f.startswith("gpud"))
check("did not decode" in gpud_logs and "the step trains on" in gpud_logs,
      "no gpud log names the sample it could not decode and the step's divisor")
print("truncated JPEG: failed at gpud, counted failed (%s), the same weights as uint8" % trunc,
      flush=True)

# 3. a rank lost mid-run (rank 1 SIGKILLs itself before step 4, the second
# epoch's): the survivors' ring fails in the failed-count sum (jpeg) or the
# gradient sum (uint8), reducerd re-forms 2 ranks and the step is redone;
# the same weights either way
outs = {}
for wire in ("uint8", "jpeg"):
    out = os.path.join(wd, "kill-" + wire)
    # the elastic tests' timeouts (ddp_elastic.FLAGS): the lost rank is only
    # noticed once silent for --worker-timeout, the default's wait made these
    # two runs ~12 s each against ~2 s for the others
    run_train(train, out, 3, FLAGS + ["--wire", wire, "--fault", "1:4", "--worker-timeout", "2",
                                      "--ring-timeout", "5"], val=val)
    assert_no_leftovers(out)
    check(summary(out)["training"].get("ranks_lost") == 1,
          "%s: summary says %r ranks lost, want 1" % (wire, summary(out)["training"].get("ranks_lost")))
    outs[wire] = out
same_weights(outs["uint8"], outs["jpeg"], "rank 1 lost before step 4")
print("rank lost: 3 -> 2 ranks, the same weights with jpeg and uint8", flush=True)

# 4. --wire jpeg keeps nothing decoded at loaderd: --cache is refused; training
# with several loaderds merges pixels: --loaders 2 is refused too
p = subprocess.run(train_cmd(train, os.path.join(wd, "cache"), 1,
                             ["--wire", "jpeg", "--cache", "memory"]),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 2 and "--cache" in p.stderr and p.stderr.count("\n") == 1,
      "--wire jpeg --cache memory: rc %d, stderr %r" % (p.returncode, p.stderr))
p = subprocess.run(train_cmd(train, os.path.join(wd, "loaders"), 2,
                             ["--wire", "jpeg", "--loaders", "2"]),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 2 and "--loaders" in p.stderr and p.stderr.count("\n") == 1,
      "--wire jpeg --loaders 2: rc %d, stderr %r" % (p.returncode, p.stderr))
print("1 passed, 0 failed")
