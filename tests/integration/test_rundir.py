"""Run directories are honest and safe (issue 11, item 5).

ipc folder: with a very long --out the sockets go to a fresh mkdtemp folder
under $XDG_RUNTIME_DIR (or $TMPDIR, or /tmp), never to the old predictable
/tmp/ddpipe-PID: that path and the old OUT/.ipc, pre-made as symlinks to a
victim folder, are not touched and the victim's file survives; nothing is
left behind in the folder the job used. The PID is made predictable by
running ddpipe as PID 1 of a new PID namespace (root or user namespaces;
skipped with a reason otherwise).

Stale outputs: a rerun into an --out holding a previous run's outputs is
refused without --overwrite (old files untouched, byte for byte); with
--overwrite and a broken setup it fails and no summary.json or
predictions.csv is left looking current; a good --overwrite rerun writes
fresh files. Every file a real eval and train write is one cli/outdir.c
knows (so --overwrite clears it)."""
import os
import shutil
import subprocess
from ddp_it import *

wd = workdir("rundir")
data = "idx:%s/t10k" % FMNIST
LIMIT = ["--limit", "300", "--predictions", "topk"]
victim = os.path.join(wd, "victim")
os.makedirs(victim)
precious = os.path.join(victim, "precious.txt")
with open(precious, "w") as f:
    f.write("not yours to delete\n")


def victim_ok(what):
    check(os.path.exists(precious) and read(precious) == "not yours to delete\n",
          "%s: the victim's file was removed or changed" % what)


def ipc_folder(out, want_under):
    """The private socket folder the job used (from reducerd's log): under
    want_under, a mkdtemp name, and gone after the job."""
    import re
    m = re.search(r"listening on ipc://(/\S+)/reducer", read(os.path.join(out, "logs", "reducerd.log")))
    check(m, "%s: reducerd did not log its ipc endpoint" % out)
    d = m.group(1)
    check(os.path.dirname(d) == want_under and re.fullmatch(r"(ddpipe|\.ipc)-\w{6}", os.path.basename(d)),
          "ipc folder %s, want a mkdtemp folder in %s" % (d, want_under))
    check(not os.path.lexists(d), "the ipc folder %s was left behind" % d)
    return d


def long_out(tag):
    """An --out path far over the 107-byte socket path limit."""
    d = os.path.join(wd, "out-" + tag, *(["a-rather-long-directory-name-%d" % i for i in range(5)]), "run")
    check(len(d) > 150, "long path is %d bytes" % len(d))
    return d


# ---- ipc folder: long --out, XDG_RUNTIME_DIR, a symlinked old path ------
xdg = os.path.join(wd, "xdg")
os.makedirs(xdg, mode=0o700)
out = long_out("xdg")
env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
cmd = eval_cmd(data, out, 2, 32, LIMIT, overwrite=False)
p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
check(p.returncode == 0, "long --out: exit %d\n%s" % (p.returncode, p.stderr))
check(summary(out)["samples"] == 300, "long --out: %s" % summary(out))
check(os.listdir(xdg) == [], "stray entries left in XDG_RUNTIME_DIR: %s" % os.listdir(xdg))
print("long --out ran with its sockets in %s" % ipc_folder(out, xdg), flush=True)
assert_no_leftovers(out)

