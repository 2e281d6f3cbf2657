#!/usr/bin/python3
"""Expected ImageFolder index for tests/loaderd/test_dataset.c.

Builds the tree described by tests/golden/loader/imagefolder/tree.txt in a
temporary directory, indexes it with torchvision.datasets.ImageFolder
(torchvision 0.14, Debian's python3-torchvision) and writes expected.txt:
    c INDEX NAME            one line per class, in order
    s INDEX LABEL PATH      one line per sample, PATH relative to the root
Run with /usr/bin/python3.
"""
import os
import tempfile

import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "loader", "imagefolder")


def build(root):
    with open(os.path.join(DIR, "tree.txt"), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            path = os.path.join(root, parts[1])
            if parts[0] == "d":
                os.makedirs(path, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if parts[0] == "f":
                open(path, "wb").close()
            else:
                os.symlink(parts[2], path)


def main():
    with tempfile.TemporaryDirectory() as root:
        build(root)
        ds = torchvision.datasets.ImageFolder(root)
        lines = [f"c {i} {name}" for i, name in enumerate(ds.classes)]
        for i, (path, label) in enumerate(ds.samples):
            lines.append(f"s {i} {label} {os.path.relpath(path, root)}")
    with open(os.path.join(DIR, "expected.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
