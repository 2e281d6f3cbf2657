"""The pipelined training step (gpud/train_ahead.c, docs/CUDA.md "The input
path"): while a step runs, a rank reads loaderd's next message and, when it
is the next step's batch, writes its pixels into the training graph, so the
next step's begin does not. That moves only when the bytes are written: the
same job with DDPIPE_TRAIN_OVERLAP=0 (each step's batch read after the step
before) gives a byte-identical model.safetensors and the same metrics.csv (but its clocks),
with 1 and 2 ranks, and its gpuds stage nothing ahead. How many steps were
staged ahead with the overlap on depends on when loaderd's batches arrive,
so it is printed, not checked. Every wait is on a process's exit."""
import os

from ddp_it import *  # noqa: F401,F403

train = idx_subset("train", 0, 240)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-pipeline")
common = ["--global-batch-size", "32", "--epochs", "2", "--seed", "5", "--lr", "0.01"]


def results(out):
    keys = ("epoch", "phase", "samples", "loss", "top1", "top5", "lr")
    return [tuple(r[k] for k in keys) for r in metrics_rows(out)]


for workers in (1, 2):
    on = os.path.join(wd, "on-%d" % workers)
    off = os.path.join(wd, "off-%d" % workers)
    run_train(train, on, workers, common, val=val)
    run_train(train, off, workers, common, val=val, env={"DDPIPE_TRAIN_OVERLAP": "0"})
    for out in (on, off):
        assert_no_leftovers(out)
    check(read(os.path.join(on, "model.safetensors"), "rb") ==
          read(os.path.join(off, "model.safetensors"), "rb"),
          "%d workers: model.safetensors differs with the overlap on and off" % workers)
    check(results(on) == results(off), "%d workers: metrics.csv differs: %s against %s" %
          (workers, results(on), results(off)))
    losses = train_losses(on)
    check(sorted(losses) == [0, 1] and losses[1] < losses[0],
          "%d workers: the train loss did not fall: %s" % (workers, losses))
    check(staged_ahead(off, "train") == 0, "%d workers: DDPIPE_TRAIN_OVERLAP=0 staged %d steps ahead" %
          (workers, staged_ahead(off, "train")))
    print("%d workers: the same model and metrics; %d steps' batches staged ahead with the "
          "overlap on" % (workers, staged_ahead(on, "train")), flush=True)
print("train_pipeline: ok")
