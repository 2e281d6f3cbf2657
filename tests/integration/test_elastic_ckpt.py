"""Bad cases of elastic training (issue 13 item 5). A rank that dies inside a checkpoint write (docs/ELASTIC.md "Edges",
issue 13 item 5): the job of test_elastic.py with 2 ranks; rank 0, the
checkpoint writer, SIGKILLs itself in its first checkpoint write (end of
epoch 0) after the temporary file is written and before the rename
(--fault-in-checkpoint 0). The survivor re-forms as rank 0, trains on and
writes the checkpoints: exit 0, weights equal an uninterrupted run's within
1e-5, the loss counted, and checkpoint.safetensors a whole file of the last
step (never the dead rank's half-written one, whose temporary file the
survivor's commit removes). Then two of three ranks die
at once (--fault 1:5,2:5): rank 0 finishes alone with the same weights.
Waits are on exits only."""
import glob
import os
from ddp_it import *
from ddp_elastic import FLAGS as flags, EPOCHS, SPE, data, same_weights

train, val = data()
wd = workdir("elastic_ckpt")

base = os.path.join(wd, "straight")
run_train(train, base, 2, flags, val=val)

out = os.path.join(wd, "ckptdeath")
run_train(train, out, 2, flags + ["--fault-in-checkpoint", "0"], val=val)
assert_no_leftovers(out)
log0 = read(os.path.join(out, "logs", "gpud.0.log"))
check("dying inside this checkpoint write" in log0,
      "rank 0 did not die in its checkpoint write:\n%s" % log0[-2000:])
same_weights(base, out, "ckptdeath")
t = summary(out).get("training") or {}
check(t.get("ranks_lost") == 1 and t.get("world_size") == 1,
      "ckptdeath: summary.json's training %r, want ranks_lost 1, world_size 1" % t)
tensors, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
check(meta.get("ckpt.step") == str(SPE * EPOCHS) and meta.get("ckpt.epoch") == str(EPOCHS),
      "ckptdeath: checkpoint %s, want the final one (step %d, epoch %d)" % (meta, SPE * EPOCHS, EPOCHS))
left = glob.glob(os.path.join(out, "checkpoint.safetensors.tmp*"))
check(not left, "ckptdeath: the dead writer's temporary file is still there after the survivor's "
      "checkpoints: %s" % left)

# two of three ranks die at once, before the same step: the last one finishes
out = os.path.join(wd, "twoatonce")
run_train(train, out, 3, flags + ["--fault", "1:%d,2:%d" % (SPE + 1, SPE + 1)], val=val)
assert_no_leftovers(out)
same_weights(base, out, "twoatonce")
t = summary(out).get("training") or {}
check(t.get("ranks_lost") == 2 and t.get("world_size") == 1,
      "twoatonce: summary.json's training %r, want ranks_lost 2, world_size 1" % t)
print("twoatonce: ranks 1 and 2 died before step %d; rank 0 finished alone" % (SPE + 1), flush=True)
print("ckptdeath: rank 0 died mid-write; the survivor's checkpoint is whole and its commit "
      "removed the dead writer's temporary file")
print("1 passed, 0 failed")
