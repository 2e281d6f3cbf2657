"""Two jobs that share CURVE keys stay apart (issue 28, item 3): real
daemons over loopback TCP, every socket CURVE-authenticated with the keys
of one `ddpipe keygen`, started by hand without --job (each reducerd draws
its own job id), attackers written from proto/PROTOCOL.md.

  replay:  a HEARTBEAT of job A (a worker that joined A: valid job,
           session and token), sent to job B's reducerd as it starts,
           before B has a plan or a worker: refused as another job's,
           never "reducerd restarted" (exit 3)
  weights: a real gpud with other weights (one value of the demo weights
           changed) and no job id pointed at B's endpoints after B's two
           workers joined: refused for its weights' digest, told why
  plans:   a real gpud with B's weights on another cuDNN plans file
           (DDPIPE_CUDNN_PLANS: which engines sum its convolutions): refused
           for the plans' digest, told why
  job:     a real gpud with B's weights but job A's id: refused as another
           job's, told why

B then runs to the end: exit 0, counts and predictions.csv of a clean run,
rejected_messages counting the four.
"""
import json
import os
import re
import struct
import subprocess
import time
from ddp_it import *
from ddp_trust import auth

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

JOIN, WELCOME, HEARTBEAT, STOP = 1, 2, 5, 10
ctx = zmq.Context()
data = jpeg_folder(997)
wd = workdir("jobid")
keys = os.path.join(wd, "keys")
subprocess.run([os.path.join(BIN, "ddpipe"), "keygen", keys], check=True, stdout=subprocess.DEVNULL)
ref = os.path.join(wd, "ref")
run_eval(data, ref, 2, 32, extra=["--predictions", "topk"])
ref_counts = counts(ref)

out = os.path.join(wd, "b")
os.makedirs(os.path.join(out, "logs"))
ep = {k: "tcp://127.0.0.1:%d" % free_port() for k in ("a", "reducer", "events", "loader")}
curve = ["--curve-dir", keys]
env = {k: v for k, v in os.environ.items() if k != "DDPIPE_JOB"}   # no job id given
procs = {}
deadline = time.time() + 240        # an upper bound on the whole test, never a pace


def start(name, argv, extra_env=None):
    log = open(os.path.join(out, "logs", name + ".log"), "w")
    procs[name] = subprocess.Popen([os.path.join(BIN, argv[0])] + argv[1:] + curve, stdout=log,
                                   stderr=log, env=dict(env, **(extra_env or {})))


def logtext(name):
    return read(os.path.join(out, "logs", name + ".log"))


def wait_for(what, cond, timeout=60, watch=("reducerd",)):
    end = min(deadline, time.time() + timeout)
    while time.time() < end:
        if cond():
            return
        for name in watch:
            p = procs.get(name)
            check(p is None or p.poll() is None, "%s exited %s while waiting for %s:\n%s" % (
                name, p and p.returncode, what, logtext(name)[-3000:]))
        time.sleep(0.05)
    fail("timed out waiting for %s\nreducerd:\n%s" % (what, logtext("reducerd")[-3000:]))


def zcert(name):
    text = read(os.path.join(keys, name))
    pub = re.search(r'public-key = "(.{40})"', text).group(1).encode()
    sec = re.search(r'secret-key = "(.{40})"', text)
    return pub, sec.group(1).encode() if sec else None


SERVER_PUB, _ = zcert("server.cert")
CLIENT_PUB, CLIENT_SEC = zcert("client.cert_secret")


def dealer(endpoint, identity):
    """A client of the shared keys: whatever either job lets in."""
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_serverkey, s.curve_publickey, s.curve_secretkey = SERVER_PUB, CLIENT_PUB, CLIENT_SEC
    s.setsockopt(zmq.IDENTITY, identity)
    s.connect(endpoint)
    return s


def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


