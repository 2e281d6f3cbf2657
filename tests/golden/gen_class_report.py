#!/usr/bin/python3
"""Golden files for reporterd's classification report and per-class metrics.

For each case, writes tests/golden/class_report/CASE.in (class names, the
confusion matrix [true][pred], and sklearn's averages as Python float reprs)
and CASE.txt (sklearn.metrics.classification_report text). The C test
rebuilds the report from the confusion alone and compares byte for byte.

Run with Debian's python (sklearn): /usr/bin/python3 tests/golden/gen_class_report.py
"""
import os
import random

import numpy as np
from sklearn.metrics import (classification_report, confusion_matrix,
                             f1_score, precision_recall_fscore_support)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "class_report")


def noisy(rng, n, nc, acc, true_classes=None, pred_classes=None):
    true_classes = true_classes if true_classes is not None else list(range(nc))
    pred_classes = pred_classes if pred_classes is not None else list(range(nc))
    y_true = [rng.choice(true_classes) for _ in range(n)]
    y_pred = [t if (rng.random() < acc and t in pred_classes) else rng.choice(pred_classes)
              for t in y_true]
    return y_true, y_pred


def cases():
    rng = random.Random(20240501)
    fmnist = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
              "Shirt", "Sneaker", "Bag", "Ankle boot"]
    yt, yp = noisy(rng, 1000, 10, 0.9)
    yield "fmnist", fmnist, yt, yp
    # class 2 is never predicted
    yt, yp = noisy(rng, 60, 3, 0.5, pred_classes=[0, 1])
    yield "never_predicted", ["cat", "dog", "bird"], yt, yp
    # class 3 has no support but is predicted
    yt, yp = noisy(rng, 80, 4, 0.6, true_classes=[0, 1, 2])
    yield "no_support", ["a", "b", "c", "d"], yt, yp
    # class 1 has neither support nor predictions: sklearn prints "micro avg"
    yt, yp = noisy(rng, 50, 3, 0.7, true_classes=[0, 2], pred_classes=[0, 2])
    yield "absent_class", ["zero", "one", "two"], yt, yp
    names = ["n01440764 tench, Tinca tinca", "goldfish", "pâté de campagne", "x"]
    yt, yp = noisy(rng, 200, 4, 0.75)
    yield "long_names", names, yt, yp
    yt, yp = noisy(rng, 37, 2, 0.8)
    yield "binary", ["neg", "pos"], yt, yp
    # more than 128 classes: numpy's pairwise summation splits the sum
    yt, yp = noisy(rng, 3000, 150, 0.6)
    yield "many_classes", ["class_%03d" % c for c in range(150)], yt, yp
    # no target names: sklearn prints the label numbers
    yt, yp = noisy(rng, 30, 5, 0.5)
    yield "numbered", None, yt, yp


def r(x):
    return repr(float(x))


def main():
    os.makedirs(HERE, exist_ok=True)
    for name, names, yt, yp in cases():
        nc = len(names) if names else max(yt + yp) + 1
        labels = list(range(nc))
        text = classification_report(yt, yp, labels=labels, target_names=names, digits=2,
                                     zero_division=0)
        cm = confusion_matrix(yt, yp, labels=labels)
        lines = ["nc %d" % nc]
        lines += ["name %s" % n for n in (names or [])]
        lines += ["row " + " ".join(str(int(v)) for v in row) for row in cm]
        for avg in ("macro", "weighted", "micro"):
            p, rc, f, _ = precision_recall_fscore_support(yt, yp, labels=labels, average=avg,
                                                          zero_division=0)
            lines += ["%s %s %s %s" % (avg, r(p), r(rc), r(f))]
        p, rc, f, s = precision_recall_fscore_support(yt, yp, labels=labels, average=None,
                                                      zero_division=0)
        for c in range(nc):
            lines += ["class %d %s %s %s %d" % (c, r(p[c]), r(rc[c]), r(f[c]), s[c])]
        assert f1_score(yt, yp, labels=labels, average="macro", zero_division=0) == \
            precision_recall_fscore_support(yt, yp, labels=labels, average="macro",
                                            zero_division=0)[2]
        with open(os.path.join(HERE, name + ".in"), "w", encoding="utf-8") as f_in:
            f_in.write("\n".join(lines) + "\n")
        with open(os.path.join(HERE, name + ".txt"), "w", encoding="utf-8") as f_txt:
            f_txt.write(text)


if __name__ == "__main__":
    main()
