"""Whole jobs with --device cuda without a GPU: gpud built on the cuda
backend over the kernel emulator (tests/gpud/cuemu; ddp_compute_emu, its
cuDNN and cuBLAS faked by the reference kernels) beside the ordinary
ddpipe, loaderd, reducerd and reporterd. What scripts/gpu-e2e.sh and
gpu-check's step-bytes check ask of a GPU, asked here of the backend's host
code (the uint8 input path through pinned buffers and a copy stream,
BatchNorm on the device, the traffic counters, bf16 buffers of two kinds):

  - eval of the demo WideResNet on 48 Fashion-MNIST test images, fp32,
    bf16 and fp16 (the 16-bit inference plans), with 1 and 2 workers: each
    precision's predictions.csv identical
    for both worker counts, fp32's top-1 equal to --device cpu's; bf16 again
    tuned (DDPIPE_CUDNN_TUNE=1 writes a plans file) and then with 2 workers
    reading that file (both gpuds read it, same predictions); tuning with 2
    workers refused by ddpipe (each would pick its own engines);
  - training (1 epoch, 64 images, 1 worker, --verbose): every step's
    "step bytes" line says parameters/gradients 0 and bn 0 (what the plan,
    bench/step_bytes, says for world 1) and out = the loss and top-5 ids
    (ranked on the device, not the logits), and the pass (dropout included)
    is recorded as one CUDA graph at the second step and replayed; bf16 training runs and its loss is
    finite; fp16 training runs, at --loss-scale 65536 with no skipped step,
    at 2^40 with every step skipped (summary.json);
  - training with 2 workers over NCCL (the emulator's, tests/gpud/cuemu/
    fake_nccl.c: ranks as processes exchanging files) against the ZeroMQ
    ring: the communicator logged, the gradient bucket queued on NCCL while
    backward runs, no gradient byte through the host, and the same
    model.safetensors bytes.

Run by ctest as it_cuda_emu (DDPIPE_EMU_GPUD: the emulated gpud)."""
import glob
import os
import re

from ddp_it import *  # noqa: E402  (BIN: the built binaries, the test data beside them)
from ddp_emu import remove, step_bytes, use_emulated_gpud

EMU_BIN = use_emulated_gpud()

wd = workdir("cuda-emu")
test = idx_subset("t10k", 0, 48)


def predictions(out):
    return read(os.path.join(out, "predictions.csv"))


