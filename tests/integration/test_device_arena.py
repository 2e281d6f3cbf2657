"""A device-resident arena through the whole pipeline, without a device:
--device ref-device runs the ref kernels over arenas the host cannot read
(gpud/cpu/ref_device.c), so the daemons' training path — the start-up
broadcast of rank 0's weights, the gradient buckets all-reduced on the
host mirror while backward runs, SyncBatchNorm's statistics, the optimizer
as the arena's op, the per-step non-finite scans, checkpoints and the
final weights, --resume — must reach the parameters only through the
arena. Every file it writes must be byte-identical to --device ref's:

  - 2 ranks, --sync-bn, SGD with momentum, 2 epochs: model.safetensors
    and checkpoint.safetensors the same bytes, the same train losses;
  - --resume of the ref-device checkpoint for a third epoch on ref-device
    and on ref (the checkpoint loaded into device arenas): the same bytes;
  - evaluating the trained weights on ref-device (the inference plan folds
    BatchNorm through device stages) gives ref's counts and per-class report;
  - gpud --verbose says a step's bytes: on ref-device with 2 ranks the
    gradients cross to the host mirror and back (twice the gradient
    bytes), never the weights; on ref nothing is copied."""
import glob
import os
import re
from ddp_it import *

# 64 samples in global batches of 16: 4 steps an epoch on each rank, so the
# plain steps (3 of 4) outnumber the ones that also carry the start-up
# broadcast or an epoch's validation and checkpoint (the step-bytes check
# below). The ref kernels under ASan cost per sample: 160 samples in
# batches of 32 made this the suite's longest test (~90 s) for the same
# checks.
train = idx_subset("train", 0, 64)
val = idx_subset("t10k", 0, 32)
wd = workdir("device-arena")
flags = ["--global-batch-size", "16", "--seed", "3", "--lr", "0.01", "--momentum", "0.9",
         "--sync-bn", "--worker-timeout", "20", "--verbose"]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


runs = {}
for dev in ("ref", "ref-device"):
    out = os.path.join(wd, dev)
    run_train(train, out, 2, flags + ["--epochs", "2", "--device", dev], val=val)
    assert_no_leftovers(out)
    runs[dev] = out

a, b = runs["ref"], runs["ref-device"]
for f in ("model.safetensors", "checkpoint.safetensors"):
    check(read_bytes(os.path.join(a, f)) == read_bytes(os.path.join(b, f)),
          "%s: ref-device's bytes differ from ref's" % f)
la, lb = train_losses(a), train_losses(b)
check(la == lb and sorted(la) == [0, 1], "train losses: ref %s, ref-device %s" % (la, lb))
check(la[1] < la[0], "the train loss did not fall: %s" % la)

# the step-bytes lines: parameters/gradients = the gradients down and up
logs = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(b, "logs", "gpud*")))
steps = [(int(m.group(1)), int(m.group(2))) for m in re.finditer(
    r"step bytes host<->backend \(ref-device.*? arenas\): batch in \d+, out \d+, "
    r"parameters/gradients (\d+), bn (\d+)", logs)]
check(len(steps) >= 10, "ref-device: %d 'step bytes' lines in the gpud logs" % len(steps))
model, _ = safetensors_read(os.path.join(b, "model.safetensors"))
grad_bytes = 4 * sum(v.size for k, v in model.items()
                     if (k.endswith(".weight") or k.endswith(".bias")) and v.dtype.kind == "f")
# a step's line also holds what ran since the last one (the start-up
# broadcast, an epoch's validation fold and checkpoint): the plain steps
# are the most common figure and the smallest
params = [p for p, _ in steps]
common = max(set(params), key=params.count)
check(common == 2 * grad_bytes and min(params) == common and all(bn > 0 for _, bn in steps),
      "ref-device step bytes (params, bn) %s, want params = 2 x %d gradient bytes" %
      (sorted(set(steps)), grad_bytes))
ref_logs = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(a, "logs", "gpud*")))
check(re.search(r"\(host arenas\): batch in \d+, out \d+, parameters/gradients 0, bn 0", ref_logs),
      "ref: no step-bytes line with 0 parameter and bn bytes")

# --resume the ref-device checkpoint for a third epoch, on both backends
third = {}
for dev in ("ref", "ref-device"):
    out = os.path.join(wd, "resume-" + dev)
    run_train(train, out, 2, flags + ["--epochs", "3", "--device", dev, "--resume", b], val=val)
    third[dev] = read_bytes(os.path.join(out, "model.safetensors"))
check(third["ref"] == third["ref-device"], "resumed epoch 3: ref-device's weights differ from ref's")

# evaluating the trained weights: the same counts and predictions
ev = {}
for dev in ("ref", "ref-device"):
    out = os.path.join(wd, "eval-" + dev)
    run_eval(val, out, 2, 16, ["--device", dev],
             model_args=["--model", "wideresnet", "--channels", "4,8,16,32", "--weights",
                         os.path.join(a, "model.safetensors")])
    ev[dev] = out
check(counts(ev["ref"]) == counts(ev["ref-device"]),
      "eval counts: ref %s, ref-device %s" % (counts(ev["ref"]), counts(ev["ref-device"])))
rep = [read_bytes(os.path.join(ev[d], "classification_report.txt")) for d in ("ref", "ref-device")]
check(rep[0] == rep[1], "classification_report.txt: ref-device's differs from ref's")
print("1 passed, 0 failed")
