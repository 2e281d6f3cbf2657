"""A full disk during training (issue 28 item 6): the whole `ddpipe train`
runs in a user + mount namespace with --out on a tmpfs sized so that the
first checkpoint fits and the second (written beside the first, then
renamed over it) does not. The failed write stops the job at once: ddpipe
exits non-zero naming the file, the error (ENOSPC) and the last good
checkpoint; summary.json says so (training.checkpoint_failures,
checkpoint_error, last_good_checkpoint); no epoch after the failure is
trained; the checkpoint file is the last good one. Then a one-epoch run on
a tmpfs where the final checkpoint fits but model.safetensors does not: the
job fails naming the weights file, summary.json says so (before, the job
ended 'model.safetensors is missing' with a normal summary). Without unprivileged
user namespaces or tmpfs mounts in them (some containers) it says why and
exits 77."""
import os
import shutil
import subprocess
from ddp_it import *
from ddp_it import _logs

wd = workdir("train-disk-full")
mnt = os.path.join(wd, "tmpfs")
os.makedirs(mnt)
probe = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k none "$1"', "sh", mnt],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if probe.returncode != 0:
    print("SKIP: cannot mount a tmpfs in a user namespace (unshare -rm): %s" % probe.stdout.strip())
    sys.exit(77)

train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
flags = ["--batch-size", "48", "--seed", "4", "--lr", "0.05", "--momentum", "0.9"]

# the checkpoint's size, from a one-epoch run on the real disk
ref = os.path.join(wd, "ref")
run_train(train, ref, 1, flags + ["--epochs", "1"], val=val)
size = os.path.getsize(os.path.join(ref, "checkpoint.safetensors"))
check(size >= 64 * 1024, "checkpoint of %d bytes: too small for this test's margins" % size)
# room for one checkpoint, a quarter more and 64 KiB (logs, CSVs, summary):
# the second checkpoint's temporary file (another `size`) cannot fit
tmpfs_kib = (size + size // 4) // 1024 + 64


def train_on_tmpfs(name, kib, epochs):
    """ddpipe train --epochs epochs with --out on a fresh kib KiB tmpfs in
    a user + mount namespace; the run directory is copied out to
    wd/kept-NAME before the namespace ends. (process, out, kept, the
    checkpoint's path, the stderr and logs for a failure message)."""
    out = os.path.join(mnt, name)
    kept = os.path.join(wd, "kept-" + name)
    cmd = train_cmd(train, out, 1, flags + ["--epochs", str(epochs)], val=val)
    script = ('mount -t tmpfs -o size=%dk none "$1" || exit 90; shift; "$@"; rc=$?; '
              'cp -a "%s" "%s"; exit $rc' % (kib, out, kept))
    p = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", mnt] + cmd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    print("ran ddpipe train --epochs %d on a %d KiB tmpfs (checkpoint %d bytes): exit %d"
          % (epochs, kib, size, p.returncode), flush=True)
    check(p.returncode != 90, "mounting the tmpfs failed:\n%s" % p.stderr)
    why = "stderr:\n%s\n%s" % (p.stderr, _logs(kept) if os.path.isdir(kept) else "")
    return p, out, kept, os.path.join(out, "checkpoint.safetensors"), why


p, out, kept, ckpt, why = train_on_tmpfs("run", tmpfs_kib, 3)
assert_no_leftovers(out)
check(p.returncode not in (0, 130), "a failed checkpoint write: exit %d, want a failure; %s"
      % (p.returncode, why))
check(ckpt in p.stderr and "No space left on device" in p.stderr,
      "the console does not name the checkpoint and the error; %s" % why)
check("last good checkpoint is %s (epoch 1, step 4)" % ckpt in p.stderr,
      "the console does not name the last good checkpoint (epoch 1, step 4); %s" % why)

s = summary(kept)
t = s.get("training") or {}
check(t.get("checkpoint_failures") == 1 and t.get("last_good_checkpoint") == ckpt and
      "No space left on device" in (t.get("checkpoint_error") or ""),
      "summary.json's training object: %s" % json.dumps(t, indent=1))
_, meta = safetensors_read(os.path.join(kept, "checkpoint.safetensors"))
check(meta.get("ckpt.epoch") == "1" and meta.get("ckpt.step") == "4",
      "the checkpoint file is not the last good one (epoch 1, step 4): %s" % meta)
epochs = sorted(int(r["epoch"]) for r in metrics_rows(kept, "train"))
check(epochs == [0, 1], "the job went on after the failed checkpoint of epoch 2: train rows %s" % epochs)
shutil.rmtree(kept, ignore_errors=True)
print("a failed checkpoint write in epoch 2: stopped, named, in summary.json", flush=True)

# Only the final weights fail: one epoch, whose final checkpoint is the
# first write (nothing to rename over), on a tmpfs of that checkpoint, a quarter of
# the weights and 64 KiB: model.safetensors (written after the checkpoint)
# cannot fit. The job must fail saying so, not end as a success.
weights = os.path.getsize(os.path.join(ref, "model.safetensors"))
check(weights >= 128 * 1024, "model.safetensors of %d bytes: too small for this test's margins" % weights)
p, out, kept, ckpt, why = train_on_tmpfs("final", (size + weights // 4) // 1024 + 64, 1)
check(p.returncode not in (0, 130), "a failed final weights write: exit %d, want a failure; %s"
      % (p.returncode, why))
check("final weights (end of training) not written: " in p.stderr and
      os.path.join(out, "model.safetensors") in p.stderr and "No space left on device" in p.stderr
      and "last good checkpoint is %s (epoch 1, step 4)" % ckpt in p.stderr,
      "the console does not name the final weights, the error and the last good checkpoint; %s" % why)
s = summary(kept)
t = s.get("training") or {}
check(t.get("checkpoint_failures") == 1 and t.get("last_good_checkpoint") == ckpt and
      t.get("stopped") == "checkpoint-failed" and
      "model.safetensors" in (t.get("checkpoint_error") or ""),
      "summary.json's training object after the failed final weights: %s" % json.dumps(t, indent=1))
check(not os.path.exists(os.path.join(kept, "model.safetensors")), "model.safetensors exists")
_, meta = safetensors_read(os.path.join(kept, "checkpoint.safetensors"))
check(meta.get("ckpt.epoch") == "1" and meta.get("ckpt.step") == "4",
      "the final checkpoint is not whole (epoch 1, step 4): %s" % meta)
shutil.rmtree(kept, ignore_errors=True)
print("1 passed, 0 failed")
