#!/usr/bin/python3
"""PyTorch's ResNet-18 on the same GPU as bench/cuda_resnet18: eval and train
img/s at the same batch, from uint8 batches already on the host (as gpud
gets them), normalisation included.

  cuda_resnet18_torch.py eval|train [--batch 256] [--iters 10] [--warmup 2]
                         [--size 224] [--arch resnet18|resnet50]
                         [--mode eager|cl-amp|cl-bf16|cl-bf16-det|cl-bf16-compile]
                         [--device cuda|cpu]

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
cl-bf16-compile: cl-bf16 with the model under torch.compile (inductor's
        default mode; the loss and the optimizer stay eager): PyTorch's
        fastest path a user turns on with one line. Its compilation runs in
        the first warm-up iteration, which is timed apart (compile_s=).
Every mode keeps cudnn.benchmark = True (a tuned user's setting).
--device cpu runs the same code on the CPU (a functional check of the
script where no GPU is at hand, not a figure).
Prints: "torch ARCH WHAT img/s=X ... mode=M ... device=NAME" (and
compile_s=S for cl-bf16-compile).
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
    ap.add_argument("--mode", choices=["eager", "cl-amp", "cl-bf16", "cl-bf16-det",
                                       "cl-bf16-compile"], default="eager")
    ap.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet18")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    cuda = a.device == "cuda"
    amp = a.mode != "eager"
    half = torch.bfloat16 if a.mode.startswith("cl-bf16") else torch.float16
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = a.mode == "cl-bf16-det"
    fmt = torch.channels_last if amp else torch.contiguous_format
    torch.manual_seed(1)
    model = getattr(torchvision.models, a.arch)().to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    run = torch.compile(model) if a.mode == "cl-bf16-compile" else model
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)
    g = torch.Generator().manual_seed(1)
    px = torch.randint(0, 256, (a.batch, 3, a.size, a.size), dtype=torch.uint8, generator=g)
    if cuda:
        px = px.pin_memory()
    labels = torch.arange(a.batch, device=dev) * 7919 % 1000
    scaler = torch.amp.GradScaler(a.device, enabled=amp and half == torch.float16)
    model.train(a.what == "train")

    def step():
        x = px.to(dev, non_blocking=True).float().div_(255).sub_(mean).div_(std)
        x = x.contiguous(memory_format=fmt)
        with torch.autocast(a.device, dtype=half, enabled=amp):
            if a.what == "eval":
                with torch.no_grad():
                    y = run(x)
                return y.float().cpu()
            loss = torch.nn.functional.cross_entropy(run(x), labels)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # at least one warm-up: cl-bf16-compile's compilation, timed apart
    warm = max(a.warmup, 1)
    times, first = [], None
    for it in range(warm + a.iters):
        sync()
        t = time.perf_counter()
        step()
        sync()
        if it == 0:
            first = time.perf_counter() - t
        if it >= warm:
            times.append(time.perf_counter() - t)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    extra = "compile_s=%.1f " % first if a.mode == "cl-bf16-compile" else ""
    print("torch %s %s img/s=%.1f best_img/s=%.1f batch=%d iters=%d size=%d mode=%s %s"
          "torch=%s device=%s" % (a.arch, a.what, a.batch * len(times) / sum(times),
                                  a.batch / min(times), a.batch, a.iters, a.size, a.mode, extra,
                                  torch.__version__, name))


if __name__ == "__main__":
    main()
