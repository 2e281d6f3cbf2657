#!/usr/bin/python3
"""Train the seed WideResNet (channels 16,32,64,128) on Fashion-MNIST with PyTorch CPU, save safetensors.

Made for ddpipe's demo and golden tests: small enough to train in ~5 minutes on 2 CPU threads,
good enough (>= 85 % test top-1) that a wrong kernel in ddpipe shows up as a wrong prediction.

    /usr/bin/python3 demo/train_wrn_fmnist.py            # writes demo/wrn-fmnist.safetensors

Data: the IDX .gz files of Debian's dataset-fashion-mnist, read directly (no torchvision download),
transform = ToTensor only (uint8 / 255, no normalisation), as the seed course's eval.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import idx_io  # noqa: E402
import safetensors_io  # noqa: E402
from seed_models import WideResNet, parse_channels  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def to_tensor(images_u8):
    """ToTensor for grayscale uint8 [N,28,28] -> float [N,1,28,28] in [0,1]."""
    return torch.from_numpy(images_u8).unsqueeze(1).float().div_(255.0)


@torch.no_grad()
def evaluate(model, images, labels, batch=500):
    model.eval()
    correct1 = correct5 = 0
    loss_sum = 0.0
    for i in range(0, len(images), batch):
        logits = model(images[i:i + batch])
        y = labels[i:i + batch]
        loss_sum += F.cross_entropy(logits, y, reduction="sum").double().item()
        top5 = logits.topk(5, dim=1).indices
        correct1 += (top5[:, 0] == y).sum().item()
        correct5 += (top5 == y[:, None]).any(dim=1).sum().item()
    n = len(images)
    return correct1, correct5, loss_sum / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DATA, help="folder with {train,t10k}-*-ubyte.gz")
    ap.add_argument("--channels", default="16,32,64,128")
    ap.add_argument("--steps", type=int, default=469, help="SGD steps (469 x 128 = 1 epoch of 60000)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "wrn-fmnist.safetensors"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    channels = parse_channels(args.channels)

    train_x, train_y, _ = idx_io.load_prefix(os.path.join(args.data, "train"))
    test_x, test_y, _ = idx_io.load_prefix(os.path.join(args.data, "t10k"))
    train_x, test_x = to_tensor(train_x), to_tensor(test_x)
    train_y, test_y = torch.from_numpy(train_y), torch.from_numpy(test_y)

    model = WideResNet(10, channels, in_channels=1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train_x), generator=gen)
    pos = 0
    t0 = time.time()
    model.train()
    for step in range(args.steps):
        if pos + args.batch_size > len(order):  # next epoch: reshuffle, drop the ragged tail
            order, pos = torch.randperm(len(train_x), generator=gen), 0
        idx = order[pos:pos + args.batch_size]
        pos += args.batch_size
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}/{args.steps} loss {loss.item():.4f} {time.time() - t0:6.1f}s", flush=True)
    train_s = time.time() - t0

    c1, c5, mean_loss = evaluate(model, test_x, test_y)
    n = len(test_x)
    print(f"test: samples {n} correct_top1 {c1} correct_top5 {c5} top1 {c1 / n:.4f} loss {mean_loss:.4f}")

    model.eval()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    meta = {
        "format": "pt",
        "arch": "wideresnet",
        "channels": ",".join(str(c) for c in channels),
        "in_channels": "1",
        "num_classes": "10",
        "transform": "ToTensor (x/255), no normalisation, 28x28",
        "dataset": "fashion-mnist (Debian dataset-fashion-mnist IDX)",
        "train": f"SGD lr={args.lr} momentum={args.momentum} batch={args.batch_size} steps={args.steps} "
                 f"seed={args.seed} threads={args.threads} torch={torch.__version__} ({train_s:.0f}s)",
        "test_samples": str(n),
        "test_correct_top1": str(c1),
        "test_correct_top5": str(c5),
        "test_top1": f"{c1 / n:.4f}",
        "test_loss": f"{mean_loss:.6f}",
    }
    safetensors_io.save(state, args.out, meta)
    print(f"wrote {args.out} ({len(state)} tensors)")


if __name__ == "__main__":
    main()
