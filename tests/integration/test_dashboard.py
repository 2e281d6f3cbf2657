"""The live dashboard (GET / on --metrics-http) in a real headless browser
(Debian's chromium and chromium-driver, driven by python3-selenium) against
a running `ddpipe train`: the page loads and its stream opens, the progress
number moves while the job runs, and at the end the page shows the final
top-1 of summary.json (the same counts), the confusion matrix of the
classes and a row per worker. The only worker is paused (SIGSTOP) until
the page is open, so the page sees the job move whatever the machine's
speed; every wait is for a page state, with a deadline, never a sleep.

The page opens late: only after reporterd counted N progress events
(/metrics), with reducerd paused too while it loads, so nothing new comes
in; it must then hold all N throughput samples (the whole job, not the
newest alone) and draw their rates. Every text of each chart (the y label
too) lies inside its SVG; the W=1 job reads "1 worker", not "1 workers".
Exits 77 (skipped) when the browser or its driver is missing.
DDPIPE_DASH_SCREENSHOT=PATH saves a screenshot of the final page."""
import decimal
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from ddp_it import *

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    print("skipped: python3-selenium is not installed (scripts/install-deps.sh --test)", flush=True)
    sys.exit(77)
if not (os.access(CHROMIUM, os.X_OK) and os.access(DRIVER, os.X_OK)):
    print("skipped: chromium or chromium-driver is not installed (scripts/install-deps.sh --test)",
          flush=True)
    sys.exit(77)


def gpud_pid(out, daemon="gpud"):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = read("/proc/%s/cmdline" % pid, "rb").decode(errors="replace").split("\0")
        except OSError:
            continue
        if args and os.path.basename(args[0]) == daemon and any(out in a for a in args):
            return int(pid)
    return None


def wait_for(what, cond, deadline_s, job=None):
    """cond() until it is truthy; fails after deadline_s (or if job died)."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        if job is not None and job.poll() is not None and job.returncode != 0:
            fail("%s: the job exited %d:\n%s" % (what, job.returncode, job.communicate()[0]))
        time.sleep(0.05)
    fail("%s: not within %d s" % (what, deadline_s))


def progress_events(port):
    """reporterd's count of progress events (ddpipe_events_total), 0 before any."""
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith('ddpipe_events_total{topic="progress"} '):
            return int(line.split()[1])
    return 0


# every <text> of a chart inside its <svg> (CSS pixels, 0.5 px of rounding)
TEXTS_OUTSIDE = """
const svg = document.getElementById(arguments[0]), b = svg.getBoundingClientRect(), out = [];
for (const t of svg.querySelectorAll("text")) {
  const r = t.getBoundingClientRect();
  if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5)
    out.push([t.textContent, r.left - b.left, r.top - b.top, r.right - b.left, r.bottom - b.top]);
}
return [out, svg.querySelectorAll("text.ylabel").length, b.width, b.height];
"""


def page_up(port):
    try:
        return b"ddpipe" in urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=2).read()
    except OSError:
        return False


train = idx_subset("train", 0, 160)
val = idx_subset("t10k", 0, 64)
wd = workdir("dashboard")
out = os.path.join(wd, "run")
port = free_port()
cmd = train_cmd(train, out, 1, ["--batch-size", "16", "--epochs", "2", "--lr", "0.05",
                                "--momentum", "0.9", "--worker-timeout", "120",
                                "--metrics-http", "127.0.0.1:%d" % port], val=val)
