#!/usr/bin/python3
"""ResNet-18 training-step throughput of PyTorch on CPU, the peer of
train_resnet18.c: uint8 batches -> ToTensor/Normalize arithmetic ->
torchvision resnet18 in train mode -> CrossEntropyLoss -> backward ->
torch.optim.SGD(lr=0.01).step(), torch.set_num_threads(THREADS).

  /usr/bin/python3 bench/train_resnet18_torch.py [--batch 32] [--threads 2]
                                                 [--iters 3] [--warmup 1] [--bf16]

--bf16: the model and input in channels_last, the forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (compute only, as ddpipe's bf16).

Prints one line: "torch resnet18-train img/s=X ...".

Runs under both PyTorch peers (bench/peers.sh): Debian's 1.13 (/usr/bin/python3)
and 2.15 (bench/.peers/torch-2.15/bin/python, bench/setup-peers.sh).
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--channels-last", action="store_true",
                    help="fp32 in channels_last (PyTorch's other fp32 layout; --bf16 implies it)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).train()
    cl = a.bf16 or a.channels_last
    if cl:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    px = torch.randint(0, 256, (a.batch, 3, a.size, a.size), dtype=torch.uint8, generator=g)
    labels = torch.tensor([i * 7919 % 1000 for i in range(a.batch)])
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    lossf = torch.nn.CrossEntropyLoss()
    total, best, cpu, first = 0.0, 1e30, 0.0, 0.0
    for it in range(a.warmup + a.iters):
        t0, c0 = time.perf_counter(), time.process_time()
        x = (px.float().div(255) - mean) / std
        opt.zero_grad(set_to_none=True)
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = lossf(model(x), labels)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if it == 0:
            first = dt
        if it >= a.warmup:
            cpu += time.process_time() - c0
            total += dt
            best = min(best, dt)
    print("torch resnet18-train img/s=%.2f best_img/s=%.2f batch=%d threads=%d iters=%d size=%d "
          "first_step_s=%.2f torch=%s cpu_ms/img=%.1f last_loss=%.3f precision=%s" % (
              a.batch * a.iters / total, a.batch / best, a.batch, a.threads, a.iters, a.size,
              first, torch.__version__, 1e3 * cpu / (a.batch * a.iters), loss.item(),
              "bf16-autocast+channels_last" if a.bf16 else
              "fp32+channels_last" if cl else "fp32"))


if __name__ == "__main__":
    main()
