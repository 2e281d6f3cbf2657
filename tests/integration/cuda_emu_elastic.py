"""NCCL's elastic path without a GPU (docs/CUDA.md "NCCL in gpud",
docs/ELASTIC.md): three gpuds built on the kernel emulator, all on its one
device (NCCL_MULTI_RANK_GPU_ENABLE=1), sum their gradient buckets over the
emulator's NCCL (tests/gpud/cuemu/fake_nccl.c: ranks as processes
exchanging files, a dead peer's sum never completes). Rank 1 SIGKILLs
itself before the second step (--fault 1:1):

  - the survivors' pending NCCL sum is given up when reducerd's MEMBERS
    arrives (the cancel callback aborts the communicator), the two form
    generation 1 with a new id and a new communicator of 2 ranks, redo the
    step and finish: exit 0;
  - both generations' communicators are in the survivors' logs, the loss
    in membership.csv and summary.json;
  - the final weights equal an uninterrupted 3-rank run's (over NCCL too)
    within 1e-5: with --sync-bn (SyncBatchNorm's double sums over NCCL as
    well) a step's numbers do not depend on how its global batch is split
    over the ranks (test_elastic.py's job), so the redone step gives the
    uninterrupted run's weights to float rounding;
  - the same with bitwise training (--chunk 8: the exact limbs summed
    over NCCL): the job with the lost rank writes the uninterrupted
    run's bytes.

Every wait is on an event (an exit, a log line) and bounded."""
import csv
import os

from ddp_it import *  # noqa: F401,F403
from ddp_emu import remove, use_emulated_gpud

N, G = 48, 24             # 2 steps of 8 samples a rank (kept short: the emulator is slow)
FLAGS = ["--device", "cuda", "--global-batch-size", str(G), "--epochs", "1", "--seed", "3",
         "--lr", "0.001", "--momentum", "0", "--sync-bn", "--worker-timeout", "2",
         "--ring-timeout", "10", "--verbose"]
ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}

EMU_BIN = use_emulated_gpud()
wd = workdir("cuda-emu-elastic")
train = idx_subset("train", 0, N)


def gpud_log(out, rank):
    return read(os.path.join(out, "logs", "gpud.%d.log" % rank), "rb").decode(errors="replace")


def straight_and_killed(name, flags, survivor_lines, why):
    """An uninterrupted 3-rank job and the same with rank 1 SIGKILLed before
    the second step (--fault 1:1), whose survivors' logs must each hold
    every one of survivor_lines (else: why). Returns both jobs' folders."""
    base = os.path.join(wd, name + "-straight")
    run_train(train, base, 3, flags, timeout=600, env=ENV)
    out = os.path.join(wd, name + "-kill1")
    run_train(train, out, 3, flags + ["--fault", "1:1"], timeout=600, env=ENV)
    for r in (0, 2):
        log = gpud_log(out, r)
        check(all(line in log for line in survivor_lines), "%s, rank %d: %s" % (name, r, why))
    return base, out


try:
    base, out = straight_and_killed(
        "nccl", FLAGS, ("generation 0: NCCL communicator of 3 ranks",
                        "generation 1: NCCL communicator of 2 ranks"),
        "no communicator of 3 and then of 2 ranks in its log")
    check("NCCL communicator of 3 ranks" in gpud_log(base, 0),
          "the uninterrupted run did not sum over NCCL")
    with open(os.path.join(out, "membership.csv")) as f:
        rows = list(csv.DictReader(f))
    check(any(row.get("change") == "lost" for row in rows),
          "membership.csv records no lost rank: %s" % rows)
    t = summary(out).get("training") or {}
    check(t.get("ranks_lost") == 1 and t.get("world_size") == 2,
          "summary.json: ranks_lost %r, world_size %r (want 1, 2)" % (t.get("ranks_lost"),
                                                                    t.get("world_size")))
    d, name = weights_diff(os.path.join(base, "model.safetensors"),
                           os.path.join(out, "model.safetensors"))
    print("NCCL, a rank lost: largest weight difference from the uninterrupted run %.3g (%s)" %
          (d, name), flush=True)
    check(d <= 1e-5, "%s differs from the uninterrupted run's by %.3g > 1e-5" % (name, d))

    # bitwise training over NCCL (--chunk: the exact limbs summed on the
    # device, docs/TRAINING.md "Bitwise training"): the same loss of rank 1,
    # and the redone step's bytes are the uninterrupted run's exactly (a
    # step's sums do not depend on how its chunks are split over the ranks)
    bbase, bout = straight_and_killed(
        "bitwise", FLAGS + ["--chunk", "8"], ("generation 1: NCCL communicator of 2 ranks",
                                              "summed there (int64 limbs, NCCL)"),
        "the exact sums did not go over NCCL after the loss")
    same = read(os.path.join(bbase, "model.safetensors"), "rb") == \
        read(os.path.join(bout, "model.safetensors"), "rb")
    print("bitwise over NCCL, a rank lost: the same model.safetensors as the uninterrupted "
          "run: %s" % same, flush=True)
    check(same, "bitwise over NCCL: a rank lost changed the weights' bytes")
finally:
    remove(EMU_BIN)
print("cuda_emu_elastic: ok")
