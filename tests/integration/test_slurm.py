"""ddpipe eval|train --launcher slurm on a real one-node Slurm cluster
(issue 17 item 1), started here from Debian's slurm-wlm and munge in a
temporary directory: munged, slurmctld and slurmd (one node, "localhost",
2 CPUs), each a child of this test.

  refused: --launcher slurm outside an allocation exits 2 and says why
           (this part needs no Slurm and always runs);
  eval:    compose/slurm/ddpipe-eval.sbatch submitted with sbatch --wait,
           2 tasks, CURVE keys from ddpipe keygen: summary.json's counts
           equal a single-host `ddpipe eval --workers 2`, and the two gpuds
           were srun tasks named after their node;
  train:   `salloc -n 2 ddpipe train --launcher slurm`: counts and final
           weights, byte for byte, equal a single-host --workers 2 run;
  hung:    rank 1's gpud hangs before it joins (a node that never starts
           its worker): the job fails after --start-timeout naming rank 1
           and its node, and leaves nothing behind;
  dead:    rank 1's gpud exits at once (a node where gpud cannot start):
           srun ends the step and the job fails with srun's line naming
           the node and the task;
  killed:  rank 1's gpud is SIGKILLed after the first training step: the
           job fails, naming the node.

Skipped (exit 77, the reason printed) when not root or when slurmctld,
slurmd, munged or the Slurm clients are missing (scripts/install-deps.sh
--test installs slurm-wlm and munge). Every wait is bounded; nothing waits
for a duration, only for events (a state in sinfo, a process exit).
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from ddp_it import *

SKIP = 77
wd = workdir("slurm")
DDPIPE = os.path.join(BIN, "ddpipe")


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(SKIP)


def refused_outside_allocation():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = os.path.join(wd, "refused")
    p = subprocess.run(eval_cmd(jpeg_folder(997), out, 2, 8, ["--launcher", "slurm"]), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 2 and "SLURM_JOB_ID" in p.stderr and "sbatch" in p.stderr,
          "--launcher slurm outside an allocation: exit %d, want 2 with the reason:\n%s"
          % (p.returncode, p.stderr))
    p = subprocess.run(eval_cmd(jpeg_folder(997), out, 2, 8, ["--launcher", "pbs"]), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 2 and "local or slurm" in p.stderr, "--launcher pbs: exit %d:\n%s"
          % (p.returncode, p.stderr))
    print("refused: --launcher slurm outside an allocation (exit 2, names SLURM_JOB_ID)", flush=True)


refused_outside_allocation()

if os.geteuid() != 0:
    skip("needs root to run munged, slurmctld and slurmd")
TOOLS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "salloc", "srun", "scancel", "squeue")
missing = [t for t in TOOLS if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
if missing:
    skip("%s not installed (apt-get install slurm-wlm munge; scripts/install-deps.sh --test)"
         % ", ".join(missing))

SBIN = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
CL = os.path.join(wd, "cluster")          # munge's socket folder must be searchable: 0755
os.makedirs(CL)
os.chmod(wd, 0o755)
os.chmod(CL, 0o755)
procs = {}
ENV = dict(os.environ, SLURM_CONF=os.path.join(CL, "slurm.conf"), PATH=SBIN)
for k in list(ENV):
    if k.startswith("SLURM_") and k != "SLURM_CONF":   # this test may itself run under Slurm
        del ENV[k]
deadline = time.time() + 540            # an upper bound on the whole test, never a pace


def cl_log(name):
    return os.path.join(CL, name + ".log")


def tail(path, n=40):
    try:
        return "".join(read(path).splitlines(True)[-n:])
    except OSError:
        return "(no %s)\n" % path


def cluster_logs():
    return "".join("---- %s\n%s" % (n, tail(cl_log(n))) for n in ("munged", "slurmctld", "slurmd"))


def start(name, argv):
    log = open(cl_log(name), "w")
    procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV)


def wait_for(what, cond, timeout=60):
    end = min(deadline, time.time() + timeout)
    while time.time() < end:
        if cond():
            return
        for name, p in procs.items():
            check(p.poll() is None, "%s exited %s while waiting for %s\n%s"
                  % (name, p.returncode, what, cluster_logs()))
        time.sleep(0.1)
    fail("timed out waiting for %s\n%s" % (what, cluster_logs()))


def start_cluster():
    key = os.path.join(CL, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, stat.S_IRUSR)
    sock = os.path.join(CL, "munge.sock")
    start("munged", ["munged", "-F", "-f", "--socket=" + sock, "--key-file=" + key,
                     "--pid-file=" + os.path.join(CL, "munged.pid"),
                     "--log-file=" + cl_log("munged-file"), "--seed-file=" + os.path.join(CL, "munged.seed")])
    wait_for("munged's socket", lambda: os.path.exists(sock))
    for d in ("state", "spool"):
        os.makedirs(os.path.join(CL, d))
    conf = """ClusterName=ddptest
