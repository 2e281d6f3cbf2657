#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer of a small `ddpipe train` job
(bench/train_pipeline.sh runs both in the same run).

W processes (gloo over 127.0.0.1, one compute thread each, as ddpipe's
workers with --threads 1) train the seed WideResNet (scripts/seed_models.py)
on the first LIMIT Fashion-MNIST training images: DistributedSampler
(shuffle, seed), BATCH per rank, ToTensor only (x/255), CrossEntropyLoss,
SGD(lr, momentum 0.9), BatchNorm per rank (DDP's default, as ddpipe without
--sync-bn), the data already in memory (a TensorDataset: PyTorch's best
case; ddpipe's loaderd reads and ships every sample). After each epoch rank 0
evaluates the t10k set (not timed).

  /usr/bin/python3 bench/train_ddp_torch.py --data DIR [--workers 2] [--limit 12000]
        [--batch 64] [--epochs 3] [--lr 0.05] [--channels 16,32,64,128] [--seed 0] [--t-max T]
        [--init FILE]
  /usr/bin/python3 bench/train_ddp_torch.py --save-init FILE [--channels C] [--seed 0]

--save-init writes the seeded initial state_dict (PyTorch's default init)
and exits; --init starts from such a file, so ddpipe (`--weights FILE`) and
every peer train from the same weights.

Prints per epoch "epoch E train img/s X val top1 T" and a last line
"torch-ddp train img/s=X (last epoch) top1=T".

Runs under both PyTorch peers (bench/peers.sh): Debian's 1.13 (/usr/bin/python3)
and 2.15 (bench/.peers/torch-2.15/bin/python, bench/setup-peers.sh).
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import idx_io  # noqa: E402
import safetensors_io  # noqa: E402
import seed_models  # noqa: E402


def tensors(prefix, limit=None):
    images, labels, _ = idx_io.load_prefix(prefix)
    x = torch.tensor(images[:limit] if limit else images, dtype=torch.uint8)
    y = torch.tensor(labels[:limit] if limit else labels, dtype=torch.int64)
    return x.view(x.shape[0], 1, x.shape[-2], x.shape[-1]), y


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 500):
            out = model(x[i:i + 500].float() / 255)
            correct += int((out.argmax(1) == y[i:i + 500]).sum())
    model.train()
    return correct / x.shape[0]


def seeded_net(a):
    """The seed WideResNet with PyTorch's default init drawn from a.seed."""
    torch.manual_seed(a.seed)
    return seed_models.build("wideresnet", seed_models.parse_channels(a.channels), 10, 1)


def worker(rank, a, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.workers)
    net = seeded_net(a)
    if a.init:   # the same initial weights as the other side (train_pipeline.sh)
        net.load_state_dict(safetensors_io.load(a.init))
    model = nn.parallel.DistributedDataParallel(net)
    x, y = tensors(os.path.join(a.data, "train"), a.limit)
    ds = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, a.workers, rank, shuffle=True,
                                                              seed=a.seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # ddpipe's --lr-schedule cosine --t-max T: CosineAnnealingLR stepped once an epoch
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, a.t_max) if a.t_max else None
    loss_fn = nn.CrossEntropyLoss()
    vx, vy = tensors(os.path.join(a.data, "t10k")) if rank == 0 else (None, None)
    rate = top1 = 0.0
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        dist.barrier()
        t0, seen = time.monotonic(), 0
        for xb, yb in dl:
            opt.zero_grad()
            loss = loss_fn(model(xb.float() / 255), yb)
            loss.backward()
            opt.step()
            seen += xb.shape[0]
        dist.barrier()
        rate = seen * a.workers / (time.monotonic() - t0)
        if sched:
            sched.step()
        if rank == 0:
            top1 = evaluate(model.module, vx, vy)
            print("epoch %d train img/s %.1f val top1 %.4f" % (epoch + 1, rate, top1), flush=True)
    if rank == 0:
        print("torch-ddp train img/s=%.1f (last epoch) top1=%.4f" % (rate, top1), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=12000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--channels", default="16,32,64,128")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--t-max", type=int, default=0,
                    help="a cosine schedule over T epochs (CosineAnnealingLR); 0: constant lr")
    ap.add_argument("--init", help="initial weights (safetensors) instead of the seeded init")
    ap.add_argument("--save-init", metavar="FILE",
                    help="write the seeded initial weights to FILE and exit")
    a = ap.parse_args()
    if a.save_init:
        safetensors_io.save(seeded_net(a).state_dict(), a.save_init)
        return
    with socket.socket() as s:   # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a, port), nprocs=a.workers, join=True)


if __name__ == "__main__":
    main()
