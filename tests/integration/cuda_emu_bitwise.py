"""Bitwise training (--chunk N, docs/TRAINING.md "Bitwise training") with
--device cuda, whole jobs through the four daemons with the emulated gpud
(tests/gpud/cuemu: the cuda backend's host code over the kernel emulator,
its cuDNN faked by the reference kernels). A cuda gpud's gradient arena is
device memory: each chunk's gradients are summed exactly there, as int64
limbs, by the exact-sum kernels (gpud/cuda/cuda_xsum.c); in an NCCL
generation they are summed there too, else read once a step for the
ZeroMQ ring, the rounded result written back to the device
(gpud/trainer.c, gpud/grad_exact.c);
DDPIPE_CUDA_XSUM=0 makes them on the host from copies of each chunk's
gradients instead.

  - SyncBatchNorm (W = 1, 2, 3) and ghost BatchNorm (W = 1, 3) (24
    samples, global batch 12, chunks of 4: 3 chunks a step, W = 2 holds
    2 + 1, W = 3 one each; 2 steps): model.safetensors the SAME BYTES for
    every W, sync's W = 3 with the sums made on the host
    (DDPIPE_CUDA_XSUM=0: the device's limbs are the host's), and
    within 1e-4 of the cpu backend's bitwise job (the right sums, not only
    the same ones); bf16 with SyncBatchNorm (the 16-bit NHWC table), W = 1
    and 3 the same bytes;
  - sync's W = 2 runs with NCCL allowed on one GPU
    (NCCL_MULTI_RANK_GPU_ENABLE=1, the emulator's NCCL): the generation
    sums over NCCL, the limbs made on the device and summed there (a
    uint32 max of the tops, an int64 sum of the limbs, the rounding on
    the device), the same bytes as W = 1's, and no gradient byte crosses
    between host and device after the first step (each gpud's --verbose
    "step bytes" line; sync's W = 3 on the host's sums counts its copies);
  - the negative control: DDPIPE_BITWISE_BREAK=float-ring (the gradients
    summed as floats over the ring) with W = 3 differs from W = 1, so the
    comparison can fail;
  - DDPIPE_CUDNN_TUNE=1 with --chunk is refused by ddpipe (each gpud would
    time its own engines).

Run by ctest as it_cuda_emu_bitwise (DDPIPE_EMU_GPUD: the emulated gpud)."""
import filecmp
import glob
import os

from ddp_it import *  # noqa: E402  (BIN: the built binaries, the test data beside them)
from ddp_emu import remove, step_bytes, use_emulated_gpud

EMU_BIN = use_emulated_gpud()
wd = workdir("cuda-emu-bitwise")
train = idx_subset("train", 0, 24)
COMMON = ["--epochs", "1", "--seed", "3", "--lr", "0.05",
          "--momentum", "0.9", "--global-batch-size", "12", "--chunk", "4",
          "--worker-timeout", "60", "--ring-timeout", "60"]


def job(name, workers, extra=(), env=None, device="cuda"):
    out = os.path.join(wd, name)
    run_train(train, out, workers, ["--device", device] + COMMON + list(extra), timeout=900,
              env=env)
    path = os.path.join(out, "model.safetensors")
    check(os.path.exists(path), "%s: no model.safetensors" % name)
    return out, path


def gpud_logs(out):
    return "".join(open(p, errors="replace").read()
                   for p in glob.glob(os.path.join(out, "logs", "gpud*")))


try:
    for bn, extra in (("sync", ["--sync-bn"]), ("ghost", []),
                      ("bf16", ["--sync-bn", "--precision", "bf16"])):
        out1, one = job("%s-w1" % bn, 1, extra)
        check("cuemu (the kernel emulator" in gpud_logs(out1),
              "the job's gpud was not the emulated one")
        for w in ((2, 3) if bn == "sync" else (3,)):   # the suite's time: the others' 3 only
            # sync's W = 2 with NCCL allowed on one GPU (the emulator's), and
            # --verbose: the exact sum's line
            nccl = bn == "sync" and w == 2
            host = bn == "sync" and w == 3   # the host's limbs against W = 1's device ones
            env = ({"NCCL_MULTI_RANK_GPU_ENABLE": "1"} if nccl else
                   {"DDPIPE_CUDA_XSUM": "0"} if host else None)
            out, p = job("%s-w%d" % (bn, w), w, extra + (["--verbose"] if nccl or host else []),
                         env=env)
            # the gradients' bytes between host and device a step, per rank,
            # after the first (whose line counts the initial weights'
            # broadcast): the limbs' read and the sums' write on the ring,
            # none over NCCL
            grads = [[g for _, _, g, _ in step_bytes(open(lp, errors="replace").read())][1:]
                     for lp in sorted(glob.glob(os.path.join(out, "logs", "gpud*")))]
            if host:
                check("limbs made on the host" in gpud_logs(out),
                      "DDPIPE_CUDA_XSUM=0: the sums were not made on the host")
                check(len(grads) == 3 and all(r and all(g > 0 for g in r) for r in grads),
                      "the host's sums: step gradient bytes %s, want the copies counted" % grads)
            check(filecmp.cmp(one, p, shallow=False),
                  "cuda bitwise %s: W = %d's model.safetensors differs from W = 1's" % (bn, w))
            if nccl:
                logs = gpud_logs(out)
                check("NCCL communicator" in logs,
                      "bitwise training formed no NCCL generation:\n%s" % logs[-2000:])
                check(logs.count("summed there (int64 limbs, NCCL)") >= 4 and
                      "made on the host" not in logs and "over the ring" not in logs,
                      "the gpuds' exact sums did not go over NCCL (2 steps, 2 ranks):\n%s"
                      % logs[-3000:])
                check(len(grads) == 2 and all(r and all(g == 0 for g in r) for r in grads),
                      "bitwise over NCCL: step gradient bytes host<->device %s, want 0" % grads)
        if bn == "ghost":
            ghost_one = one
        if bn == "sync":
            sync_one = one
            # the sums are the right ones, not merely the same ones (a
            # gradient never copied to the mirror would sum zeros on every
            # W alike): the cpu backend's bitwise job within fp32 rounding
            _, cpu = job("sync-cpu", 1, extra, device="cpu")
            d, where = weights_diff(one, cpu)
            print("cuda (emulated) vs cpu, bitwise sync-bn W = 1: %.3g (%s)" % (d, where))
            check(d <= 1e-4, "cuda bitwise weights %.3g from the cpu backend's (%s)" % (d, where))
    check(not filecmp.cmp(sync_one, ghost_one, shallow=False),
          "sync and ghost BatchNorm gave the same bytes: --sync-bn did nothing")

    _, p = job("sync-w3-break", 3, ["--sync-bn"], env={"DDPIPE_BITWISE_BREAK": "float-ring"})
    check(not filecmp.cmp(sync_one, p, shallow=False),
          "DDPIPE_BITWISE_BREAK=float-ring: W = 3 still gave W = 1's bytes (the comparison "
          "cannot fail)")

    r = run_train(train, os.path.join(wd, "tune"), 2, ["--device", "cuda"] + COMMON, expect_rc=2,
                  env={"DDPIPE_CUDNN_TUNE": "1"})
    check("DDPIPE_CUDNN_TUNE=1" in r.stderr, "tuning with --chunk: %s" % r.stderr.strip())
finally:
    remove(EMU_BIN)
print("cuda_emu_bitwise: ok")
