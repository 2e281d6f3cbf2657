"""Prometheus exposition of a running job (`ddpipe eval --metrics-http`):
scraped with curl while a slow job (batch 1) runs, the text must follow the
exposition format (checked by the parser below: promtool is not in Debian)
and the counters must increase between scrapes."""
import math
import os
import re
import shutil
import subprocess
import time
from ddp_it import *

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s)(?:,%s)*\})? (\S+)( -?\d+)?$" % (NAME, LABEL, LABEL))
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class BadExposition(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise BadExposition(msg)


def parse_exposition(text):
    """{(name, labels): value}; fails on anything the 0.0.4 text format forbids."""
    need(text.endswith("\n"), "exposition does not end with a newline")
    types, helps, samples, done_families = {}, set(), {}, set()
    family = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d %r" % (n, line)
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                need(re.fullmatch(NAME, name), "bad metric name, " + where)
                need(name not in done_families, "family %s split in two, %s" % (name, where))
                if parts[1] == "HELP":
                    need(name not in helps, "second HELP, " + where)
                    need(len(parts) == 4 and parts[3], "empty HELP, " + where)
                    helps.add(name)
                else:
                    need(name not in types, "second TYPE, " + where)
                    need(len(parts) == 4 and parts[3] in TYPES, "bad TYPE, " + where)
                    need(not any(k[0] == name for k in samples), "TYPE after samples, " + where)
                    types[name] = parts[3]
                if family and family != name:
                    done_families.add(family)
                family = name
            continue
        need(line.strip(), "blank line inside the exposition, " + where)
        m = SAMPLE.match(line)
        need(m, "not a sample line, " + where)
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        need(name in types, "sample before its # TYPE, " + where)
        need(name == family, "sample outside its family's block, " + where)
        try:
            v = float(value.replace("Inf", "inf"))
        except ValueError:
            need(False, "bad value, " + where)
        if types[name] == "counter":
            need(name.endswith("_total"), "counter without _total, " + where)
            need(v >= 0 and not math.isnan(v), "negative/NaN counter, " + where)
        need((name, labels) not in samples, "duplicate sample, " + where)
        samples[(name, labels)] = v
    for name in types:
        need(name in helps, "%s has # TYPE but no # HELP" % name)
    return samples, types


def scrape(port):
    url = "http://127.0.0.1:%d/metrics" % port
    if shutil.which("curl"):
        p = subprocess.run(["curl", "-sf", "-D", "-", url], stdout=subprocess.PIPE, text=True, timeout=10)
        if p.returncode != 0:
            return None
        head, _, body = p.stdout.partition("\n\n")  # text mode made CRLF LF
        check("text/plain; version=0.0.4" in head, "Content-Type of /metrics:\n" + head)
        return body
    import urllib.request
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError:
        return None


wd = workdir("metrics-http")
out = os.path.join(wd, "run")
port = free_port()
cmd = eval_cmd("idx:%s/t10k" % FMNIST, out, workers=2, batch=1,
               extra=["--limit", "600", "--metrics-http", "127.0.0.1:%d" % port])
job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
scrapes = []
try:
    deadline = time.time() + 120
    while job.poll() is None and time.time() < deadline and len(scrapes) < 3:
        body = scrape(port)
        if body:
            try:
                samples, types = parse_exposition(body)
            except BadExposition as e:
                fail("invalid exposition: %s\n%s" % (e, body))
            if samples[("ddpipe_samples_processed_total", "")] > 0:
                scrapes.append(samples)
                time.sleep(1.2)
                continue
        time.sleep(0.2)
    outp, _ = job.communicate(timeout=120)
finally:
    if job.poll() is None:
        job.kill()
check(job.returncode == 0, "the job failed:\n" + outp)
check(len(scrapes) >= 2, "only %d scrapes with data during the run (job too fast?)" % len(scrapes))
first, last = scrapes[0], scrapes[-1]
for key in (("ddpipe_samples_processed_total", ""), ("ddpipe_events_total", '{topic="progress"}')):
    check(last[key] > first[key], "%s did not increase: %s -> %s" % (key, first[key], last[key]))
ranks = [k for k in last if k[0] == "ddpipe_worker_samples_total"]
check(len(ranks) == 2 and sum(last[k] for k in ranks) > sum(first.get(k, 0) for k in ranks),
      "per-worker counters %r" % {k: last[k] for k in ranks})
for key in (("ddpipe_images_per_second", ""), ("ddpipe_workers_alive", ""),
            ("ddpipe_failed_images_total", ""), ("ddpipe_epoch", ""),
            ("ddpipe_rejected_messages_total", '{daemon="reducerd"}'),
            ("ddpipe_worker_images_per_second", '{rank="1"}')):
    check(key in last, "%s missing from the scrape" % (key,))
check(last[("ddpipe_workers_alive", "")] == 2, "workers_alive %r" % last[("ddpipe_workers_alive", "")])
print("%d scrapes: samples %d -> %d, format valid" % (
    len(scrapes), first[("ddpipe_samples_processed_total", "")],
    last[("ddpipe_samples_processed_total", "")]), flush=True)

# the parser itself rejects what the format forbids
for bad in ("x 1\n", "# HELP x_total h\n# TYPE x_total counter\nx_total -1\n",
            "# HELP y h\n# TYPE y counter\ny 1\n", "# HELP z h\n# TYPE z gauge\nz{a=b} 1\n",
            "# TYPE w gauge\nw 1\n", "# HELP v h\n# TYPE v gauge\nv 1\n# HELP u h\n# TYPE u gauge\nu 1\nv 2\n"):
    try:
        parse_exposition(bad)
        fail("the exposition parser accepted %r" % bad)
    except BadExposition:
        pass
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
