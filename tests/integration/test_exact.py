"""Exactness contract: summary counts and predictions.csv are byte-identical
for --workers 1, 2, 3 and batch sizes 1, 7, 64 on a dataset of prime size
(211 Fashion-MNIST JPEGs), every sample counted once.

Why 211 and not 997: the property is about how samples are cut into
batches and spread over ranks, not about how many there are. 211 is prime,
so no batch size or worker count divides it: batch 7 ends with a batch of
one (211 = 30 x 7 + 1), batch 64 with one of 19 (3 x 64 + 19, four batches,
for 3 workers that all join before the first: ddpipe eval waits for its
--workers, so the summary's workers is the asked number however loaded the
machine); batch 1 is 211 one-sample batches.
Every class occurs. The 997-image run spent 3 x 45 s of its 2 minutes in
the batch-1 runs alone (per-batch cost, not per sample)."""
import os
from ddp_it import *

N = 211
data = jpeg_folder(N)
wd = workdir("exact")
ref = None
for workers in (1, 2, 3):
    for batch in (1, 7, 64):
        out = os.path.join(wd, "w%d-b%d" % (workers, batch))
        run_eval(data, out, workers, batch, extra=["--predictions", "topk"])
        c = counts(out)
        s = summary(out)
        check(s["samples"] == N and s["failed"] == 0 and s["planned"] == N,
              "%s: samples %s failed %s planned %s, want %d/0/%d" % (
                  out, s["samples"], s["failed"], s["planned"], N, N))
        check(s["workers"] == workers, "%s: workers %s, want %d" % (out, s["workers"], workers))
        # ddpipe eval's --start-workers: the first gpud waited for the rest
        held = "1 of --start-workers %d gpuds joined" % workers
        check(workers == 1 or held in read(os.path.join(out, "logs", "reducerd.log")),
              "%s: reducerd did not hold the first gpud for the other %d" % (out, workers - 1))
        preds = read(os.path.join(out, "predictions.csv"))
        rows = preds.strip().split("\n")
        check(len(rows) == N + 1, "predictions.csv has %d rows, want %d + header" % (len(rows), N))
        ids = [int(r.split(",")[0]) for r in rows[1:]]
        check(ids == list(range(N)), "predictions.csv is not one row per index in order")
        report = read(os.path.join(out, "classification_report.txt"))
        if ref is None:
            ref = (c, preds, report, out)
            continue
        for k in COUNT_KEYS:
            check(c[k] == ref[0][k], "%s differs: %s=%r vs %s=%r" % (k, out, c[k], ref[3], ref[0][k]))
        check(preds == ref[1], "predictions.csv of %s differs from %s" % (out, ref[3]))
        check(report == ref[2], "classification_report.txt of %s differs from %s" % (out, ref[3]))
        assert_no_leftovers(out)
print("1 passed, 0 failed")
