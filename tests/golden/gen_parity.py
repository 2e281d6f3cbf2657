#!/usr/bin/python3
"""Generate the parity goldens of gpud's models (run with Debian's python3:
torch 1.13 + torchvision 0.14). Output, next to this script:

  resnet18.safetensors       torchvision resnet18, random init (seed 0), BN
                             running stats randomised so BN folding is really
                             exercised; stored as F16 (half the size; the
                             expected logits use the same F16-rounded values)
  resnet18_io.safetensors    input_u8 [2,3,224,224] + logits [2,1000],
                             input2_u8 [1,3,97,131] + logits2 (odd size:
                             adaptive pooling, floor-mode strides), mean, std
  wrn_small.safetensors      the seed WideResNet, channels 8,16,24,32, 1 input
                             channel, 10 classes, F32
  wrn_small_io.safetensors   input_u8 [3,1,28,28] (Fashion-MNIST t10k 0..2,
                             plain ToTensor) + logits [3,10]
  wrn_rgb.safetensors        channels 4,8,8,12, 3 input channels, 7 classes,
                             BF16
  wrn_rgb_io.safetensors     input_u8 [2,3,28,28] + logits [2,7]
  synth_io.safetensors       logits only, for models whose weights are too big
                             to commit (resnet34, resnet50, the seed WideResNet
                             at its default 16,160,320,640): weights AND inputs
                             are synthesised from each tensor's name by a hash
                             (synth() below; tests/gpud/synth.h is the C twin),
                             and the metadata lists every state_dict name and
                             shape ("<model>.manifest"), so the C test rebuilds
                             the exact file PyTorch used.

Pixels go through torchvision's eval transform arithmetic: ToTensor's
float(p)/255, then Normalize's (x - mean) / std, both in float32.
Safetensors files are written by the small writer below (no safetensors
package on Debian). Deterministic: same bytes on every run.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]

DTYPES = {np.float32: "F32", np.float16: "F16", np.int64: "I64", np.uint8: "U8",
          np.int32: "I32", np.float64: "F64"}


def bf16_bytes(a):
    """float32 array -> BF16 bytes, round to nearest even (as torch)."""
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().tobytes()


def save_safetensors(path, tensors, metadata=None):
    """tensors: name -> numpy array, or (\"BF16\", float32 array)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        v = tensors[name]
        if isinstance(v, tuple):
            dtype, arr = v
            data = bf16_bytes(arr)
            shape = list(arr.shape)
        else:
            arr = np.ascontiguousarray(v)
            dtype = DTYPES[arr.dtype.type]
            data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
            shape = list(arr.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    print("wrote %s (%.1f MB)" % (os.path.relpath(path), os.path.getsize(path) / 1e6))


def randomize_bn(model, gen):
    """Non-trivial eval-mode BatchNorm: folding errors would show."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.5)
                m.num_batches_tracked.fill_(1000)


def round_params(model, kind):
    """Round float params/buffers through F16 or BF16 so that the stored file
    and the model that computes the expected logits hold the same values."""
    dt = torch.float16 if kind == "F16" else torch.bfloat16
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.copy_(t.to(dt).to(torch.float32))


def state_tensors(model, kind):
    out = {}
    for k, v in model.state_dict().items():
        a = v.detach().cpu().numpy()
        if a.dtype == np.float32:
            if kind == "F16":
                a = a.astype(np.float16)
            elif kind == "BF16":
                a = ("BF16", a)
        out[k] = a
    return out


def to_input(u8, mean=None, std=None):
    x = torch.from_numpy(u8).float().div(255)
    if mean is not None:
        m = torch.tensor(mean, dtype=torch.float32)[:, None, None]
        s = torch.tensor(std, dtype=torch.float32)[:, None, None]
        x = (x - m) / s
    return x


def smooth_images(rng, n, c, h, w):
    """Uint8 images with structure (blurred noise + gradients), not just noise."""
    base = rng.rand(n, c, h // 8 + 2, w // 8 + 2)
    img = np.kron(base, np.ones((1, 1, 8, 8)))[:, :, :h, :w]
    img = img * 200 + rng.rand(n, c, h, w) * 55
    return np.clip(img, 0, 255).astype(np.uint8)


# ---- the seed WideResNet (NVIDIA DDP course), verbatim structure
# The seed WideResNet lives in scripts/seed_models.py (one definition for
# every script that needs it).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from seed_models import WideResNet  # noqa: E402


def fashion_mnist(n):
    with gzip.open(FMNIST, "rb") as f:
        data = f.read()
    magic, count, h, w = struct.unpack(">IIII", data[:16])
    assert magic == 2051 and count >= n
    return np.frombuffer(data[16:16 + n * h * w], dtype=np.uint8).reshape(n, 1, h, w).copy()


def gen_resnet18():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = torchvision.models.resnet18(weights=None)
    randomize_bn(model, gen)
    # torchvision zero-inits nothing by default, but make fc non-trivial anyway
    round_params(model, "F16")
    model.eval()
    rng = np.random.RandomState(2)
    u8 = smooth_images(rng, 2, 3, 224, 224)
    u8b = smooth_images(rng, 1, 3, 97, 131)
    with torch.no_grad():
        logits = model(to_input(u8, MEAN, STD)).numpy()
        logits2 = model(to_input(u8b, MEAN, STD)).numpy()
    save_safetensors(os.path.join(HERE, "resnet18.safetensors"), state_tensors(model, "F16"),
                     {"arch": "resnet18", "seed": 0, "dtype": "F16"})
    save_safetensors(os.path.join(HERE, "resnet18_io.safetensors"),
                     {"input_u8": u8, "logits": logits, "input2_u8": u8b, "logits2": logits2,
                      "mean": np.array(MEAN, np.float32), "std": np.array(STD, np.float32)},
                     {"metric": "max|a-b|/max|b| per output tensor"})


def gen_wrn(name, channels, in_channels, classes, kind, u8):
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(4)
    model = WideResNet(classes, channels, in_channels)
    randomize_bn(model, gen)
    if kind != "F32":
        round_params(model, kind)
    model.eval()
    with torch.no_grad():
        logits = model(to_input(u8)).numpy()
    meta = {"arch": "wideresnet", "channels": ",".join(map(str, channels)),
            "in_channels": in_channels, "num_classes": classes, "dtype": kind}
    save_safetensors(os.path.join(HERE, name + ".safetensors"), state_tensors(model, kind), meta)
    save_safetensors(os.path.join(HERE, name + "_io.safetensors"),
                     {"input_u8": u8, "logits": logits}, meta)


# ---- synthetic weights: identical bits in numpy and in tests/gpud/synth.h
def fnv1a32(name):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return h


def synth_uniform(name, n):
    """n values in [0, 1): a 32-bit hash of (name, index), as float64."""
    i = np.arange(n, dtype=np.uint64)
    x = (np.uint64(fnv1a32(name)) + i * np.uint64(2654435761)) & np.uint64(0xffffffff)
    for _ in range(2):
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x45d9f3b)) & np.uint64(0xffffffff)
    x ^= x >> np.uint64(16)
    return x.astype(np.float64) / 4294967296.0


def synth(name, shape):
    """float32 tensor for a state_dict entry, kind chosen by its name."""
    n = int(np.prod(shape)) if len(shape) else 1
    u = synth_uniform(name, n)
    if name.endswith("running_var"):
        v = 0.5 + 1.5 * u
    elif name.endswith("running_mean") or name.endswith(".bias"):
        v = 0.2 * (u - 0.5)
    elif len(shape) == 1:                       # BatchNorm gamma
        v = 0.5 + u
    else:                                       # conv / linear weight: He-uniform
        a = np.sqrt(6.0 / float(np.prod(shape[1:])))
        v = (2.0 * u - 1.0) * a
    return v.astype(np.float32).reshape(shape)


def synth_pixels(name, shape):
    return np.floor(synth_uniform(name, int(np.prod(shape))) * 256.0).astype(np.uint8).reshape(shape)


def gen_synth():
    cases = [
        ("resnet34", lambda: torchvision.models.resnet34(weights=None), (2, 3, 64, 64), True),
        ("resnet50", lambda: torchvision.models.resnet50(weights=None), (2, 3, 64, 64), True),
        ("wideresnet", lambda: WideResNet(10), (2, 1, 28, 28), False),
    ]
    out, meta = {}, {"metric": "max|a-b|/max|b| per output tensor"}
    for name, make, in_shape, norm in cases:
        model = make()
        sd = model.state_dict()
        manifest = []
        for k, v in sd.items():
            if k.endswith("num_batches_tracked"):
                continue
            shape = tuple(v.shape)
            sd[k] = torch.from_numpy(synth(k, shape))
            manifest.append("%s=%s" % (k, ",".join(map(str, shape))))
        model.load_state_dict(sd)
        model.eval()
        px = synth_pixels("input." + name, in_shape)
        with torch.no_grad():
            x = to_input(px, MEAN, STD) if norm else to_input(px)
            out[name + ".logits"] = model(x).numpy()
        meta[name + ".manifest"] = ";".join(manifest)
        meta[name + ".input"] = ",".join(map(str, in_shape))
        meta[name + ".normalize"] = "imagenet" if norm else "none"
    save_safetensors(os.path.join(HERE, "synth_io.safetensors"), out, meta)


def main():
    torch.set_num_threads(1)
    gen_resnet18()
    gen_wrn("wrn_small", (8, 16, 24, 32), 1, 10, "F32", fashion_mnist(3))
    rng = np.random.RandomState(5)
    gen_wrn("wrn_rgb", (4, 8, 8, 12), 3, 7, "BF16", smooth_images(rng, 2, 3, 28, 28))
    gen_synth()


if __name__ == "__main__":
    main()