try:
    preds = {}
    for prec in ("fp32", "bf16", "fp16"):
        for w in (1, 2):
            out = os.path.join(wd, "eval-%s-w%d" % (prec, w))
            run_eval(test, out, workers=w, batch=16, timeout=600,
                     extra=["--device", "cuda", "--precision", prec, "--predictions", "topk"])
            preds[prec, w] = predictions(out)
        check(preds[prec, 1] == preds[prec, 2],
              "cuda %s: predictions.csv differs between 1 and 2 workers" % prec)
    # tuned cuDNN engines (docs/CUDA.md "Tuned engines"): one tuning job
    # writes the plans file, then both gpuds of a 2-worker job read it (the
    # variable reaches every daemon through ddpipe) and give the same
    # predictions as without it (the fake's engines compute alike)
    plans = os.path.join(wd, "cudnn-plans.txt")
    out = os.path.join(wd, "eval-bf16-tune")
    run_eval(test, out, workers=1, batch=16, timeout=600,
             extra=["--device", "cuda", "--precision", "bf16", "--predictions", "topk"],
             env={"DDPIPE_CUDNN_TUNE": "1", "DDPIPE_CUDNN_PLANS": plans})
    written = [l for l in read(plans).splitlines() if l.startswith("plan ")]
    check(len(written) > 0, "the tuning job wrote no plan to %s" % plans)
    out = os.path.join(wd, "eval-bf16-plans-w2")
    run_eval(test, out, workers=2, batch=16, timeout=600,
             extra=["--device", "cuda", "--precision", "bf16", "--predictions", "topk"],
             env={"DDPIPE_CUDNN_PLANS": plans})
    gl = [open(p, errors="replace").read() for p in glob.glob(os.path.join(out, "logs", "gpud*"))]
    read_by = [l for l in gl if re.search(r"cuDNN plans file \S+: %d convolution shapes' engines"
                                          % len(written), l)]
    check(len(gl) == 2 and len(read_by) == 2,
          "plans file: %d of %d gpud logs say they read its %d plans" % (len(read_by), len(gl),
                                                                         len(written)))
    check(all("refused" not in l for l in gl), "a gpud refused the plans file or an entry")
    check(predictions(out) == preds["bf16", 1],
          "bf16 eval with the plans file: predictions.csv differs from heuristics' engines")
    # tuning in several workers at once would let each pick its own engines:
    # ddpipe refuses it, saying how to tune
    p = run_eval(test, os.path.join(wd, "eval-tune-w2"), workers=2, batch=16, expect_rc=2,
                 extra=["--device", "cuda", "--precision", "bf16"],
                 env={"DDPIPE_CUDNN_TUNE": "1", "DDPIPE_CUDNN_PLANS": plans})
    check("DDPIPE_CUDNN_TUNE=1 with --workers 2" in p.stderr and "--workers 1" in p.stderr,
          "ddpipe eval with tuning and 2 workers: %r" % p.stderr[-500:])

    # where a job's start-up goes: gpud's first batch and the backend's
    # plans in its log, the first result and the rate after it in summary.json
    out = os.path.join(wd, "eval-fp32-w1")
    logs = "".join(open(p, errors="replace").read()
                   for p in glob.glob(os.path.join(out, "logs", "gpud*")))
    check(re.search(r"first batch: 16 samples in [0-9.]+s", logs),
          "cuda eval: no first-batch line in gpud's log")
    plans = re.search(r"cuda backend: (\d+) cuDNN graph plans in [0-9.]+s \((\d+) of them a "
                      r"shape's plan shared, (\d+) runtime-compiled in [0-9.]+s, \d+ loaded "
                      r"serialized\), \d+ legacy",
                      logs)
    # (the fake's runtime-compiled engine is its third: heuristics' first
    # deterministic one is not)
    check(plans and int(plans.group(1)) > int(plans.group(2)) > 0 and plans.group(3) == "0",
          "cuda eval: no cuDNN graph plan count (or none shared, or some runtime-compiled) in "
          "gpud's log")
    s = summary(out)
    check((s["first_result_seconds"] or 0) > 0 and (s["steady_images_per_sec"] or 0) > 0 and
          s["first_result_seconds"] < s["wall_seconds"],
          "cuda eval summary: first_result_seconds %r, steady_images_per_sec %r, wall %r" %
          (s["first_result_seconds"], s["steady_images_per_sec"], s["wall_seconds"]))
    cpu = os.path.join(wd, "eval-cpu")
    run_eval(test, cpu, workers=1, batch=16, extra=["--device", "cpu", "--predictions", "topk"])
    top = lambda text: [l.split(",")[3] for l in text.splitlines()[1:]]
    check(top(preds["fp32", 1]) == top(predictions(cpu)), "cuda fp32 top-1 differs from cpu's")

    train = idx_subset("train", 0, 64)
    out = os.path.join(wd, "train-fp32")
    run_train(train, out, 1, ["--device", "cuda", "--epochs", "1", "--batch-size", "16",
                              "--seed", "2", "--verbose"], timeout=600)
    logs = "".join(open(p, errors="replace").read()
                   for p in glob.glob(os.path.join(out, "logs", "gpud*")))
    check("cuemu (the kernel emulator" in logs, "the job's gpud was not the emulated one")
    steps = [(o, p, b) for _, o, p, b in step_bytes(logs)]
    check(len(steps) >= 3, "cuda training: %d step-bytes lines (want one a step)" % len(steps))
    check(all(p == 0 and b == 0 for _, p, b in steps),
          "cuda training step bytes (out, parameters, bn): %s, want parameters and bn 0" % steps)
    # out: each of the 16 samples' loss and top-5 ids (ranked on the
    # device), never the 10 logits (16 * 11 * 4 = 704)
    check(all(o == 16 * (1 + 5) * 4 for o, _, _ in steps),
          "cuda training step bytes out: %s, want 384 (loss + top-5 ids)" % [o for o, _, _ in steps])
    # the demo WideResNet's pass, dropout included, recorded at the second
    # step and replayed after (CUDA graphs on, as in a real job)
    check("training pass recorded" in logs and "of the training pass failed" not in logs,
          "cuda training: the pass was not recorded and replayed")
    check(os.path.exists(os.path.join(out, "model.safetensors")), "no model.safetensors")

    train32 = idx_subset("train", 0, 32)   # 2 steps: the suite's longest test, kept short
    out = os.path.join(wd, "train-bf16")
    run_train(train32, out, 1, ["--device", "cuda", "--precision", "bf16", "--epochs", "1",
                                "--batch-size", "16", "--seed", "2"], timeout=600)
    loss = train_losses(out)
    check(len(loss) == 1 and all(v == v and abs(v) < 1e6 for v in loss.values()),
          "bf16 training loss: %s" % loss)

    # fp16 (docs/FP16.md): the rounding kernel, the arena's unscale and the
    # device scan that skips a step; 2^40 overflows every step's gradients
    # (2 steps of 16 each)
    for scale, skipped in ((65536, 0), (2 ** 40, 2)):
        out = os.path.join(wd, "train-fp16-%d" % skipped)
        run_train(train32, out, 1, ["--device", "cuda", "--precision", "fp16", "--epochs", "1",
                                  "--batch-size", "16", "--seed", "2", "--loss-scale", str(scale)],
                  timeout=600)
        loss = train_losses(out)
        with open(os.path.join(out, "summary.json")) as f:
            t = json.load(f)["training"]
        check(len(loss) == 1 and all(v == v and abs(v) < 1e6 for v in loss.values()),
              "fp16 training loss: %s" % loss)
        last = scale / 2 ** (skipped - 1) if skipped else scale   # halved after each skip
        check(t["skipped_steps"] == skipped and t["loss_scale"] == last,
              "fp16 at --loss-scale %d: summary loss_scale %s, skipped_steps %s; want %s, %d" %
              (scale, t["loss_scale"], t["skipped_steps"], last, skipped))

    # NCCL in gpud (docs/CUDA.md "NCCL in gpud") through the four daemons:
    # two gpuds on the emulator's one device sum over the emulator's NCCL
    # (tests/gpud/cuemu/fake_nccl.c) against the same job on the ZeroMQ
    # ring; a sum of two floats is the same either way round, so the
    # weights must be the same bits
    models = {}
    # buckets of 16 KiB (DDPIPE_BUCKET_KB): this small WideResNet's gradient
    # in 7, each its own NCCL call (the sums the same bytes as the ring's)
    for path, env in (("nccl", {"NCCL_MULTI_RANK_GPU_ENABLE": "1", "DDPIPE_BUCKET_KB": "16"}),
                      ("ring", {"DDPIPE_NCCL": "0", "DDPIPE_BUCKET_KB": "16"})):
        out = os.path.join(wd, "train-w2-" + path)
        # 32 images, 8 a rank a step: 2 steps (the suite's longest test, kept short)
        run_train(train32, out, 2, ["--device", "cuda", "--epochs", "1", "--batch-size", "8",
                                    "--seed", "2", "--verbose"], timeout=600, env=env)
        logs = [open(p, errors="replace").read()
                for p in sorted(glob.glob(os.path.join(out, "logs", "gpud*")))]
        comm = all("NCCL communicator of 2 ranks" in l for l in logs)
        check(len(logs) == 2 and comm == (path == "nccl"),
              "%s job: NCCL communicator logged by both gpuds: %s" % (path, comm))
        # NCCL: the gradient buckets queued while backward runs (bucket_issue)
        queued = all("go to the device collective in" in l for l in logs)
        check(queued == (path == "nccl"), "%s job: buckets queued during backward: %s" %
              (path, queued))
        # the second step's pass recorded all the same, in segments cut
        # where a bucket completes (gpud/tape_pass.c; the buckets numbered
        # in backward's order, buckets_order: this WideResNet's stem sorts
        # last in the arena), NCCL's calls or the ring's copies to the host
        # mirror between them
        segs = [re.search(r"training pass recorded \(\d+ ops\)(?: in (\d+) segments)?", l)
                for l in logs]
        nseg = [int(s.group(1) or 1) if s else 0 for s in segs]
        check(all(n >= 3 for n in nseg) and
              all("of the training pass failed" not in l for l in logs),
              "%s job: the pass's recorded segments in each gpud: %s" % (path, nseg))
        # after the first step (which broadcasts the initial weights through
        # the host), the gradients cross the host only on the ring
        for l in logs:
            grads = [g for _, _, g, _ in step_bytes(l)][1:]
            check(grads and all((g == 0) == (path == "nccl") for g in grads),
                  "%s job: gradient bytes through the host after the first step %s (NCCL: "
                  "none; ring: the mirror)" % (path, grads))
        models[path] = open(os.path.join(out, "model.safetensors"), "rb").read()
    check(models["nccl"] == models["ring"], "2 gpuds: the NCCL job's weights differ from the "
          "ring job's")
finally:
    remove(EMU_BIN)
print("cuda_emu_jobs: ok")
