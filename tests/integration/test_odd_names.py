"""File names with a newline, raw non-UTF-8 bytes and '%' (issue 28 item 8).

An ImageFolder of 20 Fashion-MNIST JPEGs plus: a good JPEG named
"new<LF>line.jpg", one named with the bytes 0xff 0xfe, one "50%.jpg", and a
corrupt file named "bad<LF>name<0xff>.jpg" (so loaderd logs it as failed, and
summary.json's failed_files names it as predictions.csv does).
Checked: predictions.csv is valid UTF-8 with one row per sample; a path
keeps valid UTF-8 as it is and percent-encodes '%' and each byte that is
not UTF-8 (urllib.parse.unquote_to_bytes gives the name's bytes back),
plain names are unchanged; every line of every daemon log in the run
directory, and of the console, is a whole log line (the newline is
escaped as \\n, the raw byte as \\xff), and loaderd's log names the corrupt
file so escaped.
"""
import csv
import io
import os
import re
import shutil
from urllib.parse import unquote_to_bytes
from ddp_it import *

src = jpeg_folder(200)
wd = workdir("odd-names")
data = os.path.join(wd, "data")
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
plain = []
for c in classes:
    os.makedirs(os.path.join(data, c))
    for f in sorted(os.listdir(os.path.join(src, c)))[:2]:
        shutil.copy(os.path.join(src, c, f), os.path.join(data, c, f))
        plain.append(c + "/" + f)
a_jpeg = read(os.path.join(src, classes[0], sorted(os.listdir(os.path.join(src, classes[0])))[0]), "rb")
odd = {   # relative name (bytes) -> (content, the predictions.csv path)
    classes[0].encode() + b"/new\nline.jpg": (a_jpeg, classes[0] + "/new\nline.jpg"),
    classes[1].encode() + b"/\xff\xfe-raw.jpg": (a_jpeg, classes[1] + "/%FF%FE-raw.jpg"),
    classes[2].encode() + b"/50%.jpg": (a_jpeg, classes[2] + "/50%25.jpg"),
    classes[3].encode() + b"/bad\nname\xff.jpg": (b"not a jpeg\n" * 20, classes[3] + "/bad\nname%FF.jpg"),
}
for rel, (blob, _) in odd.items():
    with open(os.path.join(os.fsencode(data), rel), "wb") as f:
        f.write(blob)
n = len(plain) + len(odd)

out = os.path.join(wd, "run")
p = run_eval(data, out, 1, 8, extra=["--predictions", "topk"])
s = summary(out)
check(s["planned"] == n and s["failed"] == 1, "planned %s failed %s, want %d, 1" % (s["planned"], s["failed"], n))
bad_path = odd[classes[3].encode() + b"/bad\nname\xff.jpg"][1]
ff = s.get("failed_files") or [{}]
check(len(ff) == 1 and str(ff[0].get("path")).endswith(bad_path),
      "summary.json failed_files %r: want the corrupt file's path as predictions.csv writes it (%r)"
      % (ff, bad_path))

raw = read(os.path.join(out, "predictions.csv"), "rb")
try:
    text = raw.decode("utf-8")
except UnicodeDecodeError as e:
    fail("predictions.csv is not valid UTF-8: %s" % e)
rows = list(csv.DictReader(io.StringIO(text, newline="")))
check(len(rows) == n, "predictions.csv has %d rows, want %d" % (len(rows), n))
paths = {r["path"] for r in rows}
for rel, (_, want) in odd.items():
    check(want in paths, "predictions.csv lacks the path %r (of %r); has %r" % (want, rel, sorted(paths - set(plain))))
    check(unquote_to_bytes(want) == rel, "%r does not decode back to %r" % (want, rel))
check(set(plain) <= paths, "plain names changed: %r" % sorted(set(plain) - paths))
print("predictions.csv: valid UTF-8, %d rows, odd names percent-encoded, plain ones unchanged" % n, flush=True)

# every line a whole log line: a timestamp, a daemon, a level
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [a-z]+(\.\d+)?(\[\d+\])? (ERROR|WARN|INFO|DEBUG) ")
logs = os.path.join(out, "logs")
for name in sorted(os.listdir(logs)):
    for line in read(os.path.join(logs, name), "rb").decode("utf-8", errors="replace").splitlines():
        check(LINE.match(line), "%s: a line that is not a whole log line: %r" % (name, line))
console = [l for l in p.stderr.splitlines() if l.strip()]
for line in console:
    check(not line.startswith(("line.jpg", "name")), "console line split by a file name: %r" % line)
loader = read(os.path.join(logs, "loaderd.log"), "rb").decode("utf-8")
check("bad\\nname\\xff.jpg" in loader, "loaderd.log does not name the corrupt file escaped:\n%s" % loader)
print("logs: every line whole; loaderd names %s" % "bad\\nname\\xff.jpg", flush=True)
print("PASS")
