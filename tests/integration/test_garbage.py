"""Garbage, truncated and wrong-version messages thrown at every daemon's
sockets are rejected and counted; the job still completes with the right
counts. Daemons are started one by one on tcp endpoints, as on a cluster."""
import os
import re
import subprocess
import time
from ddp_it import *



data = jpeg_folder(997)
wd = workdir("garbage")
ref = os.path.join(wd, "ref")
run_eval(data, ref, 1, 32, extra=["--predictions", "topk"])
ref_counts = counts(ref)

out = os.path.join(wd, "run")
os.makedirs(os.path.join(out, "logs"))
ep = {k: "tcp://127.0.0.1:%d" % free_port() for k in ("reducer", "events", "loader", "tap")}
procs = {}


def start(name, argv):
    log = open(os.path.join(out, "logs", name + ".log"), "w")
    procs[name] = subprocess.Popen([os.path.join(BIN, argv[0])] + argv[1:], stdout=log, stderr=log)


def garbage(endpoint, kind="all", count=20):
    subprocess.run([os.path.join(BIN, "ddpipe-garbage"), endpoint, kind, "--count", str(count)],
                   check=True, timeout=60, stdout=subprocess.DEVNULL)


try:
    start("reducerd", ["reducerd", "--bind", ep["reducer"], "--pub", ep["events"], "--workers", "2",
                       "--predictions", "topk", "--worker-timeout", "3"])
    start("reporterd", ["reporterd", "--sub", ep["events"], "--reducer", ep["reducer"], "--out", out,
                        "--tap", ep["tap"]])
    garbage(ep["reducer"])
    start("loaderd", ["loaderd", "--data", data, "--bind", ep["loader"], "--reducer", ep["reducer"],
                      "--batch-size", "32", "--channels", "1", "--predictions", "topk"])
    garbage(ep["loader"])
    time.sleep(0.5)
    for r in range(2):
        start("gpud.%d" % r, ["gpud", "--loader", ep["loader"], "--reducer", ep["reducer"], "--rank", str(r),
                              "--threads", "1", "--in-channels", "1"] + WRN_ARGS)
        garbage(ep["reducer"], "random", 10)   # while the job runs, too
        garbage(ep["loader"], "wrong-version", 10)
    rc = procs["reporterd"].wait(timeout=300)
    check(rc == 0, "reporterd exited %d" % rc)
    for name, p in procs.items():
        check(p.wait(timeout=30) == 0, "%s exited %d" % (name, p.returncode))
finally:
    for p in procs.values():
        if p.poll() is None:
            p.kill()

check_counts(out, ref_counts)
for name in ("reducerd", "loaderd"):
    log = read(os.path.join(out, "logs", name + ".log"))
    m = re.search(r"(\d+) rejected\)", log)
    check(m and int(m.group(1)) >= 20, "%s did not count the garbage it rejected:\n%s" % (name, log[-2000:]))
    check("rejected" in log and "WARN" in log, "%s did not log why it rejected messages" % name)
print("1 passed, 0 failed")
