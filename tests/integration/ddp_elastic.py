"""What the elastic training tests share (test_elastic*.py): the small job
whose weights agree within 1e-5 for any number of ranks, finding a rank's
gpud process, waiting on events, ending a job, comparing weights."""
import csv
import os
import subprocess
import time
import ddp_it
from ddp_it import check, fail, idx_subset, read, summary, weights_diff

N, G, EPOCHS = 232, 64, 2
SPE = (N + G - 1) // G   # 4 steps an epoch
FLAGS = ["--global-batch-size", str(G), "--epochs", str(EPOCHS), "--seed", "3", "--lr", "0.001",
         "--momentum", "0", "--sync-bn", "--worker-timeout", "2", "--ring-timeout", "5"]


def data():
    """(train, val): 232 Fashion-MNIST training samples, 64 test ones."""
    return idx_subset("train", 0, N), idx_subset("t10k", 0, 64)


def gpud_of(out, rank):
    """(pid, argv) of the gpud started as rank `rank` (its --rank) of the job in out."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.path.basename(os.readlink("/proc/%s/exe" % pid).replace(" (deleted)", ""))
            args = read("/proc/%s/cmdline" % pid, "rb").decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if exe == "gpud" and any(out in a for a in args) and "--rank" in args and \
                args[args.index("--rank") + 1] == str(rank):
            return int(pid), args
    return None, None


def wait_for(what, cond, proc, timeout=180):
    """Polls cond() until it holds; fails when the job ends first or after timeout s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            fail("the job ended (exit %d) before %s\nstderr:\n%s" % (proc.returncode, what, err))
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    fail("no %s within %d s" % (what, timeout))


def file_has(path, text):
    try:
        return text in read(path, "rb").decode(errors="replace")
    except OSError:
        return False


def finish(proc, out, what, timeout=300):
    """Waits for the job; fails with its output and logs unless it exited 0."""
    try:
        so, se = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        so, se = proc.communicate()
        fail("%s: the job did not end within %d s\n%s" % (what, timeout, se))
    if proc.returncode != 0:
        fail("%s: exit %d\nstdout:\n%s\nstderr:\n%s\n%s" % (what, proc.returncode, so, se,
                                                          ddp_it._logs(out)))
    return se


def same_weights(base, out, what):
    d, name = weights_diff(os.path.join(base, "model.safetensors"),
                           os.path.join(out, "model.safetensors"))
    print("%s vs uninterrupted: largest weight difference %.3g (%s)" % (what, d, name), flush=True)
    check(d <= 1e-5, "%s: %s differs from the uninterrupted run's by %.3g > 1e-5" % (what, name, d))


def joiner_cmd(args, name, change=None):
    """A live rank's gpud command line as a joiner's: no --rank, its own
    --name, --reducer EP as --join EP, its own ring endpoint beside the
    others'; change: {flag: value} to alter."""
    out, i = [], 0
    change = dict(change or {})
    while i < len(args):
        a = args[i]
        if a in ("--rank", "--name"):
            i += 2
            continue
        if a == "--reducer":
            out += ["--join", args[i + 1]]
            i += 2
            continue
        if a == "--ring-bind":
            out += [a, os.path.join(os.path.dirname(args[i + 1]), "ring-" + name)]
            i += 2
            continue
        if a in change:
            out += [a, change.pop(a)]
            i += 2
            continue
        out.append(a)
        i += 1
    return out + ["--name", name, "--join-timeout", "300"]


def log_has(out, rank, text):
    return file_has(os.path.join(out, "logs", "gpud.%d.log" % rank), text)


def logged_after(out, rank, mark, *words):
    """A line of rank's log after the first `mark` line holds every word."""
    try:
        text = read(os.path.join(out, "logs", "gpud.%d.log" % rank), "rb").decode(errors="replace")
    except OSError:
        return False
    at = text.find(mark)
    return at >= 0 and any(all(w in line for w in words) for line in text[at:].splitlines()[1:])


def membership_rows(out):
    with open(os.path.join(out, "membership.csv")) as f:
        return list(csv.DictReader(f))


def check_lost(out, what, lost, world):
    """membership.csv has a row losing each rank of `lost` (old ranks), the
    summary counts them and the final world size."""
    rows = membership_rows(out)
    # ranks are renumbered at each change: follow the names of the gang's ranks
    names = {row["rank"]: row["name"] for row in rows if row.get("gen") == "0"}
    for r in lost:
        check(any(row.get("change") == "lost" and row.get("name") == names.get(str(r))
                  for row in rows),
              "%s: membership.csv has no row losing rank %d (%s): %s" % (
                  what, r, names.get(str(r)), rows))
    t = summary(out).get("training") or {}
    check(t.get("ranks_lost") == len(lost) and t.get("world_size") == world,
          "%s: summary.json's training ranks_lost %r world_size %r, want %d and %d" % (
              what, t.get("ranks_lost"), t.get("world_size"), len(lost), world))
