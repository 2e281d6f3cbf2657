"""Shared helpers of the integration tests: real daemons, real sockets.

Run by ctest with DDPIPE_BIN (built binaries) and DDPIPE_SRC (source tree)
in the environment; only the Python standard library is needed, except the
fake-peer tests which use python3-zmq/python3-msgpack when present.
"""
import atexit
import json
import os
import random
import re
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


_failed = False     # a check failed or an exception escaped: keep the work dirs
_workdirs = []


def fail(msg):
    global _failed
    _failed = True
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def _excepthook(kind, value, tb):
    global _failed
    _failed = True
    sys.__excepthook__(kind, value, tb)


sys.excepthook = _excepthook


@atexit.register
def _clean_workdirs():
    """A passing (or skipped) test leaves nothing in /tmp; a failing one keeps
    its run directories for a look, as does DDPIPE_KEEP_TMP=1."""
    keep = _failed or os.environ.get("DDPIPE_KEEP_TMP") == "1"
    for d in _workdirs:
        if keep:
            print("kept %s" % d, flush=True)
        else:
            shutil.rmtree(d, ignore_errors=True)


def check(cond, msg):
    if not cond:
        fail(msg)


def workdir(name):
    base = os.environ.get("DDPIPE_TEST_TMP") or tempfile.gettempdir()
    d = os.path.join(base, "ddpipe-it-%s-%d" % (name, os.getpid()))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    _workdirs.append(d)
    return d


def jpeg_folder(count=997):
    """An ImageFolder of the first `count` Fashion-MNIST test images as JPEGs,
    made once per build by ddpipe-mkjpeg (libjpeg-turbo) and reused.

    Safe for tests running at once (some run beside the one-at-a-time
    integration tests, CMakeLists.txt): the folder appears whole, by one
    rename, and a complete one is never removed; only a folder without the
    stamp (left by an interrupted older run) is cleared before the rename."""
    out = os.path.join(BIN, "..", "testdata", "fmnist-jpeg-%d" % count)
    stamp = os.path.join(out, ".complete")
    if not os.path.exists(stamp):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".tmp-%d" % os.getpid()
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "idx:%s/t10k" % FMNIST, tmp,
                        "--count", str(count)], check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, out)
        except OSError:  # out exists: another test's whole folder, or a stale partial one
            if not os.path.exists(stamp):
                shutil.rmtree(out, ignore_errors=True)
                try:
                    os.rename(tmp, out)
                except OSError:  # a second test cleared it too, and won
                    pass
            shutil.rmtree(tmp, ignore_errors=True)
        check(os.path.exists(stamp), "jpeg_folder: %s was not made" % out)
    return out


def eval_cmd(data, out, workers=1, batch=64, extra=(), model_args=None, overwrite=True):
    """overwrite: tests rerun into their run directories (--overwrite clears
    the previous outputs; test_rundir.py checks the refusal without it)."""
    return [os.path.join(BIN, "ddpipe"), "eval", "--data", data, "--out", out,
            "--workers", str(workers), "--batch-size", str(batch), "--threads", "1",
            "--quiet"] + (["--overwrite"] if overwrite else []) + list(
                model_args if model_args is not None else WRN_ARGS) + list(extra)


def run_eval(data, out, workers=1, batch=64, extra=(), model_args=None, timeout=180, expect_rc=0,
             overwrite=True, env=None):
    """env: variables added to the job's environment (its daemons inherit it)."""
    cmd = eval_cmd(data, out, workers, batch, extra, model_args, overwrite)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, env=dict(os.environ, **env) if env else None)
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


def check_counts(out, ref_counts, what="clean run"):
    """summary.json's COUNT_KEYS of run directory out equal ref_counts (a
    counts() of the run it must match)."""
    c = counts(out)
    for k in COUNT_KEYS:
        check(c[k] == ref_counts[k], "%s=%r, %s has %r" % (k, c[k], what, ref_counts[k]))


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


_port_rng = random.Random()
_ports_given = set()   # a test asking for several ports gets distinct ones


