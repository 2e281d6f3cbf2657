"""The pipelined eval (gpud/eval.c, docs/CUDA.md "The input path"): an eval
job's gpud keeps a batch unanswered while it stages the next one, then
answers it. That moves only when RESULT and CREDIT leave: the same job with
DDPIPE_EVAL_OVERLAP=0 (every batch answered before the next is taken) gives
byte-identical predictions.csv and the same counts, with 1 and 2 workers,
and its gpuds stage nothing ahead. How many batches were staged ahead with
the overlap on depends on when loaderd's batches arrive, so it is printed,
not checked. Every wait is on a process's exit."""
import os

from ddp_it import *  # noqa: F401,F403

data = jpeg_folder(211)
wd = workdir("eval-pipeline")


for workers in (1, 2):
    on = os.path.join(wd, "on-%d" % workers)
    off = os.path.join(wd, "off-%d" % workers)
    run_eval(data, on, workers, 16, extra=["--predictions", "topk"])
    run_eval(data, off, workers, 16, extra=["--predictions", "topk"],
             env={"DDPIPE_EVAL_OVERLAP": "0"})
    check(counts(on) == counts(off), "%d workers: counts differ: %s against %s" %
          (workers, counts(on), counts(off)))
    check(read(os.path.join(on, "predictions.csv")) == read(os.path.join(off, "predictions.csv")),
          "%d workers: predictions.csv differs with the overlap on and off" % workers)
    check(staged_ahead(off, "eval") == 0, "%d workers: DDPIPE_EVAL_OVERLAP=0 staged %d batches "
          "ahead" % (workers, staged_ahead(off, "eval")))
    print("%d workers: the same predictions; %d batches staged ahead with the overlap on" %
          (workers, staged_ahead(on, "eval")), flush=True)
    assert_no_leftovers(on)
print("eval_pipeline: ok")
