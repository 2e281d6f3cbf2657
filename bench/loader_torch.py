#!/usr/bin/python3
"""torchvision's eval loader on the same images as loader_bench, same thread count.

ImageFolder + DataLoader(num_workers=T, batch_size=B) with Resize(R),
CenterCrop(C) and then either
  --to uint8   PILToTensor(): uint8 CHW, the same bytes as ddpipe's batches;
  --to float   ToTensor(), Normalize(ImageNet mean/std): the standard
               torchvision eval transform, float32 batches, i.e. what a
               PyTorch user's DataLoader hands the model (ddpipe hands uint8
               and gpud normalises on the device).
One warm-up epoch with persistent workers, then E timed epochs; the CPU time
counts the main process and the workers. The checksum (every 7th row and
column) equals loader_bench's for uint8; for float it is taken on the
un-normalised uint8 value round(255 * (x * std + mean)), so it still shows
the same pixels. Runs under both PyTorch peers (bench/peers.sh): Debian's
torch 1.13 / torchvision 0.14 (/usr/bin/python3) and 2.15 / 0.29
(bench/.peers/torch-2.15/bin/python, bench/setup-peers.sh).
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
    ap.add_argument("--to", choices=["uint8", "float"], default="uint8")
    a = ap.parse_args()
    torch.set_num_threads(1)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    last = [T.PILToTensor()] if a.to == "uint8" else [T.ToTensor(), T.Normalize(mean, std)]
    tf = T.Compose([T.Resize(a.resize), T.CenterCrop(a.crop)] + last)
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)

    def pixels(x):
        """every 7th row/column as the uint8 values the batch came from"""
        x = x[:, :, ::7, ::7]
        if a.to == "float":
            x = torch.round((x * s + m) * 255)
        return int(x.to(torch.int64).sum())

    ds = torchvision.datasets.ImageFolder(a.data, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.threads,
                                     shuffle=False, persistent_workers=a.threads > 0)
    checksum = 0
    for x, _ in dl:  # warm-up: worker start, page cache
        checksum += pixels(x)
    it = dl._iterator  # persistent: the same worker processes serve every epoch
    pids = [os.getpid()] + ([w.pid for w in it._workers] if a.threads > 0 else [])
    t0, c0 = time.monotonic(), cpu_seconds(pids)
    for _ in range(a.epochs):
        for x, _ in dl:
            checksum += pixels(x)
    dt, cpu = time.monotonic() - t0, cpu_seconds(pids) - c0
    n = len(ds) * a.epochs
    print(f"torchvision loader ({a.to}): {len(ds)} images x {a.epochs} epochs, {a.threads} workers, "
          f"batch {a.batch}, {a.crop}x{a.crop}: {n / dt:.1f} img/s, "
          f"{cpu / n * 1e3:.2f} CPU ms/img (checksum {checksum})")


if __name__ == "__main__":
    main()