# the same without XDG_RUNTIME_DIR: TMPDIR
tmpd = os.path.join(wd, "tmpdir")
os.makedirs(tmpd)
out = long_out("tmpdir")
env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
env["TMPDIR"] = tmpd
p = subprocess.run(eval_cmd(data, out, 1, 64, LIMIT, overwrite=False), env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
check(p.returncode == 0 and summary(out)["samples"] == 300, "TMPDIR: exit %d\n%s" % (p.returncode, p.stderr))
check(os.listdir(tmpd) == [], "stray entries left in TMPDIR: %s" % os.listdir(tmpd))
ipc_folder(out, tmpd)
assert_no_leftovers(out)

# ddpipe as PID 1 in a new PID namespace: the old code's /tmp/ddpipe-1 is a
# symlink to the victim (as a local user would plant it), plus the old
# in-run-directory name OUT/.ipc for a short --out
unshare = shutil.which("unshare")
ns = []
if unshare:
    # --mount-proc: a /proc of the new PID namespace (LeakSanitizer reads
    # /proc/PID/task; the host's /proc would not match the PIDs)
    ns = [unshare, "--pid", "--fork", "--kill-child", "--mount-proc", "--"]
    if os.geteuid() != 0:
        ns[1:1] = ["--user", "--map-root-user"]
    if subprocess.run(ns + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        ns = []
if not ns:
    print("SKIP the PID-namespace part: cannot run unshare --pid here (not root, no user "
          "namespaces)", flush=True)
else:
    planted = []
    for pid in range(1, 5):
        link = "/tmp/ddpipe-%d" % pid
        if not os.path.lexists(link):
            os.symlink(victim, link)
            planted.append(link)
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "TMPDIR")}
        out = long_out("pid1")
        p = subprocess.run(ns + eval_cmd(data, out, 2, 32, LIMIT, overwrite=False), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        check(p.returncode == 0 and summary(out)["samples"] == 300,
              "PID 1, long --out: exit %d\n%s" % (p.returncode, p.stderr))
        victim_ok("PID 1, long --out")
        ipc_folder(out, "/tmp")
        short = os.path.join(wd, "s")
        os.makedirs(short)
        os.symlink(victim, os.path.join(short, ".ipc"))
        p = subprocess.run(ns + eval_cmd(data, short, 1, 64, LIMIT, overwrite=False), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        check(p.returncode == 0 and summary(short)["samples"] == 300,
              "short --out with .ipc planted: exit %d\n%s" % (p.returncode, p.stderr))
        victim_ok("short --out with OUT/.ipc planted")
        ipc_folder(short, short)
        left = [e for e in os.listdir(short) if e.startswith(".ipc-")]
        check(left == [], "ipc folders left in the run directory: %s" % left)
        for link in planted:
            check(os.path.islink(link) and os.readlink(link) == victim, "%s was changed" % link)
    finally:
        for link in planted:
            os.unlink(link)
    print("planted /tmp/ddpipe-PID and OUT/.ipc symlinks: untouched, victim intact", flush=True)
victim_ok("after every run")

# --tap puts the tap where asked: the CLI's own progress lines come from it
tap = "ipc://%s/mytap" % wd
cmd = [a for a in eval_cmd(data, os.path.join(wd, "tap"), 1, 64, LIMIT + ["--tap", tap]) if a != "--quiet"]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
check(p.returncode == 0 and "300/300" in p.stderr,
      "--tap %s: exit %d, no final progress line from the tap:\n%s" % (tap, p.returncode, p.stderr))
print("--tap: progress came through %s" % tap, flush=True)

# ---- stale outputs ---------------------------------------------------------
out = os.path.join(wd, "stale")
run_eval(data, out, 1, 64, LIMIT, overwrite=False)
first = summary(out)
before = {f: read(os.path.join(out, f), "rb") for f in ("summary.json", "predictions.csv",
                                                         "classification_report.txt", "metrics.csv")}
broken = ["--model", "wideresnet", "--weights", DEMO_WEIGHTS, "--channels", "16,32,64,64"]

p = run_eval(data, out, 1, 64, LIMIT, model_args=broken, expect_rc=None, overwrite=False)
check(p.returncode != 0 and "--overwrite" in p.stderr and "previous run" in p.stderr,
      "rerun without --overwrite: exit %d, stderr:\n%s" % (p.returncode, p.stderr))
for f, b in before.items():
    check(read(os.path.join(out, f), "rb") == b, "the refused rerun changed %s" % f)
print("rerun without --overwrite refused, old files untouched", flush=True)

p = run_eval(data, out, 1, 64, LIMIT, model_args=broken, expect_rc=None, overwrite=True)
check(p.returncode != 0, "broken --overwrite rerun: exit 0")
stale = [f for f in ("summary.json", "predictions.csv", "classification_report.txt")
         if os.path.exists(os.path.join(out, f))]
check(not stale, "a failed --overwrite rerun left the old %s looking current" % stale)
print("failed --overwrite rerun: no summary.json or predictions.csv left", flush=True)
assert_no_leftovers(out)

run_eval(data, out, 2, 32, LIMIT, overwrite=True)
check({k: summary(out)[k] for k in COUNT_KEYS} == {k: first[k] for k in COUNT_KEYS},
      "the fresh rerun's counts differ: %s vs %s" % (summary(out), first))
check(read(os.path.join(out, "predictions.csv"), "rb") == before["predictions.csv"],
      "the fresh rerun's predictions differ")


# ---- every file a run writes is one --overwrite knows -----------------------
train = idx_subset("train", 0, 64)
tout = os.path.join(wd, "train")
targs = ["--batch-size", "16", "--epochs", "1"]
run_train(train, tout, 2, targs, val=idx_subset("t10k", 0, 32), overwrite=False)
p = run_train(train, tout, 2, targs, val=idx_subset("t10k", 0, 32), overwrite=False, expect_rc=None)
check(p.returncode != 0 and "--overwrite" in p.stderr, "train rerun not refused:\n%s" % p.stderr)
# --overwrite on a copy of each run directory, then a job that fails at
# once: no entry of the old run may survive (same inode) but logs/ itself
for d in (out, tout):
    probe = d + "-probe"
    shutil.copytree(d, probe, symlinks=True)
    old = {n: os.lstat(os.path.join(probe, n)).st_ino for n in os.listdir(probe)}
    subprocess.run(eval_cmd(data, probe, 1, 64, LIMIT, model_args=broken, overwrite=True),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    kept = sorted(n for n, ino in old.items() if n != "logs" and os.path.lexists(os.path.join(probe, n))
                  and os.lstat(os.path.join(probe, n)).st_ino == ino)
    check(kept == [], "%s: --overwrite does not know %s" % (d, kept))
    print("%s: --overwrite cleared all %d entries" % (os.path.basename(d), len(old)), flush=True)
assert_no_leftovers(wd)
print("1 passed, 0 failed")
