#!/usr/bin/python3
"""Fashion-MNIST training curve of PyTorch on CPU, the reference for
bench/train_fmnist.c (bench/run_train_fmnist.sh runs both). Runs under both PyTorch peers (bench/peers.sh): Debian's 1.13 (/usr/bin/python3)
and 2.15 (bench/.peers/torch-2.15/bin/python, bench/setup-peers.sh).

Builds the seed WideResNet (scripts/seed_models.py, channels 8,16,32,64) with
torch.manual_seed(SEED), writes into OUTDIR
  init.safetensors   its initial state_dict (what train_fmnist loads)
  order.u32          the data order: a permutation of the first STEPS*BATCH
                     training images (little-endian u32, fixed seed)
then trains STEPS steps: ToTensor only (x/255), batch BATCH in that order,
CrossEntropyLoss, SGD(lr, momentum 0.9, no weight decay), BatchNorm in
training mode, dropout OFF (its Dropout modules in eval mode: ddpipe's
dropout draws from another RNG, so both sides switch it off). Then top-1 on
the first TEST t10k images in eval mode.

  /usr/bin/python3 bench/train_fmnist_torch.py --outdir DIR [--steps 200]
        [--batch 64] [--lr 0.05] [--threads 2] [--test 2000] [--seed 0]
        [--perturb EPS]

--perturb EPS scales every initial weight by (1 + EPS) after saving them: a
noise reference (PyTorch against itself) for how far a few float32 ulps at
the start move the curve.

Prints "step K loss L" per step (the batch's mean loss), then one line
"torch fmnist-train img/s=X top1=T ..." (img/s over steps 2..STEPS).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import idx_io  # noqa: E402
import safetensors_io  # noqa: E402
from seed_models import WideResNet  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--channels", default="8,16,32,64")
    ap.add_argument("--perturb", type=float, default=0.0)
    return ap.parse_args()


def write_inputs(a, model, ntrain):
    """The initial weights and the data order, for train_fmnist."""
    os.makedirs(a.outdir, exist_ok=True)
    safetensors_io.save(model.state_dict(), os.path.join(a.outdir, "init.safetensors"))
    n = a.steps * a.batch
    if n > ntrain:
        sys.exit(f"train_fmnist_torch: {a.steps} steps x {a.batch} need {n} images, "
                 f"the training set has {ntrain}")
    order = np.random.default_rng(a.seed).permutation(n).astype("<u4")
    order.tofile(os.path.join(a.outdir, "order.u32"))
    return order


def test_top1(model, images, labels):
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(images).unsqueeze(1).float().div(255)
        pred = model(x).argmax(1)
    return (pred == torch.from_numpy(labels)).float().mean().item()


def main():
    a = parse()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    chans = tuple(int(c) for c in a.channels.split(","))
    model = WideResNet(10, chans, 1)
    train_x, train_y, _ = idx_io.load_prefix(os.path.join(a.data, "train"))
    test_x, test_y, _ = idx_io.load_prefix(os.path.join(a.data, "t10k"))
    order = write_inputs(a, model, len(train_x))
    if a.perturb:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + a.perturb)
    model.train()
    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.eval()   # dropout off; BatchNorm stays in training mode
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    timed, first = 0.0, 0.0
    for k in range(a.steps):
        idx = order[k * a.batch:(k + 1) * a.batch].astype(np.int64)
        t0 = time.perf_counter()
        x = torch.from_numpy(train_x[idx]).unsqueeze(1).float().div(255)
        y = torch.from_numpy(train_y[idx])
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if k == 0:
            first = dt
        else:
            timed += dt
        print("step %d loss %.7f" % (k + 1, loss.item()), flush=True)
    top1 = test_top1(model, test_x[:a.test], test_y[:a.test])
    ips = a.batch * (a.steps - 1) / timed if a.steps > 1 else float("nan")
    print("torch fmnist-train img/s=%.2f top1=%.4f steps=%d batch=%d threads=%d test=%d "
          "first_step_s=%.3f torch=%s" % (ips, top1, a.steps, a.batch, a.threads, a.test, first,
                                         torch.__version__), flush=True)


if __name__ == "__main__":
    main()
