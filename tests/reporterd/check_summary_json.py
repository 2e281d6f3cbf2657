"""summary.json is valid JSON with exactly the documented keys, in order."""
import json
import sys

KEYS = ["epoch", "phase", "planned", "samples", "failed", "duplicates_ignored",
        "rejected_messages", "correct_top1", "correct_top5", "top1", "top5", "loss", "nonfinite_loss",
        "macro_f1", "weighted_f1",
        "per_class", "failed_files", "workers", "images_per_sec", "wall_seconds",
        "first_result_seconds", "steady_images_per_sec"]

with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
if list(d.keys()) != KEYS:
    sys.exit("keys differ: %s" % list(d.keys()))
for c in d["per_class"]:
    if list(c.keys()) != ["name", "precision", "recall", "f1", "support"]:
        sys.exit("per_class keys differ: %s" % list(c.keys()))
for ff in d["failed_files"]:
    if list(ff.keys()) != ["index", "path", "reason"]:
        sys.exit("failed_files keys differ: %s" % list(ff.keys()))
if d["per_class"][2]["name"] != "p\u00e2t\u00e9" or d["per_class"][1]["name"] != 'dog "big"':
    sys.exit("names not round-tripped: %s" % [c["name"] for c in d["per_class"]])
if d["failed_files"][0]["path"] != 'x"y\n.png' or d["failed_files"][0]["reason"] is not None:
    sys.exit("failed_files not round-tripped: %s" % d["failed_files"])
if d["top1"] != 8 / 12 or d["samples"] != 12 or d["failed"] != 2:
    sys.exit("values differ: top1 %r samples %r failed %r" % (d["top1"], d["samples"], d["failed"]))
print("summary.json ok")
