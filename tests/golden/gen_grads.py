#!/usr/bin/python3
"""Per-op gradient goldens of gpud's training graphs, from PyTorch 1.13's
autograd (run with Debian's /usr/bin/python3). Output: grads/ops.safetensors.

Every case is one op on a small input: its tensors are "<case>.<name>":
  x       input (float32 NCHW), dy  upstream gradient of the op's output
  w, b    parameters where the op has them (PyTorch layout)
  rm, rv  BatchNorm running stats BEFORE the step
  y       forward output;  gx, gw, gb  gradients of sum(y * dy)
  rm_out, rv_out  running stats after one training forward
and the metadata "<case>" = "op key=value ..." says how to build it; the C
test (tests/gpud/test_train_ops.c) builds exactly that op from it, so the
case list lives only here.

Whole models: grads/models.safetensors, one training step (train-mode
BatchNorm, loss = sum of per-sample CrossEntropy / global_batch) of
  resnet18  tests/golden/resnet18.safetensors, input [2,3,64,64] uint8
            (ImageNet normalisation), label smoothing 0.1, global batch 3
  wrn       tests/golden/wrn_small.safetensors (channels 8,16,24,32), input
            [4,1,28,28] uint8 (plain ToTensor), global batch 5, dropout off
Tensors "<m>.input_u8", "<m>.labels", "<m>.loss" (per sample), "<m>.logits",
"<m>:<param>.grad" and "<m>:<buffer>.after" (running stats after the step),
each the full tensor flattened when it has <= 2048 values, else the 2048
values at flat indices i * numel // 2048 (the C test takes the same).
Deterministic (seeded, one thread): same bytes every run.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_parity import save_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1


def mix64(z):
    """splitmix64's finaliser, as gpud/cpu/ref_ops.c."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def dropout_mask(shape, p, seed, step, ids, op):
    n, c, h, w = shape
    m = np.zeros(shape, dtype=np.float32)
    for b in range(n):
        key = mix64(mix64(mix64(mix64(seed) ^ step) ^ (ids[b] & M64)) ^ op)
        for i in range(c * h * w):
            u = (mix64(key ^ mix64(i)) >> 40) / 16777216.0
            m[b].flat[i] = 1.0 if u >= p else 0.0
    return m


CASES = []


def case(name, op, shape, **kw):
    CASES.append((name, op, shape, kw))


case("conv3x3_s1_p1_bias", "conv", [2, 3, 7, 7], oc=4, k=3, s=1, p=1, bias=1)
case("conv3x3_s2_p1", "conv", [2, 5, 9, 8], oc=6, k=3, s=2, p=1, bias=0)
case("conv1x1_s2", "conv", [2, 6, 7, 7], oc=8, k=1, s=2, p=0, bias=0)
case("conv7x7_s2_p3", "conv", [1, 3, 15, 13], oc=4, k=7, s=2, p=3, bias=0)
case("conv3x3_c20_bias", "conv", [2, 20, 6, 6], oc=17, k=3, s=1, p=1, bias=1)
case("bn_train", "bn", [3, 4, 5, 5], training=1, momentum=0.1)
case("bn_train_c19", "bn", [2, 19, 3, 3], training=1, momentum=0.2)
case("bn_eval", "bn", [2, 4, 3, 3], training=0, momentum=0.1)
case("relu", "relu", [2, 3, 4, 4])
case("maxpool3x3_s2_p1", "pool", [2, 3, 9, 9], alg=0, k=3, s=2, p=1)
case("maxpool2x2", "pool", [2, 3, 7, 7], alg=0, k=2, s=2, p=0)
case("avgpool7", "pool", [2, 3, 7, 7], alg=1, k=7, s=7, p=0)
case("avgpool3x3_s2_p1", "pool", [2, 3, 9, 10], alg=1, k=3, s=2, p=1)
case("avgpool3x3_s2_p1_excl", "pool", [2, 3, 9, 10], alg=2, k=3, s=2, p=1)
case("gap", "gap", [2, 5, 3, 4])
case("linear_4d", "linear", [3, 2, 3, 3], out=5, bias=1)
case("linear_2d", "linear", [4, 6, 1, 1], out=3, bias=0)
case("flatten", "flatten", [2, 3, 2, 2])
case("add_relu_x", "add", [2, 3, 4, 4])
case("concat_x_relu", "concat", [2, 3, 3, 2])
case("dropout", "dropout", [2, 3, 4, 5], p=0.3, seed=7, step=3, id0=11, id1=42)
case("ce", "ce", [4, 5, 1, 1], smoothing=0.0)
case("ce_smooth", "ce", [4, 5, 1, 1], smoothing=0.1)
case("bn_relu_train", "bn", [3, 5, 4, 4], training=1, momentum=0.1, relu=1)
case("bn_relu_eval", "bn", [2, 6, 3, 3], training=0, momentum=0.1, relu=1)
# resnet18 / densenet121 geometry at real channel counts (oneDNN
# picks other kernels for these than for the small cases above). ties=1 puts
# x on purpose at points where the op is not differentiable (no finite
# differences there): max pooling on a few levels, so that overlapping
# windows see equal maxima (PyTorch routes the gradient to the first maximum
# of each window and overlapping windows accumulate); BN+ReLU with
# pre-activations exactly 0 (PyTorch: no gradient through relu(0)).
case("maxpool3x3_s2_p1_c64", "pool", [2, 64, 16, 16], alg=0, k=3, s=2, p=1)
case("maxpool3x3_s2_p1_ties", "pool", [2, 64, 16, 16], alg=0, k=3, s=2, p=1, ties=1)
case("conv7x7_s2_p3_c64", "conv", [2, 3, 32, 32], oc=64, k=7, s=2, p=3, bias=0)
case("conv3x3_s2_p1_c64", "conv", [2, 64, 8, 8], oc=128, k=3, s=2, p=1, bias=0)
case("conv1x1_s2_c64", "conv", [2, 64, 8, 8], oc=128, k=1, s=2, p=0, bias=0)
case("bn_relu_train_c512", "bn", [4, 512, 2, 2], training=1, momentum=0.1, relu=1)
case("bn_relu_train_zeros", "bn", [4, 64, 3, 3], training=1, momentum=0.1, relu=1, ties=1)
# stride-1 3x3 convolutions with ic == oc and no bias, which gpud's AVX2
# training forward runs as a backward data of the transposed, flipped
# convolution (docs/TRAINING.md); non-square, so a flip along the wrong axis
# shows
case("conv3x3_s1_same_c8", "conv", [2, 8, 5, 7], oc=8, k=3, s=1, p=1, bias=0)
case("conv3x3_s1_same_c64", "conv", [2, 64, 9, 6], oc=64, k=3, s=1, p=1, bias=0)


