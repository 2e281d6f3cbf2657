#!/usr/bin/python3
"""Goldens of --precision bf16 (docs/BF16.md), made by Debian's PyTorch 1.13
(run with /usr/bin/python3; any CPU: autocast's bf16 kernels run on AVX2):

    gen_bf16.py        (writes tests/golden/bf16_io.safetensors)

  round_x, round_y   float32 values and torch's x.to(torch.bfloat16).float():
                     round to nearest even, ties, NaN (-> 0xffff0000), +-inf,
                     overflow to inf, subnormals, and 4096 random bit patterns
  resnet18.logits, resnet18.logits2, wrn_small.logits, wrn_rgb.logits
                     the parity goldens of gen_parity.py (same weights, same
                     uint8 inputs, same normalisation) run under
                     torch.autocast("cpu", dtype=torch.bfloat16), as float32
  resnet18.emulated, resnet18.emulated2, wrn_small.emulated, wrn_rgb.emulated
                     the same models in fp32 with autocast's casts done by
                     hooks: the conv/linear weights, biases and inputs and
                     every module's output rounded to bf16 (emulated_logits
                     below). That is autocast's bf16 with fp32 accumulation,
                     which oneDNN's bf16 kernels give on avx512_bf16/AMX
                     CPUs; Debian's torch 1.13 on an AVX2 CPU does not
                     accumulate its bf16 convolutions in fp32 (measured: a
                     256-channel 3x3 conv differs from round(fp32 sum) in
                     96% of its outputs, by up to 12% of the largest), so its
                     autocast logits are further from fp32 than bf16 needs
  <name>.fp32_vs_bf16
                     metadata: PyTorch's own max|bf16 - fp32| / max|fp32| on
                     those logits (how far bf16 is from fp32 at all)
  wrn_fmnist.emulated_correct_top1
                     metadata: top-1 correct of the demo WideResNet
                     (demo/wrn-fmnist.safetensors, 16,32,64,128) on the 10,000
                     Fashion-MNIST test images, emulated bf16 as above (fp32:
                     fmnist_t10k_ref.json; autocast itself takes over 25
                     minutes for them on a 2-core AVX2 machine)
Deterministic: one thread."""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import idx_io  # noqa: E402
import safetensors_io  # noqa: E402
import seed_models  # noqa: E402
from gen_parity import MEAN, STD, save_safetensors, to_input  # noqa: E402


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


def rounding_cases():
    f = np.float32
    bits = [0x00000000, 0x80000000, 0x3f800000,
            0x3f808000,                 # 1 + 2^-8: a tie, rounds to even (down)
            0x3f818000,                 # tie, rounds to even (up)
            0x3f808001, 0x3f807fff,     # just above / below the tie
            0x7f7fffff, 0xff7fffff,     # float max -> inf
            0x7f7f7fff, 0x7f7f8000,     # largest bf16 and the tie above it (-> inf)
            0x7f800000, 0xff800000,     # +-inf
            0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0xffffffff,  # NaNs
            0x00000001, 0x00008000, 0x00018000, 0x00007fff, 0x807fffff,  # subnormals
            0x00800000, 0x007f8000, 0x007fffff]
    rng = np.random.RandomState(5)
    rand = rng.randint(0, 2 ** 32, size=4096, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([np.array(bits, dtype=np.uint32), rand]).view(f)
    y = bf16(torch.from_numpy(x.copy())).numpy()
    return x, y


def autocast_logits(model, x):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    assert y.dtype == torch.bfloat16, y.dtype
    return y.float().numpy()


def emulated_logits(model, x, rnd=bf16):
    """autocast's rounding points on fp32 kernels (a copy of the model); rnd
    rounds a float32 tensor to the autocast dtype's values (bf16 here,
    gen_fp16.py passes its fp16)."""
    import copy
    m = copy.deepcopy(model)
    hooks = []
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
                mod.weight.copy_(rnd(mod.weight))
                if mod.bias is not None:
                    mod.bias.copy_(rnd(mod.bias))
                hooks.append(mod.register_forward_pre_hook(lambda _m, inp: (rnd(inp[0]),)))
            # every output (a residual sum is a block's output or feeds a ReLU)
            hooks.append(mod.register_forward_hook(lambda _m, _i, out: rnd(out)))
        y = m(x).numpy()
    for h in hooks:
        h.remove()
    return y


def load(arch, weights, classes, channels=None, in_channels=1):
    if arch == "wideresnet":
        model = seed_models.WideResNet(classes, channels, in_channels)
    else:
        model = seed_models.build(arch, num_classes=classes)
    model.load_state_dict(safetensors_io.load(weights), strict=True)
    return model.eval()


def case(out, meta, name, model, x):
    with torch.no_grad():
        ref = model(x).numpy()
    got = autocast_logits(model, x)
    out[name] = got
    emu = emulated_logits(model, x)
    out[name.replace("logits", "emulated")] = emu
    e = float(np.abs(emu - ref).max() / np.abs(ref).max())
    meta[name.replace("logits", "emulated") + ".fp32_vs_bf16"] = "%.4g" % e
    print("%-18s emulated bf16 vs fp32: max|a-b|/max|b| = %.4g" % (name, e), flush=True)
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    meta[name + ".fp32_vs_bf16"] = "%.4g" % rel
    print("%-18s autocast bf16 vs fp32: max|a-b|/max|b| = %.4g" % (name, rel), flush=True)


def main():
    torch.set_num_threads(1)
    out, meta = {}, {"oracle": "torch %s autocast(cpu, bfloat16)" % torch.__version__}
    out["round_x"], out["round_y"] = rounding_cases()
    io = safetensors_io.load(os.path.join(HERE, "resnet18_io.safetensors"))
    r18 = load("resnet18", os.path.join(HERE, "resnet18.safetensors"), 1000)
    case(out, meta, "resnet18.logits", r18, to_input(io["input_u8"].numpy(), MEAN, STD))
    case(out, meta, "resnet18.logits2", r18, to_input(io["input2_u8"].numpy(), MEAN, STD))
    for name, chans, inch, classes in (("wrn_small", [8, 16, 24, 32], 1, 10),
                                       ("wrn_rgb", [4, 8, 8, 12], 3, 7)):
        io = safetensors_io.load(os.path.join(HERE, name + "_io.safetensors"))
        m = load("wideresnet", os.path.join(HERE, name + ".safetensors"), classes, chans, inch)
        case(out, meta, name + ".logits", m, to_input(io["input_u8"].numpy()))
    # the demo WideResNet on the Fashion-MNIST test set: accuracy only
    images, labels, _ = idx_io.load_prefix("idx:/usr/share/datasets/fashion-mnist/t10k")
    m = load("wideresnet", os.path.join(ROOT, "demo", "wrn-fmnist.safetensors"), 10,
             [16, 32, 64, 128], 1)
    correct = 0
    for i in range(0, len(labels), 500):
        x = torch.from_numpy(images[i:i + 500].copy()).unsqueeze(1).float().div_(255.0)
        pred = emulated_logits(m, x).argmax(1)
        correct += int((pred == labels[i:i + 500]).sum())
    meta["wrn_fmnist.emulated_correct_top1"] = str(correct)
    print("wrn_fmnist emulated bf16 top-1: %d / %d" % (correct, len(labels)), flush=True)
    save_safetensors(os.path.join(HERE, "bf16_io.safetensors"), out, meta)


if __name__ == "__main__":
    main()
