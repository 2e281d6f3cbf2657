"""The pipelined training step (gpud/train_ahead.c, docs/CUDA.md "The input
path"): while a step runs, a rank reads loaderd's next message and, when it
is the next step's batch, writes its pixels into the training graph, so the
next step's begin does not. That moves only when the bytes are written: the
same job with DDPIPE_TRAIN_OVERLAP=0 (each step's batch read after the step
before) gives a byte-identical model.safetensors and the same metrics.csv
(but its clocks), with 1 and 2 ranks, and its gpuds stage nothing ahead.
With 2 ranks whose gradient buckets go over the host ring on their own
thread nothing is read ahead either (that thread's cancel callback reads
the same sockets); with DDPIPE_NO_OVERLAP=1 (the buckets after backward)
it is. How many steps were staged ahead depends on when loaderd's batches
arrive, so it is printed, not checked (but the zeros). Every wait is on a
process's exit."""
import os

from ddp_it import *  # noqa: F401,F403

train = idx_subset("train", 0, 240)
val = idx_subset("t10k", 0, 64)
wd = workdir("train-pipeline")
common = ["--global-batch-size", "32", "--epochs", "2", "--seed", "5", "--lr", "0.01"]


def results(out):
    keys = ("epoch", "phase", "samples", "loss", "top1", "top5", "lr")
    return [tuple(r[k] for k in keys) for r in metrics_rows(out)]


# 2 ranks: the gradient buckets over the host ring on their own thread
# (nothing read ahead meanwhile: the ring's cancel callback reads the same
# sockets), and after backward (DDPIPE_NO_OVERLAP=1: read ahead)
for workers, env, tag in ((1, {}, "1"), (2, {}, "2"), (2, {"DDPIPE_NO_OVERLAP": "1"}, "2-no-overlap")):
    on = os.path.join(wd, "on-" + tag)
    off = os.path.join(wd, "off-" + tag)
    run_train(train, on, workers, common, val=val, env=env or None)
    run_train(train, off, workers, common, val=val, env=dict(env, DDPIPE_TRAIN_OVERLAP="0"))
    for out in (on, off):
        assert_no_leftovers(out)
    check(read(os.path.join(on, "model.safetensors"), "rb") ==
          read(os.path.join(off, "model.safetensors"), "rb"),
          "%s: model.safetensors differs with the overlap on and off" % tag)
    check(results(on) == results(off), "%s: metrics.csv differs: %s against %s" %
          (tag, results(on), results(off)))
    losses = train_losses(on)
    check(sorted(losses) == [0, 1] and losses[1] < losses[0],
          "%s: the train loss did not fall: %s" % (tag, losses))
    check(staged_ahead(off, "train") == 0, "%s: DDPIPE_TRAIN_OVERLAP=0 staged %d steps ahead" %
          (tag, staged_ahead(off, "train")))
    if tag == "2":
        check(staged_ahead(on, "train") == 0, "2 ranks with the buckets on their thread: %d "
              "steps staged ahead (the ring's thread reads the sockets meanwhile)" %
              staged_ahead(on, "train"))
    print("%s: the same model and metrics; %d steps' batches staged ahead with the overlap on" %
          (tag, staged_ahead(on, "train")), flush=True)
print("train_pipeline: ok")
