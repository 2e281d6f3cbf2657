#!/usr/bin/python3
"""Whole-model training goldens: 3 optimizer steps of the seed WideResNet and
resnet18 in PyTorch 1.13 (run with Debian's /usr/bin/python3).
Output: tests/golden/train_steps/steps.safetensors, checked by
tests/gpud/test_train_optim.c.

Models (initial weights from the repository's golden weight files):
  wrn       tests/golden/wrn_small.safetensors, WideResNet(10, (8,16,24,32), 1),
            batches [4,1,28,28] uint8 (plain ToTensor), dropout off (p = 0:
            torch's masks cannot be reproduced; the C side sets no_dropout)
  resnet18  tests/golden/resnet18.safetensors (1000 classes), batches
            [4,3,64,64] uint8 with ImageNet normalisation
Each step k = 1..3 uses its own fixed batch ("<m>.input_u8" [3,n,c,h,w],
"<m>.labels" [3,n] I32): train-mode forward, loss = sum of per-sample CE /
n, backward, optimizer.step(), then scheduler.step() (one "epoch" per step,
as the seeds step per epoch, so the 3 steps use 3 learning rates).

Optimizer cases (metadata "cases"), each from the same initial weights:
  <m>/<case>/cfg           F64 [13], the layout of gen_optim.py: kind (0 sgd,
                           1 adam, 2 adamw, 3 novograd), lr, weight_decay,
                           momentum, dampening, nesterov, beta1, beta2, eps,
                           amsgrad, grad_averaging, no_decay (1: every
                           parameter with ndim <= 1 — BatchNorm weights and
                           biases — in a second group with weight_decay 0),
                           schedule index into "scheds" (-1: constant lr)
  <m>/<case>.loss          F32 [3, n] per-sample losses of each step
  <m>/<case>:<name>.<k>    parameters and BatchNorm running stats after step k
                           (sampled, see below)
Schedules: sched/<name>/{cfg,milestones,base_lr,lr} as gen_optim.py.

Global batch (gbatch/...): WRN, 2 workers with uneven shards 3 + 2 of a
global batch of 5 ("gbatch.input_u8" [3,5,1,28,28], "gbatch.labels"). Each
worker is its own model copy (as DDP ranks): it runs its shard in train
mode (BatchNorm statistics of its own shard, its own running stats),
backward of sum(CE) / 5; the two .grad are summed and every worker steps
the same optimizer on the sum. Saved: gbatch/<case>:<param>.<k> (the same on
both workers) and gbatch/<case>:w<r>.<buffer>.<k> (worker r's running stats).

Sampling: a tensor with <= SAMPLE values is saved whole (flattened), else
the SAMPLE values at flat indices i * numel // SAMPLE (SAMPLE 256 for the
WideResNet, 128 for resnet18 — the C test takes the same; metadata
"<m>.sample"). Deterministic (seeded): same bytes on every run.
"""
import copy
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402
from gen_optim import (case_cfg, make_scheduler, optimizer_for_groups,  # noqa: E402
                       sched_cfg)
from seed_models import WideResNet  # noqa: E402

OUT = os.path.join(HERE, "train_steps", "steps.safetensors")
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
STEPS = 3

# name: (base_lr, [(kind, kwargs)], milestones) — stepped once per optimizer step
SCHEDS = [
    ("warmup_cosine", [("linear", dict(start_factor=0.1, end_factor=1.0, total_iters=2)),
                       ("cosine", dict(T_max=4, eta_min=1e-4))], [2]),
    ("step", [("step", dict(step_size=1, gamma=0.5))], []),
]
SCHED_INDEX = {s[0]: i for i, s in enumerate(SCHEDS)}

