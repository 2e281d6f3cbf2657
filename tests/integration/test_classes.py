"""ddpipe eval --classes (issue 15 item 2): an ImageFolder of Fashion-MNIST
JPEGs whose folders carry synset-like names, mapped onto the 10-class demo
WideResNet by a LOC_synset_mapping.txt-style file. A dataset of 4 of the 10
folders is evaluated against the full model output: every sample's top-5
and loss equal the full run's for those samples, the report
(classification_report.txt, summary.json per_class) covers exactly the 4
classes with their labels and equals sklearn's
classification_report(labels=the 4). The 'folder index label' form and
--classes numeric give the same predictions; every wrong value is a
one-line error naming the flag (and the file and line), exit code 2."""
import csv
import os
import shutil
import subprocess
from ddp_it import *

wd = workdir("classes")
base = jpeg_folder(200)
folders = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
check(len(folders) == 10, "fmnist folder has %d classes" % len(folders))
# synset-like names whose sorted order is NOT the model's (reversed): with
# a folder-position label every sample would be wrong
syn = ["n%08d" % (1000 + 7 * (9 - i)) for i in range(10)]
labels = ["%s, class %d" % (f[3:].replace("_", "/"), i) for i, f in enumerate(folders)]
SUBSET = [1, 3, 6, 8]


def make_set(name, names, which):
    d = os.path.join(wd, name)
    os.makedirs(d)
    for i in which:
        os.symlink(os.path.join(base, folders[i]), os.path.join(d, names[i]))
    return d


def preds(out):
    with open(os.path.join(out, "predictions.csv")) as f:
        return {os.path.basename(r["path"]): r for r in csv.DictReader(f)}


def eval_rc(data, out, extra, model=None):
    p = subprocess.run(eval_cmd(data, out, 1, 32, extra, model), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=180)
    return p.returncode, p.stderr


# 1. the reference: every folder, model order (00-..09- sort as the model's classes)
full_out = os.path.join(wd, "full")
run_eval(base, full_out, 1, 32, extra=["--predictions", "topk"])
full = preds(full_out)

# 2. the synset names, LOC_synset_mapping.txt form, 4 of the 10 folders
mapping = os.path.join(wd, "LOC_synset_mapping.txt")
with open(mapping, "w") as f:
    f.write("".join("%s %s\n" % (syn[i], labels[i]) for i in range(10)))
sub = make_set("subset", syn, SUBSET)
sub_out = os.path.join(wd, "sub")
run_eval(sub, sub_out, 1, 32, extra=["--predictions", "topk", "--classes", mapping])
got = preds(sub_out)
want = {k: r for k, r in full.items() if int(r["label"]) in SUBSET}
check(len(got) == len(want) > 0, "%d predictions, want %d" % (len(got), len(want)))
cols = ["label", "top1", "top2", "top3", "top4", "top5", "loss"]
diff = [k for k in want if k not in got or [got[k][c] for c in cols] != [want[k][c] for c in cols]]
check(not diff, "subset predictions differ from the full run's at %s" % diff[:5])
outside = sum(1 for r in got.values() if int(r["top1"]) not in SUBSET)
print("subset: %d samples, predictions equal the full run's; %d top-1 outside the 4 classes" %
      (len(got), outside), flush=True)

s = summary(sub_out)
names = [c["name"] for c in s["per_class"]]
check(names == [labels[i] for i in SUBSET], "per_class names %r" % names)
check(s["samples"] == len(want), "summary samples %s" % s["samples"])
top1 = sum(1 for r in got.values() if r["top1"] == r["label"])
check(s["correct_top1"] == top1, "correct_top1 %s, predictions say %d" % (s["correct_top1"], top1))
report = read(os.path.join(sub_out, "classification_report.txt"))
for i in range(10):
    check((labels[i] in report) == (i in SUBSET), "report and class %d (%s):\n%s" % (i, labels[i], report))
try:
    from sklearn.metrics import classification_report
except ImportError:
    classification_report = None
    print("sklearn not importable here: report comparison skipped", flush=True)
if classification_report:
    rows = list(got.values())
    sk = classification_report([int(r["label"]) for r in rows], [int(r["top1"]) for r in rows],
                               labels=SUBSET, target_names=[labels[i] for i in SUBSET], digits=2,
                               zero_division=0)
    check(report.rstrip("\n") == sk.rstrip("\n"),
          "classification_report.txt differs from sklearn's:\n%s\n--- sklearn:\n%s" % (report, sk))
    print("classification_report.txt == sklearn's (labels = the 4 classes)", flush=True)
