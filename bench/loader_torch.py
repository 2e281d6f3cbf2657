#!/usr/bin/python3
"""torchvision's eval loader on the same images as loader_bench, same thread count.

ImageFolder + DataLoader(num_workers=T, batch_size=B) with Resize(R),
CenterCrop(C), PILToTensor() (uint8, like ddpipe's batches; normalisation
is not part of either). One warm-up epoch with persistent workers, then E
timed epochs; the CPU time counts the main process and the workers. Run with /usr/bin/python3 (Debian's torch/torchvision).
"""
import argparse
import os
import time

import torch
import torchvision
from torchvision import transforms as T


def cpu_seconds(pids):
    """user + system CPU seconds of these processes, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--resize", type=int, default=256)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tf = T.Compose([T.Resize(a.resize), T.CenterCrop(a.crop), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(a.data, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.threads,
                                     shuffle=False, persistent_workers=a.threads > 0)
    checksum = 0
    for x, _ in dl:  # warm-up: worker start, page cache
        checksum += int(x[:, :, ::7, ::7].sum())
    it = dl._iterator  # persistent: the same worker processes serve every epoch
    pids = [os.getpid()] + ([w.pid for w in it._workers] if a.threads > 0 else [])
    t0, c0 = time.monotonic(), cpu_seconds(pids)
    for _ in range(a.epochs):
        for x, _ in dl:
            checksum += int(x[:, :, ::7, ::7].sum())
    dt, cpu = time.monotonic() - t0, cpu_seconds(pids) - c0
    n = len(ds) * a.epochs
    print(f"torchvision loader: {len(ds)} images x {a.epochs} epochs, {a.threads} workers, "
          f"batch {a.batch}, {a.crop}x{a.crop}: {n / dt:.1f} img/s, "
          f"{cpu / n * 1e3:.2f} CPU ms/img (checksum {checksum})")


if __name__ == "__main__":
    main()
