"""compose/supervisord.conf runs the same pipeline as long-lived services
with numprocs gpud workers; `ddpipe tap` watches it live; the run directory
matches a `ddpipe eval` run of the same job."""
import os
import shutil
import subprocess
import time
from ddp_it import *

if not shutil.which("supervisord"):
    fail("supervisord not found: install Debian's supervisor (scripts/install-deps.sh --test)")



data = jpeg_folder(997)
wd = workdir("supervisord")
ref = os.path.join(wd, "ref")
run_eval(data, ref, 1, 32, extra=["--predictions", "topk"])

out = os.path.join(wd, "run")
env = dict(os.environ)
ports = [free_port() for _ in range(5)]
env.update({
    "DDPIPE_BIN": os.path.realpath(BIN), "DDPIPE_OUT": out, "DDPIPE_DATA": data,
    "DDPIPE_MODEL": "wideresnet", "DDPIPE_WEIGHTS": DEMO_WEIGHTS,
    "DDPIPE_MODEL_ARGS": "--channels 16,32,64,128 --in-channels 1 --threads 1",
    "DDPIPE_LOADER_ARGS": "--channels 1", "DDPIPE_WORKERS": "3", "DDPIPE_BATCH": "32",
    "DDPIPE_REDUCER": "tcp://127.0.0.1:%d" % ports[0], "DDPIPE_EVENTS": "tcp://127.0.0.1:%d" % ports[1],
    "DDPIPE_LOADER": "tcp://127.0.0.1:%d" % ports[2], "DDPIPE_TAP": "tcp://127.0.0.1:%d" % ports[3],
    "DDPIPE_METRICS_HTTP": "127.0.0.1:%d" % ports[4],
})
os.makedirs(os.path.join(out, "logs"))
conf = os.path.join(SRC, "compose", "supervisord.conf")
sup = subprocess.Popen(["supervisord", "-n", "-c", conf], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
tap = None
try:
    # the tap subscribes while reporterd starts; retry until reporterd binds
    tap = subprocess.Popen([os.path.join(BIN, "ddpipe"), "tap", env["DDPIPE_TAP"], "--json", "--until-end"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    status = ""
    while time.time() < deadline:
        st = subprocess.run(["supervisorctl", "-c", conf, "status"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
        status = st.stdout
        lines = [l for l in status.splitlines() if l.strip()]
        # reporterd lingers (--linger: /metrics keeps the final values)
        # until supervisord shuts it down; the job is over when the rest exited
        if len(lines) == 6 and all("EXITED" in l for l in lines if not l.startswith("reporterd")):
            break
        if any("FATAL" in l or "BACKOFF" in l for l in lines):
            fail("a supervised program failed:\n" + status)
        time.sleep(0.5)
    else:
        fail("supervised job did not finish:\n" + status)
    check("gpud:gpud_2" in status, "numprocs did not start 3 gpud:\n" + status)
    tap_out, tap_err = tap.communicate(timeout=30)
finally:
    subprocess.run(["supervisorctl", "-c", conf, "shutdown"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        sup.wait(timeout=30)
    except subprocess.TimeoutExpired:
        sup.kill()
    if tap and tap.poll() is None:
        tap.kill()

c, r = counts(out), counts(ref)
for k in COUNT_KEYS:
    check(c[k] == r[k], "supervised %s=%r, ddpipe eval has %r" % (k, c[k], r[k]))
check(read(os.path.join(out, "predictions.csv")) == read(os.path.join(ref, "predictions.csv")),
      "supervised predictions.csv differs from ddpipe eval's")
check(summary(out)["workers"] == 3, "summary workers %s, want 3" % summary(out)["workers"])
check('"topic":"end"' in tap_out.replace(" ", "") and '"topic":"metric"' in tap_out.replace(" ", ""),
      "ddpipe tap --json did not show metric and end events:\n" + tap_out[-2000:] + tap_err)
print("1 passed, 0 failed")