def low_port_range():
    """[10000, the first ephemeral port): the kernel never hands these to a
    port-0 or outgoing socket, so a port found free there stays free until
    the daemon it is meant for binds it, unless another test picks it too."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return 10000, max(10001, lo)


def port_is_free(port):
    """Whether a loopback TCP socket can bind port now."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    """A loopback TCP port nobody listens on right now, below the ephemeral
    range (low_port_range; a port-0 port could go to another process's
    socket before the daemon binds it)."""
    a, b = low_port_range()
    for _ in range(200):
        port = _port_rng.randrange(a, b)
        if port not in _ports_given and port_is_free(port):
            _ports_given.add(port)
            return port
    fail("no free loopback port in %d..%d" % (a, b - 1))


def load_json(path):
    with open(path) as f:
        return json.load(f)


# ---- training (ddpipe train) ----------------------------------------------

TRAIN_MODEL = ["--model", "wideresnet", "--channels", "4,8,16,32"]


def _read_idx_gz(path):
    import gzip
    with gzip.open(path, "rb") as f:
        return f.read()


def idx_subset(split, first, count):
    """idx:PREFIX of `count` Fashion-MNIST `split` ("train"/"t10k") samples
    from index `first`, as uncompressed IDX files made once per build."""
    import struct
    out = os.path.join(BIN, "..", "testdata", "fmnist-%s-%d-%d" % (split, first, count))
    img_path, lab_path = out + "-images-idx3-ubyte", out + "-labels-idx1-ubyte"
    if not (os.path.exists(img_path) and os.path.exists(lab_path)):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        img = _read_idx_gz("%s/%s-images-idx3-ubyte.gz" % (FMNIST, split))
        lab = _read_idx_gz("%s/%s-labels-idx1-ubyte.gz" % (FMNIST, split))
        _, n, rows, cols = struct.unpack(">IIII", img[:16])
        check(first + count <= n, "idx_subset: %s has %d samples" % (split, n))
        px = rows * cols
        for path, data in ((img_path, struct.pack(">IIII", 0x803, count, rows, cols)
                            + img[16 + first * px:16 + (first + count) * px]),
                           (lab_path, struct.pack(">II", 0x801, count) + lab[8 + first:8 + first + count])):
            tmp = "%s.tmp-%d" % (path, os.getpid())
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, path)
    return "idx:" + out


def train_cmd(data, out, workers=1, extra=(), val=None, model_args=None, overwrite=True):
    cmd = [os.path.join(BIN, "ddpipe"), "train", "--data", data, "--out", out,
           "--workers", str(workers), "--threads", "1", "--loader-threads", "1"]
    if overwrite:
        cmd.append("--overwrite")
    if val:
        cmd += ["--val", val]
    return cmd + list(model_args if model_args is not None else TRAIN_MODEL) + list(extra)


def _logs(out, lines=30):
    text = ""
    logdir = os.path.join(out, "logs")
    if os.path.isdir(logdir):
        for f in sorted(os.listdir(logdir)):
            with open(os.path.join(logdir, f), errors="replace") as fh:
                text += "---- %s\n%s" % (f, "".join(fh.readlines()[-lines:]))
    return text


def run_train(data, out, workers=1, extra=(), val=None, model_args=None, timeout=300, expect_rc=0,
              overwrite=True, env=None):
    """env: variables added to the job's environment (its daemons inherit it)."""
    cmd = train_cmd(data, out, workers, extra, val, model_args, overwrite)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=dict(os.environ, **env) if env else None)
    dt = time.time() - t0
    if expect_rc is not None and p.returncode != expect_rc:
        fail("%s\nexit %d, want %d\nstdout:\n%s\nstderr:\n%s\n%s" % (
            " ".join(cmd), p.returncode, expect_rc, p.stdout, p.stderr, _logs(out)))
    print("ran %s in %.1fs (exit %d)" % (" ".join(cmd[2:]), dt, p.returncode), flush=True)
    p.seconds = dt
    return p


_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
              "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def safetensors_read(path):
    """(tensors, metadata) of a safetensors file: name -> numpy array (numpy only)."""
    import numpy as np
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        arr = np.frombuffer(raw[base + a:base + b], dtype=np.dtype(_ST_DTYPES[t["dtype"]]))
        tensors[name] = arr.reshape(t["shape"]) if t["shape"] else arr.reshape(())
    return tensors, meta


def safetensors_poison(src, dst, edits):
    """A copy of the safetensors file src at dst with F32 tensors changed in
    place (stdlib only): edits maps a tensor name to f(i, value), the new
    value of element i. Returns dst."""
    import struct
    with open(src, "rb") as f:
        raw = bytearray(f.read())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    for name, fn in edits.items():
        t = header[name]
        check(t["dtype"] == "F32", "%s: dtype %s, not F32" % (name, t["dtype"]))
        a, b = t["data_offsets"]
        for off in range(8 + n + a, 8 + n + b, 4):
            (v,) = struct.unpack("<f", raw[off:off + 4])
            raw[off:off + 4] = struct.pack("<f", fn((off - 8 - n - a) // 4, v))
    with open(dst, "wb") as f:
        f.write(raw)
    return dst


def weights_diff(path_a, path_b):
    """Largest difference over all tensors of two weight files, each
    |a - b| / max(1, |a|) (absolute for small values, relative for large);
    fails when the tensor names or shapes differ."""
    import numpy as np
    a, _ = safetensors_read(path_a)
    b, _ = safetensors_read(path_b)
    check(sorted(a) == sorted(b), "%s and %s hold different tensors: %s" % (
        path_a, path_b, sorted(set(a) ^ set(b))))
    worst, where = 0.0, None
    for name in a:
        check(a[name].shape == b[name].shape, "%s: shape %s vs %s" % (name, a[name].shape, b[name].shape))
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.size == 0:
            continue
        d = float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(x))))
        if d > worst:
            worst, where = d, name
    return worst, where


def metrics_rows(out, phase=None):
    """metrics.csv rows as dicts (optionally of one phase: "train" / "eval" / "val")."""
    import csv
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if phase is None or r["phase"] == phase]


def train_losses(out):
    """{epoch: train loss} from metrics.csv."""
    return {int(r["epoch"]): float(r["loss"]) for r in metrics_rows(out, "train")}


def staged_ahead(out, role):
    """The batches a job's gpuds staged while the one before ran (role "eval"
    or "train": gpud's exit line)."""
    n = 0
    for f in os.listdir(os.path.join(out, "logs")):
        if f.startswith("gpud"):
            m = re.search(role + r": (\d+) of \d+ batches staged", read(os.path.join(out, "logs", f)))
            n += int(m.group(1)) if m else 0
    return n
