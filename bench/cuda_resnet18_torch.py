#!/usr/bin/python3
"""PyTorch's ResNet-18 on the same GPU as bench/cuda_resnet18: eval and train
img/s at the same batch, from uint8 batches already on the host (as gpud
gets them), normalisation included.

  cuda_resnet18_torch.py eval|train [--batch 256] [--iters 10] [--warmup 2]
                         [--size 224] [--mode eager|cl-amp|cl-bf16]
                         [--arch resnet18|resnet50]

eager : fp32, NCHW, TF32 off (torch.backends.{cuda.matmul,cudnn}.allow_tf32
        = False): the like-for-like of ddpipe's fp32 build.
cl-amp: channels_last + torch.autocast(float16) (+ GradScaler for train):
        what a tuned PyTorch user runs.
cl-bf16: channels_last + torch.autocast(bfloat16) (no GradScaler): the peer
        of ddpipe's --precision bf16 eval on cuda.
cl-bf16-det: cl-bf16 with torch.backends.cudnn.deterministic = True: cuDNN's
        benchmark times only deterministic algorithms, ddpipe's own rule (a
        sample's result must not depend on its worker) and what its tuned
        engines (DDPIPE_CUDNN_TUNE) are. PyTorch's other nondeterministic
        kernels (max-pooling backward's atomics) stay as they are.
Every mode keeps cudnn.benchmark = True (a tuned user's setting).
Prints: "torch ARCH MODE img/s=X ... device=NAME".
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["eval", "train"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--mode", choices=["eager", "cl-amp", "cl-bf16", "cl-bf16-det"],
                    default="eager")
    ap.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet18")
    a = ap.parse_args()
    dev = torch.device("cuda")
    amp = a.mode in ("cl-amp", "cl-bf16", "cl-bf16-det")
    half = torch.bfloat16 if a.mode.startswith("cl-bf16") else torch.float16
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = a.mode == "cl-bf16-det"
    fmt = torch.channels_last if amp else torch.contiguous_format
    torch.manual_seed(1)
    model = getattr(torchvision.models, a.arch)().to(dev).to(memory_format=fmt)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)
    g = torch.Generator().manual_seed(1)
    px = torch.randint(0, 256, (a.batch, 3, a.size, a.size), dtype=torch.uint8, generator=g)
    px = px.pin_memory()
    labels = torch.arange(a.batch, device=dev) * 7919 % 1000
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.cuda.amp.GradScaler(enabled=amp and half == torch.float16)
    model.train(a.what == "train")

    def step():
        x = px.to(dev, non_blocking=True).float().div_(255).sub_(mean).div_(std)
        x = x.contiguous(memory_format=fmt)
        with torch.autocast("cuda", dtype=half, enabled=amp):
            if a.what == "eval":
                with torch.no_grad():
                    y = model(x)
                return y.float().cpu()
            loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    times = []
    for it in range(a.warmup + a.iters):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if it >= a.warmup:
            times.append(time.perf_counter() - t)
    print("torch %s %s img/s=%.1f best_img/s=%.1f batch=%d iters=%d size=%d mode=%s "
          "torch=%s device=%s" % (a.arch, a.what, a.batch * len(times) / sum(times), a.batch / min(times),
                                  a.batch, a.iters, a.size, a.mode, torch.__version__,
                                  torch.cuda.get_device_name(0)))


if __name__ == "__main__":
    main()