for plot in ("confusion.png", "f1.png"):
    check(os.path.getsize(os.path.join(sub_out, plot)) > 0, plot)

# 3. the 'folder index label' form and --classes numeric: the same predictions
indexed = os.path.join(wd, "indexed.txt")
with open(indexed, "w") as f:
    f.write("".join("%s %d %s\n" % (syn[i], i, labels[i]) for i in SUBSET))
idx_out = os.path.join(wd, "indexed")
run_eval(sub, idx_out, 1, 32, extra=["--predictions", "topk", "--classes", indexed])
check(preds(idx_out) == got, "'folder index label' predictions differ")
num = make_set("numeric", [str(i) for i in range(10)], SUBSET)
num_out = os.path.join(wd, "num")
run_eval(num, num_out, 1, 32, extra=["--predictions", "topk", "--classes", "numeric"])
np_ = preds(num_out)
check({k: [r[c] for c in cols] for k, r in np_.items()} == {k: [r[c] for c in cols] for k, r in got.items()},
      "--classes numeric predictions differ")
check([c["name"] for c in summary(num_out)["per_class"]] == [str(i) for i in SUBSET],
      "numeric per_class names")
print("'folder index label' and numeric: same predictions", flush=True)

# 4. wrong values: one line, the flag, exit 2, nothing started
bad_lines = os.path.join(wd, "bad.txt")
with open(bad_lines, "w") as f:
    f.write("%s 1\n%s three\n" % (syn[1], syn[3]))
short = os.path.join(wd, "short.txt")
with open(short, "w") as f:
    f.write("%s 1\n" % syn[1])
cases = [
    (sub, [], ["the model has 10 outputs", "4 classes", "--classes FILE", "--classes numeric"]),
    (sub, ["--classes", os.path.join(wd, "missing.txt")], ["--classes", "missing.txt", "No such file"]),
    (sub, ["--classes", bad_lines], ["--classes", "bad.txt:2:", "folder index [label]"]),
    (sub, ["--classes", short], ["--classes", "short.txt", "no line maps folder '%s'" % min(syn[i] for i in SUBSET[1:])]),
    (sub, ["--classes", "numeric"], ["--classes numeric", "is not a number"]),
    (sub, ["--model", "resnet101"], ["--model resnet101", "resnet18, resnet34, resnet50, densenet121"]),
]
for n, (data, extra, words) in enumerate(cases):
    out = os.path.join(wd, "bad%d" % n)
    rc, err = eval_rc(data, out, extra)
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and all(w in err for w in words),
          "%s: exit %d, stderr %r, want one line with %r" % (extra, rc, err, words))
    check(not os.path.exists(os.path.join(out, "logs")), "%s: daemons started" % extra)
print("wrong values: one-line errors, exit 2", flush=True)

# 5. every model ddpipe models lists is one eval accepts
p = subprocess.run([os.path.join(BIN, "ddpipe"), "models", "--json"], stdout=subprocess.PIPE,
                   text=True, check=True)
listed = [json.loads(line)["name"] for line in p.stdout.splitlines()]
check(sorted(listed) == sorted(["resnet18", "resnet34", "resnet50", "densenet121", "wideresnet"]),
      "ddpipe models lists %r" % listed)
for m in listed:
    rc, err = eval_rc(sub, os.path.join(wd, "m-" + m), [], ["--model", m, "--weights", "/nonexistent.st"])
    check(rc == 2 and "not known" not in err and "/nonexistent.st" in err, "%s: %d %r" % (m, rc, err))
# 6. ddpipe train --classes: train and --val mapped the same way; the
# validation report covers the 4 classes (from scratch: the 10-output head)
tr_out = os.path.join(wd, "train")
run_train(sub, tr_out, 1, extra=["--classes", mapping, "--epochs", "1", "--batch-size", "16"],
          val=sub)
ts = summary(tr_out)
check([c["name"] for c in ts["per_class"]] == [labels[i] for i in SUBSET],
      "train: validation per_class %r" % [c["name"] for c in ts["per_class"]])
check(ts["samples"] == len(want), "train: %s validation samples" % ts["samples"])
rc, err = subprocess.run(train_cmd(sub, os.path.join(wd, "train-bad"), 1,
                                   extra=["--classes", short, "--epochs", "1"], val=sub),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).returncode, None
check(rc == 2, "train --classes with a short map: exit %d" % rc)
print("ddpipe train --classes: validation report of the 4 classes", flush=True)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
