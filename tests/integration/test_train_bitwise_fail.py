"""Bitwise training (--chunk, issue 31) with samples that FAIL: a sample's
chunk is fixed by its place in the step (BATCH 'pos' / N, gpud/chunk_sizes.h),
so a sample that does not load leaves a hole in its own chunk instead of
moving the cut of every later chunk of its rank (which depends on W). The
job: an ImageFolder of Fashion-MNIST JPEGs with two truncated files (header
intact), 2 epochs, --global-batch-size 16 --chunk 4 (62 samples: 4 steps an
epoch, the last of 14 = chunks 4, 4, 4, 2), W = 1, 2, 3:

  uint8   the default wire: loaderd fails the truncated files and leaves
          them out of the rank's batch (global_count lowered);
  jpeg    --wire jpeg: loaderd ships the files, gpud fails them after the
          ranks agree on the failed count;

each must give the same model.safetensors bytes for every W, and uint8 the
same bytes as jpeg (the same chunks, samples and divisor). The negative
control: DDPIPE_BITWISE_BREAK=by-count makes gpud cut the chunks by count
(the old way): W = 1 and W = 3 must then differ, else the failures never
moved a chunk and the test proves nothing."""
import filecmp
import os
import shutil
from ddp_it import *

PER_CLASS, G, CHUNK, EPOCHS = 6, 16, 4, 2
FLAGS = ["--epochs", str(EPOCHS), "--seed", "11", "--lr", "0.05", "--momentum", "0.9",
         "--global-batch-size", str(G), "--chunk", str(CHUNK), "--worker-timeout", "20",
         "--ring-timeout", "5"]

wd = workdir("train-bitwise-fail")
src = jpeg_folder(997)
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
data = os.path.join(wd, "data")
for c in classes:
    os.makedirs(os.path.join(data, c))
    for f in sorted(os.listdir(os.path.join(src, c)))[:PER_CLASS]:
        shutil.copy(os.path.join(src, c, f), os.path.join(data, c, f))
good = PER_CLASS * len(classes)
bad = []
for c in (classes[2], classes[7]):   # truncated: the header decodes, the scan does not
    first = sorted(os.listdir(os.path.join(data, c)))[0]
    blob = read(os.path.join(data, c, first), "rb")
    bad.append(os.path.join(c, "zz-truncated.jpg"))
    with open(os.path.join(data, bad[-1]), "wb") as f:
        f.write(blob[: len(blob) * 2 // 3])


def model_of(out):
    return os.path.join(out, "model.safetensors")


def run(wire, w, env=None):
    """One job; env: variables for its processes (the gpuds inherit ours)."""
    out = os.path.join(wd, "%s-w%d%s" % (wire, w, "-break" if env else ""))
    run_train(data, out, w, FLAGS + ["--wire", wire], env=env)
    assert_no_leftovers(out)
    rlog = read(os.path.join(out, "logs", "reducerd.log"))
    for e in range(EPOCHS):   # the failures did happen, every epoch
        check("epoch %d train: %d samples, %d failed" % (e, good, len(bad)) in rlog,
              "%s: reducerd.log does not count epoch %d's %d samples and %d failed:\n%s"
              % (out, e, good, len(bad), rlog[-2000:]))
    return out


def same(a, b, what):
    if not filecmp.cmp(model_of(a), model_of(b), shallow=False):
        d, tensor = weights_diff(model_of(a), model_of(b))
        fail("%s: model.safetensors differ (largest difference %.3g in %s)" % (what, d, tensor))
    print("%s: identical" % what, flush=True)


ref = {}
for wire in ("uint8", "jpeg"):
    ref[wire] = run(wire, 1)
    for w in (2, 3):
        same(ref[wire], run(wire, w), "--wire %s, %d failed files: W=1 vs W=%d" % (wire, len(bad), w))
same(ref["uint8"], ref["jpeg"], "W=1: --wire uint8 vs jpeg")
if "uint8" in ref:   # the negative control
    broken = run("uint8", 3, {"DDPIPE_BITWISE_BREAK": "by-count"})
    check(not filecmp.cmp(model_of(ref["uint8"]), model_of(broken), shallow=False),
          "DDPIPE_BITWISE_BREAK=by-count: W=3 still equals W=1: the failed samples never "
          "moved a chunk, the test cannot fail")
    print("by-count chunks (the old way): W=3 differs from W=1, as it must", flush=True)
print("1 passed, 0 failed")
