"""Why the gpud workers failed, on the console in the CLI's terms (issue "A
newcomer's front door"): the error each worker logged, said once however
many workers gave it, with the gpud flags it names replaced by the ddpipe
flags that set them (gpud's --backend is ddpipe's --device).

1. `ddpipe eval --device cuda --workers 2` where gpud has no GPU: the
   build's gpud (no CUDA device here; skipped where one is visible) and,
   when the build has the cuda backend, the package's CPU-only gpud
   (cpu-bin/gpud: "cuda was not found at build time"). Exit non-zero, the
   reason once, naming --device cpu and never --backend.
2. Weights of another model (--model resnet18 with the WideResNet's):
   every worker fails alike; the reason once.
3. Different errors: rank 2 of 3 is given a missing weights file (a
   wrapper gpud in a DDPIPE_BIN folder): each distinct reason once, with
   the ranks that gave it.
4. One worker of two fails (a missing weights file) and the other does the
   job: exit 0, its reason once.
No process is left behind; nothing waits on time."""
import os
import re
import stat
import subprocess
from ddp_it import *

data = idx_subset("t10k", 0, 64)
wd = workdir("worker-errors")
ALIASES = {"--backend": "--device"}   # cli/children.c, gpud's flags ddpipe names otherwise


def logged_error(log):
    """The message of the last ERROR line of a gpud log, in ddpipe's terms."""
    msgs = [m.group(1) for m in re.finditer(r"^\S+Z \S+ ERROR (.*)$", read(log), re.M)]
    check(msgs, "%s has no ERROR line:\n%s" % (log, read(log)))
    msg = msgs[-1]
    for daemon, cli in ALIASES.items():
        msg = re.sub(r"(?<![\w-])%s(?![\w-])" % re.escape(daemon), cli, msg)
    return msg


def run(what, out, workers, extra, model_args=WRN_ARGS, bindir=None, expect_fail=True):
    cmd = eval_cmd(data, out, workers, 32, extra, model_args)
    env = dict(os.environ, DDPIPE_BIN=bindir) if bindir else None
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120, env=env)
    print("%s: exit %d\n%s" % (what, p.returncode, p.stderr), flush=True)
    if expect_fail:
        check(p.returncode not in (0, 130), "%s: exit %d, want a failure" % (what, p.returncode))
    assert_no_leftovers(out)
    return p


def said_once(what, p, reason):
    n = p.stderr.count(reason)
    check(n == 1, "%s: the reason %r is on the console %d times, want once:\n%s" % (
        what, reason, n, p.stderr))


def check_no_gpu(what, p, out, workers):
    errs = [logged_error(os.path.join(out, "logs", "gpud.%d.log" % r)) for r in range(workers)]
    check(len(set(errs)) == 1, "%s: the ranks logged different errors: %r" % (what, errs))
    said_once(what, p, errs[0])
    check("every gpud worker failed: " in p.stderr, "%s: no 'every gpud worker failed: "
          "REASON' line:\n%s" % (what, p.stderr))
    check("--device cpu" in p.stderr, "%s: the console does not name --device cpu:\n%s" % (
        what, p.stderr))
    check("--backend" not in p.stderr, "%s: the console names gpud's --backend:\n%s" % (
        what, p.stderr))


def bin_folder(name, gpud_text=None, gpud_path=None):
    """A DDPIPE_BIN folder: the build's daemons, gpud a wrapper script or another binary."""
    d = os.path.join(wd, name)
    os.makedirs(d)
    for prog in ("reducerd", "reporterd", "loaderd"):
        os.symlink(os.path.join(os.path.realpath(BIN), prog), os.path.join(d, prog))
    gpud = os.path.join(d, "gpud")
    if gpud_path:
        os.symlink(gpud_path, gpud)
    else:
        with open(gpud, "w") as f:
            f.write(gpud_text)
        os.chmod(gpud, os.stat(gpud).st_mode | stat.S_IXUSR)
    return d