def other_weights():
    """The demo weights with one value of one tensor changed."""
    raw = bytearray(read(DEMO_WEIGHTS, "rb"))
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    name = next(k for k, t in header.items() if k != "__metadata__" and t["dtype"] == "F32")
    off = 8 + n + header[name]["data_offsets"][0]
    (x,) = struct.unpack("<f", raw[off:off + 4])
    raw[off:off + 4] = struct.pack("<f", x + 0.5)
    path = os.path.join(wd, "other.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    return path


def gpud_args(name, rank=None, weights=None):
    args = list(WRN_ARGS)
    if weights:
        args[args.index("--weights") + 1] = weights
    return (["gpud", "--loader", ep["loader"], "--reducer", ep["reducer"], "--threads", "1",
             "--in-channels", "1", "--name", name, "--join-timeout", "60"]
            + (["--rank", str(rank)] if rank is not None else []) + args)


try:
    # ---- job A: a worker that joined it holds A's job, session, token ----
    start("reducerd-a", ["reducerd", "--bind", ep["a"], "--pub", "ipc://%s/a-events" % wd,
                         "--workers", "1"])
    a = dealer(ep["a"], b"a-worker")
    a.send(pack(JOIN, role=1, pid=os.getpid(), want_rank=-1, name="a-worker", host="h",
                backend="cpu"))
    check(a.poll(30000), "job A's reducerd never answered the JOIN:\n" + logtext("reducerd-a"))
    w = msgpack.unpackb(a.recv(), raw=False)
    check(w["t"] == WELCOME, "job A answered %r" % w)
    job_a = w["job"]
    a_heartbeat = pack(HEARTBEAT, worker="a-worker", rank=w["rank"], batches_done=0,
                       **auth(w["job"], w["session"], w["token"]))
    a.close()
    procs.pop("reducerd-a").kill()

    # ---- job B starts; A's message reaches it at once --------------------
    start("reducerd", ["reducerd", "--bind", ep["reducer"], "--pub", ep["events"], "--workers", "2",
                       "--predictions", "topk", "--stall-timeout", "120"])
    replayer = dealer(ep["reducer"], b"a-worker.hb")
    replayer.send(a_heartbeat)     # queued by zmq until B's reducerd is up: its first message
    refused_a = r"rejected HEARTBEAT from .*of job %s" % re.escape(job_a)
    wait_for("B's reducerd to judge job A's heartbeat",
             lambda: re.search(refused_a, logtext("reducerd")) or "job failed" in logtext("reducerd"))
    check("job failed" not in logtext("reducerd") and re.search(refused_a, logtext("reducerd")),
          "job A's heartbeat was not refused as another job's:\n" + logtext("reducerd")[-2000:])
    start("reporterd", ["reporterd", "--sub", ep["events"], "--reducer", ep["reducer"], "--out", out])
    for r in range(2):
        start("gpud.%d" % r, gpud_args("b-gpud-%d" % r, rank=r))
    wait_for("B's two workers to join",
             lambda: "b-gpud-0 is rank 0" in logtext("reducerd") and
             "b-gpud-1 is rank 1" in logtext("reducerd"), timeout=120)

    # ---- gpuds of job A pointed at B's endpoints --------------------------
    start("rogue-weights", gpud_args("rogue-weights", weights=other_weights()))
    wait_for("the gpud with other weights to be refused",
             lambda: re.search(r"gpud rogue-weights refused: .*--weights-digest", logtext("reducerd")))
    # a worker on another cuDNN plans file: other engines, other bits
    # (docs/CUDA.md "Tuned engines"; the digest is part of the identity on
    # every backend)
    plans = os.path.join(wd, "plans.txt")
    with open(plans, "w") as f:
        f.write("# another job's cuDNN plans\n")
    start("rogue-plans", gpud_args("rogue-plans"), {"DDPIPE_CUDNN_PLANS": plans})
    wait_for("the gpud on another plans file to be refused",
             lambda: re.search(r"gpud rogue-plans refused: .*--cudnn-plans-digest",
                               logtext("reducerd")))
    start("rogue-job", gpud_args("rogue-job"), {"DDPIPE_JOB": job_a})
    wait_for("the gpud of job A to be refused",
             lambda: re.search(r"rejected JOIN from rogue-job: of job %s" % re.escape(job_a),
                               logtext("reducerd")))
    for name in ("rogue-weights", "rogue-plans", "rogue-job"):
        rc = procs.pop(name).wait(timeout=60)
        check(rc != 0 and "reducerd refuses this worker" in logtext(name),
              "%s exited %d without saying it was refused:\n%s" % (name, rc, logtext(name)[-2000:]))

    # ---- B runs to the end ------------------------------------------------
    start("loaderd", ["loaderd", "--data", data, "--bind", ep["loader"], "--reducer", ep["reducer"],
                      "--batch-size", "32", "--channels", "1", "--predictions", "topk",
                      "--threads", "1"])
    rc = procs["reporterd"].wait(timeout=max(1, deadline - time.time()))
    check(rc == 0, "reporterd exited %d:\n%s" % (rc, logtext("reporterd")[-2000:]))
    for name, p in procs.items():
        check(p.wait(timeout=30) == 0, "%s exited %d:\n%s" % (name, p.returncode, logtext(name)[-3000:]))
finally:
    for p in procs.values():
        if p.poll() is None:
            p.kill()

check_counts(out, ref_counts)
check(read(os.path.join(out, "predictions.csv")) == read(os.path.join(ref, "predictions.csv")),
      "predictions.csv differs from the clean run")
s = summary(out)
check(s.get("workers") == 2, "summary workers %r, want 2" % s.get("workers"))
check(s.get("rejected_messages", 0) >= 4, "rejected_messages %r, want >= 4 (A's heartbeat, three "
      "JOINs)" % s.get("rejected_messages"))
print("B exact with A's gpuds and message refused; rejected_messages %d" % s["rejected_messages"],
      flush=True)
print("1 passed, 0 failed")
