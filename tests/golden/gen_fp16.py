#!/usr/bin/python3
"""Goldens of --precision fp16's rounding and eval logits (docs/FP16.md),
made by Debian's PyTorch 1.13 (run with /usr/bin/python3; any CPU):

    gen_fp16.py        (writes tests/golden/fp16_io.safetensors)

  round_x, round_y   float32 values and torch's x.to(torch.float16).float():
                     round to nearest even at 1 + 2^-11 both ways and next
                     to the ties, 65504 and the overflow tie 65520 (-> inf),
                     float max, +-inf, NaNs, the smallest normal 2^-14 and
                     the ties around it, fp16 subnormals and their ties
                     (2^-25 -> 0, 3*2^-25 -> 2^-23), float subnormals, each
                     also negated; then 4096 random bit patterns and 4096
                     random floats with |x| log-uniform in [2^-30, 2^17]
                     (where fp16 has its subnormals, normals and overflow)
                     and a random sign, from np.random.RandomState(7)
Torch's NaNs may carry another payload than fp16_round's 0x7fc00000: the
test (tests/gpud/test_fp16.c) only asks that both be NaN.

  resnet18.emulated, resnet18.emulated2, wrn_small.emulated, wrn_rgb.emulated
                     the parity goldens of gen_parity.py (same weights, same
                     uint8 inputs, same normalisation) in fp32 with
                     autocast's float16 casts done by hooks, as gen_bf16.py's
                     emulated logits (its emulated_logits, given fp16 as the
                     rounding): the conv/linear weights, biases and inputs
                     and every module's output rounded to fp16. That is
                     torch.autocast("cuda", dtype=torch.float16) with fp32
                     accumulation (docs/FP16.md); CPU autocast has no
                     float16 in torch 1.13, so there is no autocast golden
  <name>.fp32_vs_fp16
                     metadata, <name> one of the four above: max|fp16 -
                     fp32| / max|fp32| on those logits (fp32: the same model
                     without the hooks), how far fp16 is from fp32 at all
  <name>.emulated_f64, <name> one of the four above
                     the same rounding points with the model in float64
                     (model.double()): every sum exact for fp16's purposes,
                     each rounding point float64 -> float32 -> fp16. What the
                     ref backend computes (its kernels accumulate in double),
                     so it must give these bits, whatever the sum order
  wrn_small.batch_u8, wrn_rgb.batch_u8
                     32 more inputs of each WideResNet (Fashion-MNIST t10k
                     images 3..34; smooth_images of gen_parity.py from
                     np.random.RandomState(16)), and their logits
                     <name>.batch_emulated (fp32 sums) and
                     <name>.batch_emulated_f64 (float64 sums) as above: a
                     missing rounding point moves 1/5 to 2/5 of these logits
                     by an fp16 step or more, another sum order 1/30 to 1/12
                     of them by one (measured: tests/gpud/test_fp16.c)
The fp16 logits of the fp32-sum goldens are 1 fp16 step (of the largest
logit) from the float64-sum ones on resnet18 and wrn_small: at fp16's
precision a rounding point's effect on the logits and a sum order's are
the same size (tests/gpud/test_fp16.c).
Deterministic: one thread."""
import copy
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402
from gen_bf16 import emulated_logits, load  # noqa: E402
from gen_parity import (MEAN, STD, fashion_mnist, save_safetensors,  # noqa: E402
                        smooth_images, to_input)


def fp16(x):
    return x.to(torch.float16).to(torch.float32)


def rounding_cases():
    f = np.float32
    bits = [0x00000000, 0x3f800000,     # 0, 1
            0x3f801000,                 # 1 + 2^-11: a tie, rounds to even (down, 1)
            0x3f803000,                 # 1 + 3*2^-11: tie, rounds to even (up, 1 + 2^-9)
            0x3f801001, 0x3f800fff,     # just above / below the first tie
            0x3f803001, 0x3f802fff,     # and the second
            0x477fe000,                 # 65504, the largest fp16
            0x477fefff,                 # 65519.99: below the tie, 65504
            0x477ff000,                 # 65520: the tie above 65504, to even (-> inf)
            0x47800000,                 # 65536 -> inf
            0x7f7fffff,                 # float max -> inf
            0x7f800000,                 # inf
            0x7fc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff, 0x7fc00001,  # NaNs
            0x38800000,                 # 2^-14, the smallest normal fp16
            0x38800001, 0x387fffff,     # just above / below it
            0x38801000,                 # 2^-14 (1 + 2^-11): tie, down to 2^-14
            0x387fe000,                 # 1023.5 * 2^-24: tie, up to 2^-14
            0x387fdfff,                 # just below: 1023 * 2^-24
            0x387fa000,                 # 1022.5 * 2^-24: tie, down to 1022 * 2^-24
            0x33800000,                 # 2^-24, the smallest fp16 subnormal
            0x33c00000,                 # 3 * 2^-25 = 1.5 * 2^-24: tie, up to 2^-23
            0x34200000,                 # 5 * 2^-25: tie, down to 2^-23
            0x33000000,                 # 2^-25: tie, to 0
            0x33000001,                 # 2^-25 + tiny: 2^-24
            0x32ffffff, 0x32800000,     # below 2^-25: 0
            0x33c00001, 0x33bfffff,     # next to the 1.5 * 2^-24 tie
            0x00000001, 0x00400000, 0x007fffff, 0x00800000]  # float subnormals, FLT_MIN
    bits += [b ^ 0x80000000 for b in bits]   # the negatives (and NaNs of sign 1)
    rng = np.random.RandomState(7)
    rand = rng.randint(0, 2 ** 32, size=4096, dtype=np.uint64).astype(np.uint32)
    mag = np.exp2(rng.uniform(-30.0, 17.0, size=4096)).astype(f)
    sign = np.where(rng.randint(0, 2, size=4096) == 1, f(-1), f(1))
    x = np.concatenate([np.array(bits, dtype=np.uint32), rand,
                        (mag * sign).astype(f).view(np.uint32)]).view(f)
    y = fp16(torch.from_numpy(x.copy())).numpy()
    return x, y