def wrapper(rank, weights):
    """gpud, but rank `rank` is given `weights` (the last --weights counts)."""
    return ('#!/bin/sh\n'
            'case " $* " in *" --rank %d "*) exec "%s" "$@" --weights "%s" ;; esac\n'
            'exec "%s" "$@"\n' % (rank, os.path.join(os.path.realpath(BIN), "gpud"), weights,
                                  os.path.join(os.path.realpath(BIN), "gpud")))


passed = 0
# 1. no GPU: the build's gpud, then the CPU-only one when the build has both
gpuds = [("the build's gpud", None)]
cpu_gpud = os.path.realpath(os.path.join(BIN, "..", "cpu-bin", "gpud"))
if os.path.exists(cpu_gpud):
    gpuds.append(("the CPU-only gpud", bin_folder("cpu-bin", gpud_path=cpu_gpud)))
for i, (what, bindir) in enumerate(gpuds):
    out = os.path.join(wd, "cuda%d" % i)
    what = "--device cuda, %s" % what
    p = run(what, out, 2, ["--device", "cuda"], bindir=bindir, expect_fail=False)
    if p.returncode == 0:
        print("%s: a CUDA device is visible here: skipped" % what, flush=True)
        continue
    check(p.returncode != 130, "%s: exit 130" % what)
    check_no_gpu(what, p, out, 2)
    passed += 1

# 2. weights of another model: every worker fails the same way
out = os.path.join(wd, "mismatch")
p = run("resnet18 with the WideResNet's weights", out, 2, [],
        model_args=["--model", "resnet18", "--weights", DEMO_WEIGHTS])
err = logged_error(os.path.join(out, "logs", "gpud.0.log"))
check("conv1.weight" in err, "mismatch: gpud.0's error does not name conv1.weight: %r" % err)
said_once("mismatch", p, err)
check("every gpud worker failed: " + err in p.stderr, "mismatch: no 'every gpud worker "
      "failed: REASON' line:\n%s" % p.stderr)
passed += 1

# 3. two different errors over three ranks: each once, with its ranks
missing = os.path.join(wd, "no-such-weights.safetensors")
out = os.path.join(wd, "mixed")
p = run("ranks 0, 1: another model's weights; rank 2: no weights file", out, 3, [],
        model_args=["--model", "resnet18", "--weights", DEMO_WEIGHTS],
        bindir=bin_folder("mixed-bin", wrapper(2, missing)))
errs = [logged_error(os.path.join(out, "logs", "gpud.%d.log" % r)) for r in range(3)]
check(errs[0] == errs[1] != errs[2] and "cannot open" in errs[2],
      "mixed: want ranks 0 and 1 alike and rank 2 on the missing file: %r" % errs)
for e in (errs[0], errs[2]):
    said_once("mixed", p, e)
check("every gpud worker failed, with 2 different errors:" in p.stderr,
      "mixed: no head line for 2 different errors:\n%s" % p.stderr)
check(re.search(r"ranks 0, 1: .*conv1\.weight", p.stderr) and
      re.search(r"rank 2: .*cannot open", p.stderr),
      "mixed: the errors do not name their ranks:\n%s" % p.stderr)
passed += 1

# 4. one of two workers fails, the other does the job: exit 0, the reason once
out = os.path.join(wd, "one")
p = run("rank 1 without its weights file", out, 2, [], expect_fail=False,
        bindir=bin_folder("one-bin", wrapper(1, missing)))
check(p.returncode == 0, "one: exit %d, want 0 (rank 0 does the job)" % p.returncode)
check(summary(out)["samples"] == 64, "one: summary.json has %r samples, want 64" %
      summary(out)["samples"])
said_once("one", p, logged_error(os.path.join(out, "logs", "gpud.1.log")))
passed += 1
print("%d passed, 0 failed" % passed)
