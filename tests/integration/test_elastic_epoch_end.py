"""A rank lost at an epoch's end, while the survivors stand at different
places of it (docs/ELASTIC.md "Edges"): test_elastic.py's job (3 ranks, 4
steps an epoch, --sync-bn), in which

  - rank 2 leaves reducerd's EPOCH(0) unhandled until a new membership
    generation (--fault-hold-epoch 2:0: a rank slow to hear the epoch's
    decision, the order a loaded machine gave once): it has broadcast the
    BatchNorm buffers of END(0, TRAIN) and waits;
  - rank 1 handled EPOCH(0) and entered step 4, epoch 1's first;
  - rank 0 kills itself before step 4 (--fault 0:4).

Generation 1 redoes step 4 with the two. Both must first broadcast the
BatchNorm buffers again (the new rank 0's to all), each from where it
stands: rank 2 at once, rank 1 before the redone step, whose gradient sum
it was in. Until this test, only a rank that had not yet heard EPOCH(0)
broadcast again: rank 2 sent BatchNorm buffers while rank 1 sent its
step's sums, each dropped the other's frames, and the job lost a second
rank. Now: exit 0, one rank lost, and the weights of the uninterrupted
3-rank run within 1e-5 (that job's bound for any number of ranks).

Every wait is on an event and bounded: the hold ends with a MEMBERS, not
with time."""
import os
from ddp_it import *
from ddp_elastic import FLAGS as flags, SPE, data, same_weights
from ddp_elastic import log_has, check_lost

train, val = data()
wd = workdir("elastic_epoch_end")

base = os.path.join(wd, "straight")
run_train(train, base, 3, flags, val=val)
assert_no_leftovers(base)

out = os.path.join(wd, "held")
run_train(train, out, 3, flags + ["--fault", "0:%d" % SPE, "--fault-hold-epoch", "2:0",
                                  "--verbose"], val=val)
assert_no_leftovers(out)
check(log_has(out, 2, "test hook: EPOCH(0) held"), "rank 2 never held EPOCH(0)")
check(log_has(out, 1, "membership generation 1") and log_has(out, 2, "membership generation 1"),
      "the survivors never formed generation 1")
check_lost(out, "held", [0], 2)
same_weights(base, out, "held")
print("1 passed, 0 failed")
