#!/usr/bin/python3
"""DenseNet-121 goldens of gpud (run with Debian's /usr/bin/python3: torch
1.13 + torchvision 0.14). Output: densenet_io.safetensors, next to this
script.

The model is torchvision's densenet121 with a 10-class classifier (a
transfer-learning head: num_classes comes from classifier.weight). Its
weights are too big to commit, so they are synthesised from each tensor's
name (synth() of gen_parity.py; tests/gpud/synth.h is the C twin) and the
metadata "densenet121.manifest" lists every state_dict name and shape
(num_batches_tracked excluded); the input is synth_pixels("input.densenet121")
[2,3,64,64] with ImageNet normalisation. Tensors:

  eval.logits            model.eval() logits [2,10]
  train.labels/.loss/.logits, train:<param>.grad, train:<buffer>.after
                         one training step (train-mode BatchNorm, loss =
                         sum of per-sample CrossEntropy(label_smoothing=0.1)
                         / global batch 3)
  frozen.loss/.logits, frozen:classifier.{weight,bias}.grad
                         the DenseNet seed's transfer learning: every
                         features.* parameter requires_grad=False and
                         model.features.eval() (BatchNorm on running stats,
                         not updated); only the classifier trains
  partial.*              only features.denseblock1 and the classifier train
                         (block 1's BatchNorm in train mode); the rest is
                         frozen + eval, so block 1's gradients come back
                         through every later eval-mode BatchNorm

The reference runs in float64 (the float32 weights and input, widened):
PyTorch's own float32 train-mode gradients of this net differ from float64
by up to ~5e-3 relative (single thread; 59 train-mode BatchNorms over few
elements per channel at 64x64, where the true gradients of many tensors
are small differences of large terms), so a float32 golden would measure
PyTorch's rounding, not ours. Results are stored as float32, each with
"<key>.tol" = max(1e-4, 3 * noise), noise the largest max|x - torch64| /
max|torch64| of
  - PyTorch's own float32 run, and
  - float64 runs in which every ReLU input is moved by float32's rounding
    (EPS = 1e-7 of that tensor's largest magnitude, about one float32 ulp;
    NOISE_SEEDS draws): this net has ReLU inputs within 4e-8 of zero
    relative to their tensor, so whether one flips depends on the order of
    a float32 sum, and a flip moves whole gradients by up to ~5e-2. One
    float32 library (PyTorch's oneDNN on one CPU) flips some, another
    (oneDNN's AVX2 kernels, PyTorch's native conv) others: the perturbed
    runs measure how far any correct float32 order can land.
The C test requires ours to be that close to the exact value (to 3x); the
"frozen" case and the logits stay near 1e-4, where no flip reaches them.

Gradients and buffers are the full tensor when it has <= 256 values, else
the 256 values at flat indices i * numel // 256 (the C test takes the same).
Deterministic: same bytes every run.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_parity import MEAN, STD, save_safetensors, synth, synth_pixels, to_input  # noqa: E402

SAMPLE = 256
CLASSES = 10
IN_SHAPE = (2, 3, 64, 64)
LABELS = np.array([3, 7], dtype=np.int32)
G = 3
SMOOTHING = 0.1
TOL_FACTOR = 3.0
EPS = 1e-7
NOISE_SEEDS = 4


def sample(t):
    f = t.detach().reshape(-1).numpy().astype(np.float32)
    if f.size <= SAMPLE:
        return f
    idx = (np.arange(SAMPLE, dtype=np.int64) * f.size) // SAMPLE
    return f[idx]


def relu_noise(model, seed):
    """Move every ReLU input by EPS * max|input| * N(0, 1) (seeded)."""
    gen = torch.Generator().manual_seed(seed)

    def pre(_mod, inp):
        x = inp[0]
        n = torch.randn(x.shape, generator=gen, dtype=x.dtype)
        return (x + EPS * x.detach().abs().max() * n,)

    for mod in model.modules():
        if isinstance(mod, torch.nn.ReLU):
            mod.register_forward_pre_hook(pre)


def synth_model(dtype, noise_seed=None):
    model = torchvision.models.densenet121(weights=None, num_classes=CLASSES)
    sd = model.state_dict()
    manifest = []
    for k, v in sd.items():
        if k.endswith("num_batches_tracked"):
            continue
        shape = tuple(v.shape)
        sd[k] = torch.from_numpy(synth(k, shape))
        manifest.append("%s=%s" % (k, ",".join(map(str, shape))))
    model.load_state_dict(sd)
    if noise_seed is not None:
        relu_noise(model, noise_seed)
    return model.to(dtype), ";".join(manifest)


def step(tag, model, x, out, trainable=None):  # noqa: C901
    """One training step; trainable: name prefixes that train (the rest is
    frozen and its BatchNorm in eval mode), None = everything trains."""
    model.train()
    if trainable is not None:
        for name, p in model.named_parameters():
            p.requires_grad_(any(name.startswith(t) for t in trainable))
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.BatchNorm2d) and \
                    not any(name.startswith(t) for t in trainable):
                mod.eval()
    lab = torch.from_numpy(LABELS.astype(np.int64))
    logits = model(x)
    loss = F.cross_entropy(logits, lab, reduction="none", label_smoothing=SMOOTHING)
    (loss.sum() / G).backward()
    out[tag + ".loss"] = loss.detach().float().numpy()
    out[tag + ".logits"] = logits.detach().float().numpy()
    for name, p in model.named_parameters():
        if p.grad is not None:
            out["%s:%s.grad" % (tag, name)] = sample(p.grad)
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out["%s:%s.after" % (tag, name)] = sample(b)


def run_all(dtype, out, noise_seed=None):
    px = synth_pixels("input.densenet121", IN_SHAPE)
    x = to_input(px, MEAN, STD).to(dtype)
    model, manifest = synth_model(dtype, noise_seed)
    model.eval()
    with torch.no_grad():
        out["eval.logits"] = model(x).float().numpy()
    step("train", model, x, out)
    model, _ = synth_model(dtype, noise_seed)
    step("frozen", model, x, out, trainable=["classifier"])
    model, _ = synth_model(dtype, noise_seed)
    step("partial", model, x, out, trainable=["classifier", "features.denseblock1."])
    return manifest


def rel(a, b):
    m = np.abs(b).max()
    d = np.abs(a.astype(np.float64) - b).max()
    return d / m if m > 0 else d


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out, out32 = {"train.labels": LABELS}, {}
    manifest = run_all(torch.float64, out)
    run_all(torch.float32, out32)
    noise = {k: rel(v, out[k]) for k, v in out32.items()}
    for seed in range(NOISE_SEEDS):
        perturbed = {}
        run_all(torch.float64, perturbed, noise_seed=seed)
        for k, v in perturbed.items():
            noise[k] = max(noise[k], rel(v, out[k]))
    for k, e in noise.items():
        out[k + ".tol"] = np.array([max(1e-4, TOL_FACTOR * e)], np.float32)
    meta = {"densenet121.manifest": manifest, "densenet121.input": ",".join(map(str, IN_SHAPE)),
            "densenet121.normalize": "imagenet", "global_batch": G, "smoothing": SMOOTHING,
            "sample": SAMPLE, "metric": "max|a-b|/max|b| per output tensor"}
    save_safetensors(os.path.join(HERE, "densenet_io.safetensors"), out, meta)


if __name__ == "__main__":
    main()