def run_case(name, op, shape, kw, gen):
    t = {}
    x = torch.randn(shape, generator=gen)
    if op == "relu":   # keep away from the kink for finite differences
        x = x + 0.1 * torch.sign(x)
    if kw.get("ties"):   # a few levels: many equal maxima per window
        x = torch.round(x * 2.0) / 2.0
        if op == "bn":   # +-x per channel: mean exactly 0, so x == 0 -> 0
            x = torch.cat([x[: shape[0] // 2], -x[: shape[0] // 2]])
    x.requires_grad_(True)
    params = {}
    if op == "conv":
        k, ic = kw["k"], shape[1]
        params["w"] = torch.randn(kw["oc"], ic, k, k, generator=gen) / (ic * k * k) ** 0.5
        if kw["bias"]:
            params["b"] = torch.randn(kw["oc"], generator=gen) * 0.1
    elif op == "bn":
        c = shape[1]
        params["w"] = torch.rand(c, generator=gen) + 0.5
        params["b"] = torch.randn(c, generator=gen) * 0.1
        if kw.get("ties"):
            params["b"] = torch.zeros(c)
        rm = torch.randn(c, generator=gen) * 0.1
        rv = torch.rand(c, generator=gen) + 0.5
        t["rm"], t["rv"] = rm.clone(), rv.clone()
    elif op == "linear":
        fin = shape[1] * shape[2] * shape[3]
        params["w"] = torch.randn(kw["out"], fin, generator=gen) / fin ** 0.5
        if kw["bias"]:
            params["b"] = torch.randn(kw["out"], generator=gen) * 0.1
    for v in params.values():
        v.requires_grad_(True)
    w, b = params.get("w"), params.get("b")
    if op == "conv":
        y = F.conv2d(x, w, b, stride=kw["s"], padding=kw["p"])
    elif op == "bn":
        y = F.batch_norm(x, rm, rv, w, b, training=bool(kw["training"]),
                         momentum=kw["momentum"], eps=1e-5)
        if kw.get("relu"):
            y = F.relu(y)
        t["rm_out"], t["rv_out"] = rm, rv
    elif op == "relu":
        y = F.relu(x)
    elif op == "pool":
        if kw["alg"] == 0:
            y = F.max_pool2d(x, kw["k"], kw["s"], kw["p"])
        else:
            y = F.avg_pool2d(x, kw["k"], kw["s"], kw["p"], count_include_pad=kw["alg"] == 1)
    elif op == "gap":
        y = F.adaptive_avg_pool2d(x, 1)
    elif op == "linear":
        y = F.linear(x.flatten(1), w, b)[:, :, None, None]
    elif op == "flatten":
        y = x.flatten(1)[:, :, None, None]
    elif op == "add":
        y = F.relu(x) + x
    elif op == "concat":
        y = torch.cat([x, F.relu(x)], 1)
    elif op == "dropout":
        m = dropout_mask(shape, kw["p"], kw["seed"], kw["step"], [kw["id0"], kw["id1"]], 0)
        y = x * (torch.from_numpy(m) * (1.0 / (1.0 - kw["p"])))
    elif op == "ce":
        labels = torch.tensor([0, 3, 4, 1][: shape[0]])
        t["labels"] = labels.numpy().astype(np.int32)
        y = F.cross_entropy(x[:, :, 0, 0], labels, reduction="none",
                            label_smoothing=kw["smoothing"])[:, None, None, None]
    dy = torch.randn(y.shape, generator=gen)
    (y * dy).sum().backward()
    t["x"], t["dy"], t["y"], t["gx"] = x.detach(), dy, y.detach(), x.grad
    for k_, v in params.items():
        t[k_] = v.detach()
        t["g" + k_] = v.grad
    out = {}
    for k_, v in t.items():
        a = v.numpy() if torch.is_tensor(v) else v
        out["%s.%s" % (name, k_)] = np.ascontiguousarray(a)
    meta = op + "".join(" %s=%s" % (k_, v) for k_, v in kw.items())
    return out, meta


SAMPLE = 2048
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def load_safetensors(path):
    import json
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dt = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "U8": np.uint8,
          "I32": np.int32, "F64": np.float64}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt[v["dtype"]]).reshape(v["shape"])
        out[k] = torch.from_numpy(arr.astype(np.float32) if arr.dtype == np.float16 else arr.copy())
    return out


def sample(t):
    f = t.detach().reshape(-1).numpy().astype(np.float32)
    if f.size <= SAMPLE:
        return f
    idx = (np.arange(SAMPLE, dtype=np.int64) * f.size) // SAMPLE
    return f[idx]


def model_step(tag, model, weights, u8, labels, mean, std, G, smoothing, out, meta):
    sd = load_safetensors(os.path.join(HERE, weights))
    model.load_state_dict({k: v for k, v in sd.items()})
    model.train()
    x = torch.from_numpy(u8).float().div(255)
    if mean is not None:
        x = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    lab = torch.from_numpy(labels.astype(np.int64))
    logits = model(x)
    loss = F.cross_entropy(logits, lab, reduction="none", label_smoothing=smoothing)
    (loss.sum() / G).backward()
    out[tag + ".input_u8"] = u8
    out[tag + ".labels"] = labels.astype(np.int32)
    out[tag + ".loss"] = loss.detach().numpy()
    out[tag + ".logits"] = logits.detach().numpy()
    for name, p in model.named_parameters():
        out["%s:%s.grad" % (tag, name)] = sample(p.grad)
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out["%s:%s.after" % (tag, name)] = sample(b)
    meta[tag] = "weights=%s global_batch=%d smoothing=%s" % (weights, G, smoothing)


def gen_models():
    import torchvision
    sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
    from seed_models import WideResNet
    torch.manual_seed(0)
    rng = np.random.RandomState(5)
    out, meta = {}, {}
    u8 = rng.randint(0, 256, size=(2, 3, 64, 64)).astype(np.uint8)
    model_step("resnet18", torchvision.models.resnet18(weights=None), "resnet18.safetensors",
               u8, np.array([3, 917]), MEAN, STD, 3, 0.1, out, meta)
    wrn = WideResNet(10, (8, 16, 24, 32), 1)
    for m in wrn.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0   # the C side runs with dropout off (masks cannot match torch's RNG)
    u8 = rng.randint(0, 256, size=(4, 1, 28, 28)).astype(np.uint8)
    model_step("wrn", wrn, "wrn_small.safetensors", u8, np.array([1, 0, 9, 4]), None, None,
               5, 0.0, out, meta)
    save_safetensors(os.path.join(HERE, "grads", "models.safetensors"), out, meta)


def main():
    torch.set_num_threads(1)   # a threaded conv backward sums in a load-dependent order
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    tensors, meta = {}, {}
    for name, op, shape, kw in CASES:
        t, m = run_case(name, op, shape, kw, gen)
        tensors.update(t)
        meta[name] = m
    save_safetensors(os.path.join(HERE, "grads", "ops.safetensors"), tensors, meta)
    gen_models()


if __name__ == "__main__":
    main()