def fp16_f64(x):
    """a float64 value through a float32 buffer, rounded to fp16 (the ref
    backend's rounding point)"""
    return x.to(torch.float32).to(torch.float16).to(torch.float64)


def logits_f64(model, x):
    """emulated_logits with the model in float64 (a copy)."""
    y = emulated_logits(copy.deepcopy(model).double(), x.double(), rnd=fp16_f64)
    return y.astype(np.float32)   # fp16 values: exact


def case(out, meta, name, model, x):
    """name: <model>.emulated[2], the logits of x with fp16's rounding
    points, fp32 sums and float64 sums (name + "_f64")."""
    with torch.no_grad():
        ref = model(x).numpy()
    emu = emulated_logits(model, x, rnd=fp16)
    assert np.isfinite(emu).all(), name
    out[name] = emu
    out[name + "_f64"] = logits_f64(model, x)
    e = float(np.abs(emu - ref).max() / np.abs(ref).max())
    meta[name + ".fp32_vs_fp16"] = "%.4g" % e
    print("%-18s emulated fp16 vs fp32: max|a-b|/max|b| = %.4g; fp32 sums vs float64 sums: "
          "%d of %d logits differ" % (name, e, int((emu != out[name + "_f64"]).sum()), emu.size),
          flush=True)


def batch(out, name, model, u8):
    x = to_input(u8)
    out[name + ".batch_u8"] = u8
    emu = emulated_logits(model, x, rnd=fp16)
    out[name + ".batch_emulated"] = emu
    out[name + ".batch_emulated_f64"] = logits_f64(model, x)
    print("%-18s batch of %d: fp32 sums vs float64 sums: %d of %d logits differ"
          % (name, len(u8), int((emu != out[name + ".batch_emulated_f64"]).sum()), emu.size),
          flush=True)


def main():
    torch.set_num_threads(1)
    out = {}
    out["round_x"], out["round_y"] = rounding_cases()
    meta = {"oracle": "torch %s x.to(torch.float16).to(torch.float32); emulated: "
                      "autocast(float16)'s rounding points by hooks, fp32 or float64 sums"
                      % torch.__version__}
    io = safetensors_io.load(os.path.join(HERE, "resnet18_io.safetensors"))
    r18 = load("resnet18", os.path.join(HERE, "resnet18.safetensors"), 1000)
    case(out, meta, "resnet18.emulated", r18, to_input(io["input_u8"].numpy(), MEAN, STD))
    case(out, meta, "resnet18.emulated2", r18, to_input(io["input2_u8"].numpy(), MEAN, STD))
    more = {"wrn_small": fashion_mnist(35)[3:],
            "wrn_rgb": smooth_images(np.random.RandomState(16), 32, 3, 28, 28)}
    for name, chans, inch, classes in (("wrn_small", [8, 16, 24, 32], 1, 10),
                                       ("wrn_rgb", [4, 8, 8, 12], 3, 7)):
        io = safetensors_io.load(os.path.join(HERE, name + "_io.safetensors"))
        m = load("wideresnet", os.path.join(HERE, name + ".safetensors"), classes, chans, inch)
        case(out, meta, name + ".emulated", m, to_input(io["input_u8"].numpy()))
        batch(out, name, m, more[name])
    save_safetensors(os.path.join(HERE, "fp16_io.safetensors"), out, meta)
    print("fp16_io.safetensors: %d rounding values, %d tensors" % (len(out["round_x"]), len(out)))


if __name__ == "__main__":
    main()
