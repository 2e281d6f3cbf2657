#!/usr/bin/python3
"""The PyTorch side of the end-to-end JPEG eval bench (scripts/gpu-e2e.sh jpeg).

What a PyTorch user runs to evaluate a folder of JPEGs: torchvision's
ImageFolder + DataLoader(num_workers=W, pin_memory) with the standard eval
transform (PIL decode, Resize(256), CenterCrop(224), ToTensor, Normalize),
ResNet-18 in channels_last under autocast:

  --mode amp    torch.autocast(float16) (PyTorch's AMP, issue 30's peer)
  --mode bf16   torch.autocast(bfloat16)
  --mode fp32   no autocast

on the GPU (the CPU where there is none, so the script can be checked on
any machine). cudnn.benchmark is on and one batch runs before the clock, as
a tuned script would; the clock then runs from creating the loader's
iterator (its workers start) to the last batch's logits on the host, the
top-1 of every sample taken as ddpipe's summary does. Prints one line:

  torch resnet18 e2e-jpeg img/s=R images=N workers=W batch=B mode=M device=D torch=V
"""
import argparse
import contextlib
import time

import torch
import torchvision
from torchvision import transforms as T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="ImageFolder root")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--mode", choices=["amp", "bf16", "fp32"], default="amp")
    a = ap.parse_args()

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.data, transform=tf)
    model = torchvision.models.resnet18(weights=None).to(dev).eval()
    model = model.to(memory_format=torch.channels_last)
    half = {"amp": torch.float16, "bf16": torch.bfloat16}.get(a.mode)
    if dev.type == "cpu" and half is torch.float16:
        half = torch.bfloat16   # CPU autocast has no fp16: the check runs bf16 there

    def run(x):
        x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        ctx = torch.autocast(dev.type, dtype=half) if half else contextlib.nullcontext()
        with ctx:
            return model(x)

    with torch.no_grad():
        run(torch.zeros(a.batch, 3, 224, 224))   # cudnn's tuning, outside the clock
        if dev.type == "cuda":
            torch.cuda.synchronize()
        loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                             pin_memory=dev.type == "cuda")
        t0 = time.perf_counter()
        n = correct = 0
        for x, y in loader:
            top1 = run(x).argmax(1).cpu()   # the results on the host, as ddpipe's
            correct += int((top1 == y).sum())
            n += len(y)
        t1 = time.perf_counter()
    print("torch resnet18 e2e-jpeg img/s=%.1f images=%d workers=%d batch=%d mode=%s "
          "device=%s torch=%s top1=%.4f" % (n / (t1 - t0), n, a.workers, a.batch, a.mode,
                                            dev.type, torch.__version__, correct / max(n, 1)))


if __name__ == "__main__":
    main()
