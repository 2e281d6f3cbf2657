"""Shared helpers of the integration tests: real daemons, real sockets.

Run by ctest with DDPIPE_BIN (built binaries) and DDPIPE_SRC (source tree)
in the environment; only the Python standard library is needed, except the
fake-peer tests which use python3-zmq/python3-msgpack when present.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("DDPIPE_BIN") or os.path.join(os.path.dirname(__file__), "../../build/bin")
SRC = os.environ.get("DDPIPE_SRC") or os.path.join(os.path.dirname(__file__), "../..")
FMNIST = "/usr/share/datasets/fashion-mnist"
DEMO_WEIGHTS = os.path.join(SRC, "demo", "wrn-fmnist.safetensors")
WRN_ARGS = ["--model", "wideresnet", "--weights", DEMO_WEIGHTS, "--channels", "16,32,64,128"]
# Keys of summary.json that must not depend on workers, batch size or timing.
COUNT_KEYS = ["samples", "failed", "correct_top1", "correct_top5", "top1", "top5", "loss",
              "per_class", "macro_f1", "weighted_f1", "planned"]
DAEMONS = ("reducerd", "reporterd", "loaderd", "gpud")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def workdir(name):
    base = os.environ.get("DDPIPE_TEST_TMP") or tempfile.gettempdir()
    d = os.path.join(base, "ddpipe-it-%s-%d" % (name, os.getpid()))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def jpeg_folder(count=997):
    """An ImageFolder of the first `count` Fashion-MNIST test images as JPEGs,
    made once per build by ddpipe-mkjpeg (libjpeg-turbo) and reused."""
    out = os.path.join(BIN, "..", "testdata", "fmnist-jpeg-%d" % count)
    stamp = os.path.join(out, ".complete")
    if not os.path.exists(stamp):
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".tmp-%d" % os.getpid()
        subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "idx:%s/t10k" % FMNIST, tmp,
                        "--count", str(count)], check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, out)
        except OSError:  # another test made it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def eval_cmd(data, out, workers=1, batch=64, extra=(), model_args=None):
    return [os.path.join(BIN, "ddpipe"), "eval", "--data", data, "--out", out,
            "--workers", str(workers), "--batch-size", str(batch), "--threads", "1",
            "--quiet"] + list(model_args if model_args is not None else WRN_ARGS) + list(extra)


def run_eval(data, out, workers=1, batch=64, extra=(), model_args=None, timeout=180, expect_rc=0):
    cmd = eval_cmd(data, out, workers, batch, extra, model_args)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    dt = time.time() - t0
    if expect_rc is not None and p.returncode != expect_rc:
        logs = ""
        logdir = os.path.join(out, "logs")
        if os.path.isdir(logdir):
            for f in sorted(os.listdir(logdir)):
                with open(os.path.join(logdir, f), errors="replace") as fh:
                    logs += "---- %s\n%s" % (f, "".join(fh.readlines()[-30:]))
        fail("%s\nexit %d, want %d\nstdout:\n%s\nstderr:\n%s\n%s" % (
            " ".join(cmd), p.returncode, expect_rc, p.stdout, p.stderr, logs))
    print("ran %s in %.1fs (exit %d)" % (" ".join(cmd[2:]), dt, p.returncode), flush=True)
    return p


def summary(out):
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def counts(out):
    s = summary(out)
    return {k: s.get(k) for k in COUNT_KEYS}


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def our_processes(marker):
    """PIDs of ddpipe programs of this build whose command line mentions
    marker (a test's own run directory), to prove none is left behind."""
    found = []
    bindir = os.path.realpath(BIN)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
            cmdline = read("/proc/%s/cmdline" % pid, "rb").decode(errors="replace")
        except OSError:
            continue
        exe = exe.replace(" (deleted)", "")
        if (os.path.dirname(exe) == bindir and os.path.basename(exe) in DAEMONS + ("ddpipe",)
                and marker in cmdline):
            found.append((int(pid), os.path.basename(exe)))
    return found


def assert_no_leftovers(marker):
    deadline = time.time() + 5
    left = []
    while time.time() < deadline:
        left = our_processes(marker)
        if not left:
            return
        time.sleep(0.1)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    fail("processes left behind: %s" % left)


def free_port():
    """A loopback TCP port nobody listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load_json(path):
    with open(path) as f:
        return json.load(f)