# name: (kind, lr, options, no_decay, schedule or None)
CASES = [
    ("sgd_nesterov", "sgd", 0.01, {"momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
     True, "warmup_cosine"),
    ("sgd_step", "sgd", 0.01, {"momentum": 0.9, "weight_decay": 1e-4}, False, "step"),
    ("adam", "adam", 5e-5, {"eps": 1e-6}, False, None),
    ("adamw", "adamw", 5e-5, {"weight_decay": 0.05, "eps": 1e-6}, True, "warmup_cosine"),
    ("novograd", "novograd", 0.01, {"betas": (0.95, 0.98), "weight_decay": 1e-3,
                                     "grad_averaging": True}, True, None),
]
# resnet18 on 4 random-noise images is far worse conditioned in float32:
# PyTorch's own float32 and float64 runs of the WideResNet cases differ by up
# to 2e-4 here after 3 steps (conv1's gradient is large, layer4's BatchNorm
# sees 16 values per channel). Smaller steps keep that rounding
# amplification under the 1e-5 being tested, and Adam/AdamW get eps 1e-4:
# with eps far below the float32 noise of a near-zero gradient (~1e-6 here)
# Adam's first step is lr * sign(noise) for such elements.
# name: (lr, option overrides)
RESNET18 = {"sgd_nesterov": (1e-3, {}), "sgd_step": (1e-3, {}),
            "adam": (1e-4, {"eps": 1e-4}), "adamw": (1e-4, {"eps": 1e-4}),
            "novograd": (1e-3, {})}
# resnet18's step-1 batch must keep every ReLU input of the low-resolution
# stages away from the kink: with 16 (layer4) or 64 (layer3) values per
# BatchNorm channel, one pre-activation that float32 forward rounding (~1e-5
# here, PyTorch's and oneDNN-NHWC's alike) puts on the other side of 0 moves
# that channel's gradients by a few percent, and everything upstream with
# them — a random draw had one at -3.5e-6 (float64), which PyTorch float32
# happened to keep negative and ddpipe's "cpu" backend did not. The batch is
# drawn from RandomState(R18_SEED0 + s) for the first s whose float64
# forward keeps |ReLU input| >= R18_MARGIN[values per channel] (metadata
# "resnet18.seed"). Steps 2-3 (other weights per case) are not screened:
# the C test compares them at a looser bound.
R18_SEED0 = 1000
R18_MARGIN = {16: 3e-5, 64: 3e-5, 256: 2e-5, 1024: 2e-5}
GBATCH_CASE = "sgd_nesterov"
GBATCH_SHARDS = (3, 2)


def make_optimizer(kind, model, no_decay, lr, opts):
    named = list(model.named_parameters())
    if no_decay:
        groups = [{"params": [p for _, p in named if p.ndim > 1]},
                  {"params": [p for _, p in named if p.ndim <= 1], "weight_decay": 0.0}]
    else:
        groups = [{"params": [p for _, p in named]}]
    return optimizer_for_groups(kind, groups, lr, opts)


def sched_index(sched):
    return SCHED_INDEX[sched] if sched else -1


def sample(t, n):
    f = t.detach().reshape(-1).numpy().astype(np.float32)
    if f.size <= n:
        return f.copy()
    return f[(np.arange(n, dtype=np.int64) * f.size) // n].copy()


def to_input(u8, mean, std):
    x = torch.from_numpy(u8).float().div(255)
    if mean is not None:
        x = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    return x


def build(tag):
    import torchvision
    if tag == "wrn":
        m = WideResNet(10, (8, 16, 24, 32), 1)
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        weights = "wrn_small.safetensors"
    else:
        m = torchvision.models.resnet18(weights=None)
        weights = "resnet18.safetensors"
    sd = safetensors_io.load(os.path.join(HERE, weights))
    res = m.load_state_dict(sd, strict=False)   # num_batches_tracked may be absent
    bad = [k for k in res.missing_keys if not k.endswith("num_batches_tracked")]
    assert not bad and not res.unexpected_keys, (bad, res.unexpected_keys)
    m.train()
    return m


def relu_margins(model, x):
    """min |ReLU input| of one float64 forward, by values per channel."""
    m = copy.deepcopy(model).double()
    got = {}

    def pre(mod, inp):
        t = inp[0]
        k = t.shape[0] * t.shape[2] * t.shape[3]
        got[k] = min(got.get(k, np.inf), t.detach().abs().min().item())

    for mod in m.modules():
        if isinstance(mod, torch.nn.ReLU):
            mod.register_forward_pre_hook(pre)
    with torch.no_grad():
        m(x.double())
    return got


def r18_batches(shape):
    """(seed, u8 [STEPS, *shape]) whose step 1 clears R18_MARGIN."""
    model = build("resnet18")
    for s in range(200):
        u8 = np.random.RandomState(R18_SEED0 + s).randint(
            0, 256, size=(STEPS,) + shape).astype(np.uint8)
        got = relu_margins(model, to_input(u8[0], MEAN, STD))
        if all(got.get(k, np.inf) >= v for k, v in R18_MARGIN.items()):
            return R18_SEED0 + s, u8
    raise SystemExit("no resnet18 batch clears the ReLU margins")


def make_sched(opt, sched):
    if not sched:
        return None
    _, phases, milestones = SCHEDS[SCHED_INDEX[sched]]
    return make_scheduler(opt, phases, milestones)


def save_state(out, prefix, model, n, buffers_prefix=None):
    for name, p in model.named_parameters():
        out["%s:%s.%d" % (prefix[0], name, prefix[1])] = sample(p, n)
    for name, b in model.named_buffers():
        if name.endswith("num_batches_tracked"):
            continue
        key = name if buffers_prefix is None else buffers_prefix + name
        out["%s:%s.%d" % (prefix[0], key, prefix[1])] = sample(b, n)


def run_case(tag, case, u8, labels, mean, std, n_sample, out):
    name, kind, lr, opts, no_decay, sched = case
    model = build(tag)
    opt = make_optimizer(kind, model, no_decay, lr, opts)
    sch = make_sched(opt, sched)
    losses = []
    for k in range(STEPS):
        opt.zero_grad(set_to_none=True)
        x = to_input(u8[k], mean, std)
        loss = F.cross_entropy(model(x), torch.from_numpy(labels[k].astype(np.int64)),
                               reduction="none")
        (loss.sum() / x.shape[0]).backward()
        opt.step()
        if sch:
            sch.step()
        losses.append(loss.detach().numpy())
        save_state(out, ("%s/%s" % (tag, name), k + 1), model, n_sample)
    out["%s/%s.loss" % (tag, name)] = np.stack(losses).astype(np.float32)
    out["%s/%s/cfg" % (tag, name)] = case_cfg(kind, lr, opts, no_decay, sched_index(sched))


def run_gbatch(case, u8, labels, n_sample, out):
    name, kind, lr, opts, no_decay, sched = case
    workers = [build("wrn")]
    workers.append(copy.deepcopy(workers[0]))
    opts_ = [make_optimizer(kind, w, no_decay, lr, opts) for w in workers]
    scheds = [make_sched(o, sched) for o in opts_]
    G = sum(GBATCH_SHARDS)
    for k in range(STEPS):
        lo = 0
        for w, o, n in zip(workers, opts_, GBATCH_SHARDS):
            o.zero_grad(set_to_none=True)
            x = to_input(u8[k, lo:lo + n], None, None)
            lab = torch.from_numpy(labels[k, lo:lo + n].astype(np.int64))
            (F.cross_entropy(w(x), lab, reduction="none").sum() / G).backward()
            lo += n
        # the all-reduce: every worker holds the sum of the shards' gradients
        params = [list(w.parameters()) for w in workers]
        for p0, p1 in zip(*params):
            s = p0.grad + p1.grad
            p0.grad, p1.grad = s.clone(), s.clone()
        for o, s in zip(opts_, scheds):
            o.step()
            if s:
                s.step()
        for a, b in zip(*params):
            assert torch.equal(a, b), "workers diverged"
        prefix = ("gbatch/%s" % name, k + 1)
        for pname, p in workers[0].named_parameters():
            out["%s:%s.%d" % (prefix[0], pname, k + 1)] = sample(p, n_sample)
        for r, w in enumerate(workers):
            for bname, b in w.named_buffers():
                if not bname.endswith("num_batches_tracked"):
                    out["%s:w%d.%s.%d" % (prefix[0], r, bname, k + 1)] = sample(b, n_sample)
    out["gbatch/%s/cfg" % name] = case_cfg(kind, lr, opts, no_decay, sched_index(sched))


def main():
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.RandomState(11)
    out, meta = {}, {}
    for i, (sname, phases, milestones) in enumerate(SCHEDS):
        cfg, ms = sched_cfg(phases, milestones)
        out["sched/%s/cfg" % sname] = cfg
        out["sched/%s/milestones" % sname] = ms
    models = [("wrn", (4, 1, 28, 28), 10, None, None, 256),
              ("resnet18", (4, 3, 64, 64), 1000, MEAN, STD, 128)]
    for tag, shape, classes, mean, std, n_sample in models:
        u8 = rng.randint(0, 256, size=(STEPS,) + shape).astype(np.uint8)
        labels = rng.randint(0, classes, size=(STEPS, shape[0])).astype(np.int32)
        if tag == "resnet18":   # (the draw above keeps rng's stream as it was)
            seed, u8 = r18_batches(shape)
            meta[tag + ".seed"] = str(seed)
        out[tag + ".input_u8"] = u8
        out[tag + ".labels"] = labels
        meta[tag + ".sample"] = str(n_sample)
        for case in CASES:
            if tag == "resnet18":
                lr, over = RESNET18[case[0]]
                case = (case[0], case[1], lr, dict(case[3], **over)) + case[4:]
            run_case(tag, case, u8, labels, mean, std, n_sample, out)
    G = sum(GBATCH_SHARDS)
    u8 = rng.randint(0, 256, size=(STEPS, G, 1, 28, 28)).astype(np.uint8)
    labels = rng.randint(0, 10, size=(STEPS, G)).astype(np.int32)
    out["gbatch.input_u8"] = u8
    out["gbatch.labels"] = labels
    run_gbatch([c for c in CASES if c[0] == GBATCH_CASE][0], u8, labels, 256, out)
    meta.update({"cases": ",".join(c[0] for c in CASES), "scheds": ",".join(s[0] for s in SCHEDS),
                 "gbatch.case": GBATCH_CASE,
                 "gbatch.shards": ",".join(str(n) for n in GBATCH_SHARDS),
                 "torch": torch.__version__, "generator": "tests/golden/gen_train_steps.py"})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    safetensors_io.save(out, OUT, meta)
    print("wrote %s: %d tensors, %d bytes" % (OUT, len(out), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
