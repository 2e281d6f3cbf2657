"""Two hosts in Linux network namespaces (issue 11, "CURVE on every TCP
endpoint"): reducerd, reporterd and loaderd in namespace A, gpud in
namespace B (and, for training, one rank in each: the gradient ring crosses
the link), over TCP on a veth pair with CURVE keys from `ddpipe keygen`.

  eval:  2 gpuds in B; the summary counts equal a local run's. Meanwhile two
         clients without an authorized certificate try: a gpud with keys of
         another `ddpipe keygen` (zauth denies it: logged) and a raw
         python3-zmq client without CURVE sending JOIN and RESULT to reducerd
         and CREDIT to loaderd. They get nothing (no WELCOME, no batch) and
         change nothing: the counts equal the local run's and
         rejected_messages is 0 (nothing of theirs even reached the protocol).
  train: 1 epoch, rank 0 in A and rank 1 in B; the same counts and the same
         final weights, byte for byte, as the same daemons on loopback.
  rules: without --curve-dir, a bind to the veth address is refused (naming
         --curve-dir and --insecure); with --insecure it is allowed and
         warned about.

Needs root and iproute2 (`ip netns`): skipped (exit 77, the reason printed)
otherwise. Namespaces, veth and the private /30 are created here and always
deleted; no traffic leaves them.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from ddp_it import *

SKIP = 77


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(SKIP)


if os.geteuid() != 0:
    skip("needs root to create network namespaces (ip netns add)")
if not shutil.which("ip"):
    skip("iproute2's ip is not installed")
if subprocess.run(["ip", "netns", "list"], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode != 0:
    skip("'ip netns' is not available here")
try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")

PID = os.getpid()
NS_A, NS_B = "ddpA%d" % PID, "ddpB%d" % PID
VETH_A, VETH_B = "dva%d" % PID, "dvb%d" % PID
NET = "10.213.%d" % (PID % 256)     # the private /30 NET.0/30: .1 in A, .2 in B
ADDR_A, ADDR_B = NET + ".1", NET + ".2"
wd = workdir("netns")
procs = {}
deadline = time.time() + 500            # an upper bound on the whole test, never a pace


def sh(*argv):
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0, "%s failed (%d): %s" % (" ".join(argv), p.returncode, p.stdout))


def setup_net():
    sh("ip", "netns", "add", NS_A)
    sh("ip", "netns", "add", NS_B)
    sh("ip", "link", "add", VETH_A, "netns", NS_A, "type", "veth", "peer", "name", VETH_B,
       "netns", NS_B)
    sh("ip", "-n", NS_A, "addr", "add", ADDR_A + "/30", "dev", VETH_A)
    sh("ip", "-n", NS_B, "addr", "add", ADDR_B + "/30", "dev", VETH_B)
    for ns, dev in ((NS_A, VETH_A), (NS_B, VETH_B)):
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", dev, "up")


def teardown_net():
    for ns in (NS_A, NS_B):   # deleting a namespace deletes its end of the veth pair
        subprocess.run(["ip", "netns", "delete", ns], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def logpath(out, name):
    return os.path.join(out, "logs", name + ".log")


def start(out, name, ns, argv):
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    log = open(logpath(out, name), "w")
    cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [os.path.join(BIN, argv[0])] + argv[1:]
    procs[name] = subprocess.Popen(cmd, stdout=log, stderr=log)   # ip netns exec: exec, same pid
    return procs[name]


def logs_tail(out):
    text = ""
    for name in sorted(procs):
        if os.path.exists(logpath(out, name)):
            text += "---- %s\n%s\n" % (name, read(logpath(out, name))[-2500:])
    return text


def wait_until(out, what, cond, timeout=120, watch=()):
    end = min(deadline, time.time() + timeout)
    while time.time() < end:
        if cond():
            return
        for name in watch:
            p = procs[name]
            check(p.poll() is None or p.returncode == 0, "%s exited %s while waiting for %s:\n%s"
                  % (name, p.returncode, what, logs_tail(out)))
        time.sleep(0.05)
    fail("timed out waiting for %s\n%s" % (what, logs_tail(out)))


def wait_exit(out, names, timeout=240):
    for name in names:
        p = procs[name]
        try:
            rc = p.wait(timeout=max(1, min(deadline, time.time() + timeout) - time.time()))
        except subprocess.TimeoutExpired:
            fail("%s did not finish\n%s" % (name, logs_tail(out)))
        check(rc == 0, "%s exited %d\n%s" % (name, rc, logs_tail(out)))


def stop_all():
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()
    procs.clear()


def keygen(d):
    p = subprocess.run([os.path.join(BIN, "ddpipe"), "keygen", d], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0, "ddpipe keygen %s: %s" % (d, p.stdout))
    return d


# ---- the jobs ---------------------------------------------------------------

def eval_job(out, data, ep, where, sec, extra_start=None):
    """where: namespace of each daemon (None: this one)."""
    start(out, "reducerd", where["reducerd"], ["reducerd", "--bind", ep["reducer"], "--pub",
          ep["events"], "--workers", "2", "--worker-timeout", "10", "--stall-timeout", "120"]
          + sec + ["--verbose"])
    start(out, "reporterd", where["reporterd"], ["reporterd", "--sub", ep["events"], "--reducer",
          ep["reducer"], "--out", out] + sec)
    start(out, "loaderd", where["loaderd"], ["loaderd", "--data", data, "--bind", ep["loader"],
          "--reducer", ep["reducer"], "--batch-size", "32", "--channels", "1", "--threads", "1",
          "--worker-timeout", "10"] + sec + ["--verbose"])
    if extra_start:
        extra_start()
    for r in range(2):
        start(out, "gpud.%d" % r, where["gpud"], ["gpud", "--loader", ep["loader"], "--reducer",
              ep["reducer"], "--rank", str(r), "--threads", "1", "--in-channels", "1", "--name",
              "netns-gpud-%d" % r] + WRN_ARGS + sec)
    wait_exit(out, ["reducerd", "reporterd", "loaderd", "gpud.0", "gpud.1"])


def train_job(out, data, ep, where, ring, sec):
    start(out, "reducerd", where["reducerd"], ["reducerd", "--bind", ep["reducer"], "--pub",
          ep["events"], "--train", "--workers", "2", "--epochs", "1", "--no-val",
          "--worker-timeout", "10"] + sec)
    start(out, "reporterd", where["reporterd"], ["reporterd", "--sub", ep["events"], "--reducer",
          ep["reducer"], "--out", out] + sec)
    start(out, "loaderd", where["loaderd"], ["loaderd", "--data", data, "--bind", ep["loader"],
          "--reducer", ep["reducer"], "--train", "--workers", "2", "--global-batch-size", "64",
          "--batch-size", "64", "--epochs", "1", "--seed", "5", "--threads", "1",
          "--worker-timeout", "10"] + sec)
    for r in range(2):
        start(out, "gpud.%d" % r, where["gpud.%d" % r], ["gpud", "--loader", ep["loader"],
              "--reducer", ep["reducer"], "--train", "--rank", str(r), "--threads", "1",
              "--window", "2", "--seed", "5", "--global-batch-size", "64", "--in-channels", "1",
              "--lr", "0.05", "--momentum", "0.9", "--ring-bind", ring[r], "--ring-timeout", "60",
              "--save-weights", os.path.join(out, "model.safetensors")] + TRAIN_MODEL + sec)
    wait_exit(out, ["reducerd", "reporterd", "loaderd", "gpud.0", "gpud.1"])


def local_eps():
    return {k: "tcp://127.0.0.1:%d" % free_port() for k in ("reducer", "events", "loader")}


def ns_eps():
    return {"reducer": "tcp://%s:5560" % ADDR_A, "events": "tcp://%s:5561" % ADDR_A,
            "loader": "tcp://%s:5562" % ADDR_A}


RAW_CLIENT = r"""
import json, os, sys, msgpack, zmq
reducer, loader, stop = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = zmq.Context()
def dealer(ep, ident):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.IDENTITY, ident)
    s.connect(ep)
    return s
