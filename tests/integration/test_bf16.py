"""ddpipe eval/train --precision bf16 (docs/BF16.md), whole jobs:

  1. a bad --precision is a one-line error naming the flag and the values
     (exit 2) for eval and train; nothing starts;
  2. the demo WideResNet on the first 2,000 Fashion-MNIST test images with
     --precision bf16 on 2 workers: top-1 within 0.2 points (4 samples) of
     PyTorch's fp32 on them (fmnist_t10k_ref.json's per-sample top-1), the
     per-sample top-1 equal to fp32's on at least 99% of them (bf16 on all
     10,000, emulated in PyTorch, is in bf16_io.safetensors: 8773 against
     fp32's 8769; 2,000 keep the test short on the tape); the CLI says
     once that bf16 is emulated;
  3. a short bf16 training run: the exported weights are fp32 safetensors
     (not bf16-rounded master weights) and the train loss falls.
The worker-count invariance in bf16 is it_train_invariance_bf16.

DDPIPE_BF16 (docs/BF16.md "Native") is passed on to gpud. it_bf16_native
runs this test with DDPIPE_BF16=native: 2. and 3. on oneDNN's native bf16
kernels (gpud's log says "bf16 (native: ...)"), the same bounds; where
oneDNN has no bf16 primitives, the eval must fail with gpud's one clear
error, and the test then exits 77 (skipped)."""
import os
import subprocess
import sys
from ddp_it import *

GOLDEN = os.path.join(SRC, "tests", "golden")
wd = workdir("bf16")
NOTE = "bf16: this CPU has no AMX (amx_bf16); bf16 numerics are emulated"
MODE = os.environ.get("DDPIPE_BF16", "")
NATIVE_ERR = "DDPIPE_BF16=native: oneDNN creates no bf16 convolution on this CPU"


def logs_text(out):
    text = ""
    logdir = os.path.join(out, "logs")
    for f in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
        with open(os.path.join(logdir, f), errors="replace") as fh:
            text += fh.read()
    return text


def cpu_fast_bf16():
    """AMX, or avx512_bf16 on an AMD CPU: native bf16 by default (gpud_cpu_fast_bf16)."""
    flags, vendor = [], ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags") and not flags:
                flags = line.split()
            if line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
    return "amx_bf16" in flags or ("avx512_bf16" in flags and vendor == "AuthenticAMD")


# 1. option errors
for cmd, args in (("eval", ["--data", "idx:%s/t10k" % FMNIST, "--out", os.path.join(wd, "x")] + WRN_ARGS),
                  ("train", ["--data", "idx:%s/t10k" % FMNIST, "--out", os.path.join(wd, "y"),
                             "--model", "wideresnet"])):
    p = subprocess.run([os.path.join(BIN, "ddpipe"), cmd] + args + ["--precision", "fp8"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    want = "ddpipe %s: --precision fp8: fp32, bf16 or fp16" % cmd
    check(p.returncode == 2 and p.stderr.strip() == want,
          "%s --precision fp8: exit %d, stderr %r; want 2 and %r" % (cmd, p.returncode, p.stderr, want))
print("bad --precision: exit 2 with one line", flush=True)

# 2. eval accuracy against PyTorch fp32 and bf16
N = 2000
ref = load_json(os.path.join(GOLDEN, "fmnist_t10k_ref.json"))
fp32_correct = sum(a == b for a, b in zip(ref["top1"][:N], ref["labels"][:N]))
out = os.path.join(wd, "eval")
p = run_eval("idx:%s/t10k" % FMNIST, out, 2, 128,
             extra=["--precision", "bf16", "--predictions", "topk", "--limit", str(N)],
             model_args=WRN_ARGS, timeout=540, expect_rc=None if MODE == "native" else 0)
if MODE == "native" and p.returncode != 0:
    # no bf16 primitives here: gpud refuses with its one clear error
    text = p.stderr + logs_text(out)
    check(NATIVE_ERR in text, "DDPIPE_BF16=native failed (exit %d) without %r:\n%s\n%s" % (
        p.returncode, NATIVE_ERR, p.stderr, text[-3000:]))
    # no "emulated" note before a refusal: with native forced it is not
    check("bf16:" not in p.stderr, "DDPIPE_BF16=native: the CLI printed a bf16 note before "
          "gpud refused:\n%s" % p.stderr)
    print("DDPIPE_BF16=native: refused with %r; skipped (77)" % NATIVE_ERR, flush=True)
    sys.exit(77)
if MODE == "native":
    text = logs_text(out)
    check("bf16 (native: " in text, "DDPIPE_BF16=native: gpud's log has no 'bf16 (native: ':\n%s" %
          text[-3000:])
if MODE == "native":
    want_note = None   # gpud runs oneDNN's bf16 kernels (or refused above)
elif not cpu_fast_bf16():
    want_note = NOTE
elif MODE == "emulated":
    want_note = "bf16: DDPIPE_BF16=emulated: bf16 numerics are emulated"
else:
    want_note = None   # native chosen by the probe: nothing to say
notes = p.stderr.count(want_note) if want_note else p.stderr.count("bf16:")
check(notes == (1 if want_note else 0), "the bf16 note (%r) printed %d times:\n%s" % (
    want_note, notes, p.stderr))
s = summary(out)
check(s["samples"] == N and s["failed"] == 0, "bf16 eval: %s samples, %s failed" % (s["samples"], s["failed"]))
got = s["correct_top1"]
print("bf16 top-1 %d / %d; PyTorch fp32 %d" % (got, N, fp32_correct), flush=True)
check(abs(got - fp32_correct) <= N * 0.002, "bf16 top-1 %d is more than 0.2 points from fp32's %d" % (
    got, fp32_correct))
with open(os.path.join(out, "predictions.csv")) as f:
    import csv
    top1 = "".join(r["top1"] for r in csv.DictReader(f))
same = sum(a == b for a, b in zip(top1, ref["top1"][:N]))
print("per-sample top-1 equal to PyTorch fp32's on %d / %d" % (same, N), flush=True)
check(len(top1) == N and same >= N * 0.99, "bf16 top-1 equals fp32's on only %d of %d samples" % (same, N))

# 3. training in bf16: fp32 weights out, the loss falls
train = idx_subset("train", 0, 256)
out = os.path.join(wd, "train")
run_train(train, out, 2, ["--precision", "bf16", "--epochs", "2", "--global-batch-size", "64", "--lr", "0.05",
                          "--seed", "1"], timeout=540)
losses = train_losses(out)
check(losses[1] < losses[0], "bf16 train loss did not fall: %s" % losses)
tensors, _ = safetensors_read(os.path.join(out, "model.safetensors"))
import numpy as np
floats = [t for n, t in tensors.items() if t.dtype == np.float32 and t.size > 1]
check(floats and all(t.dtype == np.float32 for t in floats), "model.safetensors is not F32")
low = sum(int(np.count_nonzero(t.view(np.uint32) & 0xffff)) for t in floats)
total = sum(t.size for t in floats)
check(low > total // 2, "the exported weights look bf16-rounded (%d of %d with low bits): the master "
      "weights must stay fp32" % (low, total))
print("bf16 training: losses %s, weights F32 with fp32 detail (%d of %d)" % (losses, low, total))
print("1 passed, 0 failed")