job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
driver, pid, rpid = None, None, None
try:
    # pause the worker as soon as it exists: the job cannot end before the page is open
    pid = wait_for("the worker starts", lambda: gpud_pid(out), 60, job)
    os.kill(pid, signal.SIGSTOP)
    if job.poll() is not None:
        fail("the job ended before its worker could be paused:\n%s" % job.communicate()[0])
    wait_for("GET / answers", lambda: page_up(port), 60, job)
    # reducerd sends progress twice a second while the worker waits: open
    # the page only after LATE of them, with reducerd paused meanwhile so
    # the page can only know them from the replay
    LATE = 8
    wait_for("%d progress events" % LATE, lambda: progress_events(port) >= LATE, 120, job)
    rpid = wait_for("reducerd's pid", lambda: gpud_pid(out, "reducerd"), 10, job)
    os.kill(rpid, signal.SIGSTOP)
    late = progress_events(port)

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1500", "--user-data-dir=" + os.path.join(wd, "chromium")):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(30)
    driver.get("http://127.0.0.1:%d/" % port)
    txt = lambda id_: driver.find_element(By.ID, id_).text
    check("ddpipe" in driver.title, "page title %r" % driver.title)
    wait_for("the event stream opens", lambda: txt("status") == "live", 30)
    tput = driver.find_element(By.ID, "chart-tput")
    # the replay is queued before the stream opens: the page has it once it shows a progress
    wait_for("the replayed progress", lambda: txt("progress") != "–", 30)
    samples = int(tput.get_attribute("data-samples") or 0)
    points = int(tput.get_attribute("data-points") or 0)
    print("late page: %d samples, %d rate points for %d progress events" % (samples, points, late),
          flush=True)
    check(samples >= late and points >= late - 1,
          "a page opened after %d progress events holds %d samples (%d rate points): not the whole job"
          % (late, samples, points))
    os.kill(rpid, signal.SIGCONT)
    rpid = None
    before = txt("progress")
    os.kill(pid, signal.SIGCONT)
    pid = None
    moved = wait_for("the progress number moves", lambda: txt("progress") != before and txt("progress"), 60)
    print("progress moved: %r -> %r" % (before, moved), flush=True)

    final = wait_for("the page shows the final top-1",
                     lambda: driver.find_element(By.ID, "final-top1").get_attribute("data-correct")
                     and txt("status") == "finished", 120)
    shown = driver.find_element(By.ID, "final-top1")
    page = {k: shown.get_attribute("data-" + k) for k in ("correct", "samples", "top1")}
    page["text"] = shown.text
    cells = len(driver.find_elements(By.CSS_SELECTOR, "#confusion rect"))
    workers = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#workers tr")]
    tput_points = len(driver.find_elements(By.CSS_SELECTOR, "#chart-tput circle, #chart-tput polyline"))
    loss_lines = len(driver.find_elements(By.CSS_SELECTOR, "#chart-loss polyline"))
    ips_note = txt("ips-note")
    texts = {c: driver.execute_script(TEXTS_OUTSIDE, c) for c in ("chart-tput", "chart-loss", "chart-acc")}
    first_t = float(tput.get_attribute("data-first-t") or "nan")
    if os.environ.get("DDPIPE_DASH_SCREENSHOT"):
        driver.save_screenshot(os.environ["DDPIPE_DASH_SCREENSHOT"])
    logs = driver.get_log("browser")
    outp, _ = job.communicate(timeout=120)
finally:
    if rpid:
        os.kill(rpid, signal.SIGCONT)
    if pid:
        os.kill(pid, signal.SIGCONT)
    if driver:
        driver.quit()
    if job.poll() is None:
        job.kill()
        job.communicate()

check(job.returncode == 0, "the job failed:\n" + outp)
s = summary(out)
print("page %r, summary top1 %r (%d/%d)" % (page, s["top1"], s["correct_top1"], s["samples"]), flush=True)
check(int(page["correct"]) == s["correct_top1"] and int(page["samples"]) == s["samples"],
      "page's final counts %r, summary.json's %d/%d" % (page, s["correct_top1"], s["samples"]))
# the page's text is JavaScript's (100 * top1).toFixed(2): on a tie (10/64 is
# 15.625 %) it picks the larger, where Python's "%.2f" rounds half to even
want_text = "%s %%" % decimal.Decimal(100 * s["top1"]).quantize(decimal.Decimal("0.01"),
                                                                rounding=decimal.ROUND_HALF_UP)
check(abs(float(page["top1"]) - s["top1"]) < 1e-12 and page["text"] == want_text,
      "page's final top-1 %r, summary.json's %r (text %r)" % (page, s["top1"], want_text))
nc = len(s["per_class"])
check(cells == nc * nc, "confusion matrix: %d cells for %d classes" % (cells, nc))
check(len(workers) == 1 and workers[0].startswith("0 "), "workers table %r" % workers)
check(tput_points >= 1 and loss_lines >= 1, "charts: throughput %d marks, loss %d lines (2 epochs)"
      % (tput_points, loss_lines))
check(ips_note == "epoch average, 1 worker", "throughput note %r (one worker)" % ips_note)
for c, (outside, ylabels, w, h) in texts.items():
    check(ylabels == 1 and w > 0 and h > 0, "%s: %d y labels, %gx%g px" % (c, ylabels, w, h))
    check(not outside, "%s: texts outside the chart [text, left, top, right, bottom]: %r" % (c, outside))
check(0 <= first_t < 10 ** 6, "the throughput's first sample at %r s" % first_t)
errors = [l for l in logs if l.get("level") == "SEVERE"]
check(not errors, "browser console errors: %r" % errors)
assert_no_leftovers(out)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
