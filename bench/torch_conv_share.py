#!/usr/bin/python3
"""Where PyTorch's own training step goes: the share of its convolutions.

Issue 14 asks for ratios over PyTorch's best configuration; where ddpipe
misses one, this tells the limit. If PyTorch spends C ms of its T ms step in
convolution kernels and ddpipe's convolutions cannot be faster than the
oneDNN kernels it has, ddpipe's step is at least its own convolution time,
so the best ratio it can reach is T / (its conv ms) whatever else it fuses.

  /usr/bin/python3 bench/torch_conv_share.py --model resnet18 --bf16 --threads 16
  /usr/bin/python3 bench/torch_conv_share.py --model wideresnet --size 28 \
          --batch 64 --threads 1 --channels 16,32,64,128

resnet18: torchvision's, 3x224x224 random uint8 -> Normalize; --bf16:
channels_last + torch.autocast("cpu", bfloat16) (PyTorch's best CPU setup).
wideresnet: the seed model (scripts/seed_models.py), 1x28x28, x/255.
Step: forward, CrossEntropyLoss, backward, SGD(lr 0.01, momentum 0.9).
Profiles --iters steps after --warmup with torch.profiler (CPU) and prints
one line: "torch conv-share step_ms=T conv_ms=C share=S ..." where conv
counts the self time of every op whose name has "conv" (forward kernels,
convolution_backward and its autograd node) and step_ms is wall time per
step without the profiler (timed separately, same steps).

Runs under both PyTorch peers (bench/peers.sh): Debian's 1.13 (/usr/bin/python3)
and 2.15 (bench/.peers/torch-2.15/bin/python, bench/setup-peers.sh).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # 2.15 CUDA build: no profiler chatter on stderr
import torch  # noqa: E402
import torchvision  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import seed_models  # noqa: E402


def build(a):
    if a.model == "resnet18":
        return torchvision.models.resnet18(weights=None), 3, 1000
    chans = seed_models.parse_channels(a.channels)
    return seed_models.build("wideresnet", chans, 10, 1), 1, 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["resnet18", "wideresnet"], default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--channels", default="16,32,64,128")
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, cin, classes = build(a)
    model.train()
    if a.bf16:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    px = torch.randint(0, 256, (a.batch, cin, a.size, a.size), dtype=torch.uint8, generator=g)
    labels = torch.tensor([i * 7919 % classes for i in range(a.batch)])
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        x = px.float().div(255)
        if a.bf16:
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = lossf(model(x), labels)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    step_ms = (time.perf_counter() - t0) * 1000 / a.iters
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(a.iters):
            step()
    total = conv = 0.0
    for e in prof.key_averages():
        total += e.self_cpu_time_total
        if "conv" in e.key.lower():
            conv += e.self_cpu_time_total
    share = conv / total if total else 0.0
    prof_step_ms = total / 1000 / a.iters
    print("torch conv-share model=%s bf16=%d threads=%d batch=%d step_ms=%.1f "
          "profiled_ms=%.1f conv_ms=%.1f share=%.3f torch=%s"
          % (a.model, a.bf16, a.threads, a.batch, step_ms, prof_step_ms,
             share * step_ms, share, torch.__version__))
    if os.environ.get("TOP"):
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