def pack(t, **kw):
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)
red, ld = dealer(reducer, b"intruder"), dealer(loader, b"intruder")
red.send(pack(1, role=1, pid=1, want_rank=-1, name="intruder", host="ns-b", backend="cpu"))
red.send(pack(8, rank=0, seq=1, epoch=0, ids=b"\0" * 8, labels=b"\0" * 8, top5=b"\0" * 40,
              loss=b"\0" * 4, worker="intruder"))
ld.send(pack(4, worker="intruder", credits=8, rank=0, acks=b""))
got = []
poller = zmq.Poller()
poller.register(red, zmq.POLLIN)
poller.register(ld, zmq.POLLIN)
print("sent", flush=True)
for _ in range(3000):            # until the test says stop; 5 minutes at most
    for s, _ in poller.poll(100):
        got.append(len(s.recv_multipart()))
    if os.path.exists(stop):
        break
print(json.dumps({"received": got}), flush=True)
"""


def attack_eval(out, data, keys, other):
    """The cross-namespace eval with the unauthorized clients running."""
    raw = {}
    stopfile = os.path.join(out, "raw-client.stop")

    def intruders():
        start(out, "stranger-gpud", NS_B, ["gpud", "--loader", ns_eps()["loader"], "--reducer",
              ns_eps()["reducer"], "--threads", "1", "--in-channels", "1", "--name", "stranger"]
              + WRN_ARGS + ["--curve-dir", other])
        log = open(logpath(out, "raw-client"), "w")
        raw["p"] = subprocess.Popen(["ip", "netns", "exec", NS_B, sys.executable, "-c", RAW_CLIENT,
                                     ns_eps()["reducer"], ns_eps()["loader"], stopfile],
                                    stdout=log, stderr=subprocess.STDOUT)
        # zauth (reducerd --verbose) logs the stranger's denied handshake:
        # it tried and was turned away before the real workers start
        wait_until(out, "zauth denying the stranger gpud",
                   lambda: "denied (CURVE)" in read(logpath(out, "reducerd"))
                   and "denied (CURVE)" in read(logpath(out, "loaderd"))
                   and "sent" in read(logpath(out, "raw-client")),
                   watch=["reducerd", "loaderd", "reporterd"])

    where = {"reducerd": NS_A, "reporterd": NS_A, "loaderd": NS_A, "gpud": NS_B}
    eval_job(out, data, ns_eps(), where, ["--curve-dir", keys], intruders)
    # the job is over: the intruders got nothing
    open(stopfile, "w").close()
    try:
        rc = raw["p"].wait(timeout=120)
    except subprocess.TimeoutExpired:
        raw["p"].kill()
        fail("the raw client did not finish")
    text = read(logpath(out, "raw-client"))
    check(rc == 0, "raw client failed:\n" + text)
    got = json.loads(text.strip().splitlines()[-1])["received"]
    check(got == [], "a client without CURVE received %r" % got)
    stranger = procs.pop("stranger-gpud")
    slog = read(logpath(out, "stranger-gpud"))
    if stranger.poll() is None:
        stranger.kill()
        stranger.wait()
    check("joined job" not in slog and "batches," not in slog.replace("exiting: 0 batches,", ""),
          "the stranger gpud joined or got batches:\n" + slog)
    rlog = read(logpath(out, "reducerd"))
    check("stranger" not in rlog and "intruder" not in rlog,
          "reducerd heard of an intruder:\n" + rlog[-3000:])


def rules(out, keys):
    """Without CURVE a veth bind is refused; --insecure allows it, warned."""
    p = subprocess.run(["ip", "netns", "exec", NS_A, os.path.join(BIN, "reducerd"), "--bind",
                        "tcp://%s:5570" % ADDR_A, "--pub", "tcp://%s:5571" % ADDR_A],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode != 0 and "--curve-dir" in p.stdout and "--insecure" in p.stdout
          and "refusing" in p.stdout, "a plain veth bind was not refused:\n" + p.stdout)
    p = subprocess.run(["ip", "netns", "exec", NS_A, os.path.join(BIN, "reducerd"), "--bind",
                        "tcp://*:5570", "--pub", "ipc://%s/pub" % out, "--curve-dir",
                        os.path.join(keys, "missing")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode == 2 and "ddpipe keygen" in p.stdout, "a missing key dir:\n" + p.stdout)
    os.makedirs(out, exist_ok=True)
    start(out, "insecure", NS_A, ["reducerd", "--bind", "tcp://%s:5572" % ADDR_A, "--pub",
          "ipc://%s/pub2" % out, "--insecure"])
    wait_until(out, "the --insecure warning",
               lambda: "--insecure" in read(logpath(out, "insecure")), watch=["insecure"])
    check("WARN" in read(logpath(out, "insecure")), read(logpath(out, "insecure")))
    procs.pop("insecure").terminate()
    print("rules: plain veth bind refused, missing keys named, --insecure warned", flush=True)


def main():
    keys = keygen(os.path.join(wd, "keys"))
    # the stranger knows the cluster's public server.cert (it is public) and
    # has a key pair of its own: CURVE handshakes, zauth must turn it away
    other = keygen(os.path.join(wd, "other-keys"))
    shutil.copy(os.path.join(keys, "server.cert"), os.path.join(other, "server.cert"))
    os.unlink(os.path.join(other, "server.cert_secret"))
    data = jpeg_folder(997)
    tdata = idx_subset("train", 0, 512)
    # references on this host's loopback, without CURVE
    ref = os.path.join(wd, "eval-local")
    eval_job(ref, data, local_eps(), {k: None for k in ("reducerd", "reporterd", "loaderd", "gpud")},
             [])
    stop_all()
    tref = os.path.join(wd, "train-local")
    train_job(tref, tdata, local_eps(), {k: None for k in ("reducerd", "reporterd", "loaderd",
              "gpud.0", "gpud.1")}, ["tcp://127.0.0.1:0"] * 2, [])
    stop_all()
    check(summary(ref)["samples"] == 997, "local eval: %r" % summary(ref))
    setup_net()
    try:
        rules(os.path.join(wd, "rules"), keys)
        stop_all()
        out = os.path.join(wd, "eval-netns")
        attack_eval(out, data, keys, other)
        stop_all()
        check(counts(out) == counts(ref), "eval across namespaces: %r\nlocal: %r"
              % (counts(out), counts(ref)))
        check(summary(out).get("rejected_messages", 0) == 0,
              "rejected_messages %r: an intruder's message reached a daemon"
              % summary(out).get("rejected_messages"))
        print("eval: %d samples, top-1 %s: counts equal the local run's, intruders got nothing"
              % (summary(out)["samples"], summary(out)["top1"]), flush=True)
        tout = os.path.join(wd, "train-netns")
        where = {"reducerd": NS_A, "reporterd": NS_A, "loaderd": NS_A, "gpud.0": NS_A,
                 "gpud.1": NS_B}
        train_job(tout, tdata, ns_eps(), where, ["tcp://%s:0" % ADDR_A, "tcp://%s:0" % ADDR_B],
                  ["--curve-dir", keys])
        stop_all()
        check(counts(tout) == counts(tref), "train across namespaces: %r\nlocal: %r"
              % (counts(tout), counts(tref)))
        check(read(os.path.join(tout, "model.safetensors"), "rb")
              == read(os.path.join(tref, "model.safetensors"), "rb"),
              "trained weights differ from the local run's")
        ring = [l for l in read(logpath(tout, "gpud.1")).splitlines() if "ring tcp://" in l]
        check(ring and ADDR_A in ring[0] and ADDR_B in ring[0], "rank 1's ring: %r" % ring)
        print("train: %d samples; counts and weights equal the local run's; %s"
              % (summary(tout)["samples"], ring[0].split(" INFO ")[-1]), flush=True)
    finally:
        stop_all()
        teardown_net()
    left = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    check(NS_A not in left and NS_B not in left, "namespaces left behind: " + left)
    assert_no_leftovers(wd)
    shutil.rmtree(wd, ignore_errors=True)
    print("OK", flush=True)


main()