SlurmctldHost=localhost
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={cl}/state
SlurmdSpoolDir={cl}/spool
SlurmctldPidFile={cl}/slurmctld.pid
SlurmdPidFile={cl}/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=10 State=UP
""".format(sock=sock, cl=CL, ctld_port=free_port(), slurmd_port=free_port())
    with open(ENV["SLURM_CONF"], "w") as f:
        f.write(conf)
    start("slurmctld", ["slurmctld", "-D"])
    start("slurmd", ["slurmd", "-D"])

    def idle():
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=ENV, timeout=30)
        return p.returncode == 0 and p.stdout.strip() == "idle"
    wait_for("the node to be idle in sinfo", idle, timeout=120)
    print("cluster up: munged, slurmctld, slurmd (node localhost, 2 CPUs)", flush=True)


def stop_cluster():
    if "slurmctld" in procs and procs["slurmctld"].poll() is None:
        subprocess.run(["scancel", "--full", "--partition", "debug"], env=ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        end = time.time() + 30          # the jobs' steps end before slurmd goes
        while time.time() < end:
            q = subprocess.run(["squeue", "-h"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=ENV, timeout=30)
            if q.returncode != 0 or not q.stdout.strip():
                break
            time.sleep(0.2)
    for name in ("slurmd", "slurmctld", "munged"):
        p = procs.get(name)
        if p and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run(argv, what, timeout=300, env=None):
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env or ENV, timeout=max(1, min(timeout, deadline - time.time())))
    except subprocess.TimeoutExpired as e:
        fail("%s did not finish: %s\n%s" % (what, e, cluster_logs()))


def fake_bin(mode):
    """A DDPIPE_BIN whose gpud misbehaves on rank 1 (the srun task of
    SLURM_PROCID 1): "hang" never joins, "die" exits 1 at once, "killed"
    SIGKILLs itself before training step 1 (gpud's --fault-at-step hook:
    the gang needs it at every step, so it dies mid-run whatever the
    speed); every other rank and every other program is the real one."""
    d = os.path.join(wd, "bin-" + mode)
    os.makedirs(d)
    for prog in ("ddpipe", "reducerd", "loaderd", "reporterd"):
        os.symlink(os.path.realpath(os.path.join(BIN, prog)), os.path.join(d, prog))
    real = os.path.realpath(os.path.join(BIN, "gpud"))
    bad = {"hang": 'exec -a "ddpipe-hung-gpud-%d" sleep 600' % os.getpid(),
           "die": 'echo "gpud: cannot start on this node (test)" >&2; exit 1',
           "killed": 'exec %s "$@" --fault-at-step 1' % real}[mode]
    with open(os.path.join(d, "gpud"), "w") as f:
        f.write('#!/bin/bash\nif [ "$SLURM_PROCID" = 1 ]; then %s; fi\nexec %s "$@"\n'
                % (bad, os.path.realpath(os.path.join(BIN, "gpud"))))
    os.chmod(os.path.join(d, "gpud"), 0o755)
    return d


def no_hung_gpud():
    marker = "ddpipe-hung-gpud-%d" % os.getpid()
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in read("/proc/%s/cmdline" % pid, "rb").decode(errors="replace"):
                left.append(int(pid))
        except OSError:
            pass
    return left


def logs_of(out):
    text = ""
    for d in (os.path.join(out, "logs"),):
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                text += "---- %s\n%s" % (f, tail(os.path.join(d, f), 30))
    return text


TRAIN_FLAGS = ["--global-batch-size", "64", "--epochs", "1", "--seed", "5", "--lr", "0.05",
               "--momentum", "0.9", "--worker-timeout", "20", "--quiet"]


def main():
    data = jpeg_folder(997)
    tdata = idx_subset("train", 0, 256)
    keys = os.path.join(wd, "keys")
    p = subprocess.run([DDPIPE, "keygen", keys], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(p.returncode == 0, "ddpipe keygen: " + p.stdout)
    # the single-host references
    ref = os.path.join(wd, "eval-local")
    run_eval(data, ref, 2, 16)
    tref = os.path.join(wd, "train-local")
    run_train(tdata, tref, 2, TRAIN_FLAGS)

    start_cluster()

    # eval: the documented sbatch script, 2 tasks, CURVE
    out = os.path.join(wd, "eval-slurm")
    env = dict(ENV, DDPIPE=DDPIPE, DATA=data, MODEL="wideresnet", WEIGHTS=DEMO_WEIGHTS, OUT=out,
               CURVE_DIR=keys, DDPIPE_BIN=BIN,
               DDPIPE_ARGS="--channels 16,32,64,128 --batch-size 16 --quiet --overwrite")
    script = os.path.join(SRC, "compose", "slurm", "ddpipe-eval.sbatch")
    # --time: the script asks for an hour, this partition allows 10 minutes
    p = run(["sbatch", "--wait", "--time=5", "--chdir", wd, "--output", os.path.join(wd, "eval-slurm-%j.out"),
             script], "sbatch ddpipe-eval.sbatch", env=env)
    outs = [f for f in os.listdir(wd) if f.startswith("eval-slurm-") and f.endswith(".out")]
    job_out = "".join(read(os.path.join(wd, f)) for f in outs)
    check(p.returncode == 0, "sbatch --wait ddpipe-eval.sbatch: exit %d\n%s\n%s\njob output:\n%s\n%s\n%s"
          % (p.returncode, p.stdout, p.stderr, job_out, logs_of(out), cluster_logs()))
    check(counts(out) == counts(ref), "eval on Slurm: %r\nsingle host: %r" % (counts(out), counts(ref)))
    rlog = read(os.path.join(out, "logs", "reducerd.log"))
    for r in (0, 1):
        check("gpud.%d@localhost joined" % r in rlog, "reducerd's log has no gpud.%d@localhost:\n%s"
              % (r, rlog[-3000:]))
    step = read(os.path.join(out, "logs", "gpud-srun.log"))
    check("srun task 1 on node localhost" in step, "the step's log:\n" + step[-2000:])
    check("ddpipe eval: " + out in job_out, "the job's output has no summary:\n" + job_out)
    check("never joined" not in job_out and "did not join" not in job_out,
          "a rank is reported missing:\n" + job_out)
    print("eval: sbatch ddpipe-eval.sbatch, 2 srun tasks, CURVE: %d samples, top-1 %s, counts equal "
          "the single-host run's" % (summary(out)["samples"], summary(out)["top1"]), flush=True)
    assert_no_leftovers(out)

    # train: salloc, 2 ranks over a tcp ring
    tout = os.path.join(wd, "train-slurm")
    cmd = ["salloc", "--ntasks=2", "--time=5", DDPIPE] + train_cmd(tdata, tout, 2, TRAIN_FLAGS)[1:] + [
        "--launcher", "slurm"]
    p = run(cmd, "salloc ddpipe train --launcher slurm", env=dict(ENV, DDPIPE_BIN=BIN))
    check(p.returncode == 0, "%s\nexit %d\n%s\n%s\n%s" % (" ".join(cmd), p.returncode, p.stderr,
                                                          logs_of(tout), cluster_logs()))
    check(counts(tout) == counts(tref), "train on Slurm: %r\nsingle host: %r" % (counts(tout), counts(tref)))
    check(read(os.path.join(tout, "model.safetensors"), "rb") == read(os.path.join(tref, "model.safetensors"), "rb"),
          "the weights trained on Slurm differ from the single-host run's")
    step = read(os.path.join(tout, "logs", "gpud-srun.log"))
    check("ring tcp://" in step, "the ranks' rings: " + step[-2000:])
    print("train: salloc -n 2, 2 ranks: %d samples; counts and weights equal the single-host run's"
          % summary(tout)["samples"], flush=True)
    assert_no_leftovers(tout)

    # hung: rank 1 never joins; --start-timeout ends the job, naming the node
    hout = os.path.join(wd, "train-hung")
    cmd = ["salloc", "--ntasks=2", "--time=5", DDPIPE] + train_cmd(tdata, hout, 2, TRAIN_FLAGS)[1:] + [
        "--launcher", "slurm", "--start-timeout", "15"]
    p = run(cmd, "the job with a hung rank", env=dict(ENV, DDPIPE_BIN=fake_bin("hang")))
    check(p.returncode == 1 and "gpud rank 1 did not join" in p.stderr and "node localhost" in p.stderr
          and "--start-timeout" in p.stderr,
          "a hung rank: exit %d, want 1 naming rank 1 and node localhost:\n%s" % (p.returncode, p.stderr))
    check("gpud rank 0 did not" not in p.stderr, "rank 0 joined but is named:\n" + p.stderr)
    assert_no_leftovers(hout)
    end = time.time() + 30
    while no_hung_gpud() and time.time() < end:
        time.sleep(0.1)
    check(not no_hung_gpud(), "the hung task was left behind: %s" % no_hung_gpud())
    check("its srun task: node localhost\n" in p.stderr, "the node is named as is:\n" + p.stderr)
    print("hung: the console said:\n  " + "\n  ".join(p.stderr.splitlines()), flush=True)

    # dead: rank 1's gpud cannot start; srun ends the step and says where
    dout = os.path.join(wd, "train-dead")
    cmd = ["salloc", "--ntasks=2", "--time=5", DDPIPE] + train_cmd(tdata, dout, 2, TRAIN_FLAGS)[1:] + [
        "--launcher", "slurm", "--start-timeout", "300"]
    p = run(cmd, "the job with a dead rank", env=dict(ENV, DDPIPE_BIN=fake_bin("die")))
    check(p.returncode == 1 and "srun: error: localhost: task 1" in p.stderr,
          "a rank that cannot start: exit %d, want 1 with srun's line naming the node:\n%s"
          % (p.returncode, p.stderr))
    assert_no_leftovers(dout)
    print("dead: the console said:\n  " + "\n  ".join(p.stderr.splitlines()), flush=True)

    # killed: rank 1's gpud is SIGKILLed mid-run; the step ends, the node is named
    kout = os.path.join(wd, "train-killed")
    cmd = ["salloc", "--ntasks=2", "--time=5", DDPIPE] + train_cmd(tdata, kout, 2, TRAIN_FLAGS)[1:] + [
        "--launcher", "slurm"]
    p = run(cmd, "the job with a killed rank", env=dict(ENV, DDPIPE_BIN=fake_bin("killed")))
    check(p.returncode == 1 and ("localhost: task 1: Killed" in p.stderr or "gpud.1@localhost" in p.stderr),
          "a rank killed mid-run: exit %d, want 1 naming the node:\n%s" % (p.returncode, p.stderr))
    assert_no_leftovers(kout)
    print("killed: the console said:\n  " + "\n  ".join(p.stderr.splitlines()), flush=True)


try:
    main()
finally:
    stop_cluster()
assert_no_leftovers(wd)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
