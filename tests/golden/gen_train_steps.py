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
Each case and step k = 1..3 uses its own fixed batch ("<m>/<case>.input_u8"
[3,n,c,h,w], "<m>/<case>.labels" [3,n] I32): train-mode forward, loss = sum
of per-sample CE / n, backward, optimizer.step(), then scheduler.step() (one
"epoch" per step, as the seeds step per epoch, so the 3 steps use 3 learning
rates).

Screening (every step of every case): a float32 forward puts a ReLU input
that lies within its rounding of 0 on either side, and one such flip moves
the gradients of a BatchNorm channel with few values (resnet18's layer4 sees
16 per channel) by percents — PyTorch's and ddpipe's float32 would then
disagree far beyond the 1e-5 tested, though neither is wrong. So each step's
batch is drawn from RandomState(seed) for the first seed (from a base per
model, case and step) whose float64 forward, on the weights that step
starts from, keeps every ReLU input with at most K values per channel at
least MARGIN[m][K] away from 0 (metadata "<m>/<case>.seeds": the seeds used).

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
global batch of 5 ("gbatch.input_u8" [3,5,1,28,28], "gbatch.labels",
screened on each worker's shard). Each
worker is its own model copy (as DDP ranks): it runs its shard in train
mode (BatchNorm statistics of its own shard, its own running stats),
backward of sum(CE) / 5; the two .grad are summed and every worker steps
the same optimizer on the sum. Saved: gbatch/<case>:<param>.<k> (the same on
both workers) and gbatch/<case>:w<r>.<buffer>.<k> (worker r's running stats).

DenseNet-121 (second output, tests/golden/train_steps/densenet.safetensors,
so that neither file passes 2 MB): torchvision's densenet121 with a 10-class
head on the synthesised weights of gen_densenet.py (metadata
"densenet121.manifest"; tests/gpud/synth.h rebuilds them), batches
[2,3,64,64] with ImageNet normalisation, cases DENSENET_CASES. Its golden
runs in float64 (the float32 weights and inputs, widened): PyTorch's own
float32 gradients of this net are ~1e-3 off the exact ones (59 train-mode
BatchNorms over few values per channel), so a float32 golden would measure
PyTorch's rounding; the small learning rates keep the weights' float32
noise under the 1e-5 tested at step 1. From step 2 on, BatchNorms over 8
values per channel (block 4) whose channels ReLU nearly emptied amplify
rounding of the weights, so the float32 of any implementation drifts from
the exact values: each key "<k>" has "<k>.tol" [1] = max(1e-5, 3 * PyTorch
float32's own error there, in the C test's metric) — ddpipe must be as
close to exact as PyTorch's float32 (to 3x). Keys as above with m =
densenet121 (SAMPLE 64) plus the "scheds" tensors, so the C test reads it
like the main file.

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
# Screening margins (see the docstring): {K: min |ReLU input| where a
# channel has at most K values (above every key: not screened)}, by model.
# resnet18's float32 forward rounding reaches ~5e-6 at layer4's ReLU inputs
# (noise images; the flip seen unscreened was at -3.5e-6) and is smaller in
# the shallower stages, where a flip also matters less (one value of 256 or
# 1024 per channel); layer1 has ~3e5 ReLU inputs per forward, so a margin
# much above 1e-6 there is rarely clear (2e-5 needed ~50 draws per step).
MARGIN = {"resnet18": {16: 2e-5, 64: 1e-5, 256: 3e-6, 1024: 1e-6},
          "wrn": {3136: 1e-5}}
SEED0 = {"wrn": 5000, "resnet18": 1000, "gbatch": 9000}
MAX_TRIES = 400
# densenet121: (name, kind, lr, options, no_decay, schedule); 2x3x64x64
# batches (at 32x32 block 4 is 1x1: BatchNorm over 2 values, and a channel
# that ReLU zeroed in both samples has variance 0, 1/sqrt(eps) = 316 in its
# gradient: no float32 run can follow float64 there). Screened with
# MARGIN["densenet121"]: 1e-5 where a channel has at most 8 values (block 4:
# a flip there moves a channel by percents), 2e-7 up to 2048 (blocks 1-3 and
# the stem: ~2e6 ReLU inputs whose nearest to 0 is typically 1e-7..1e-6, and
# a flip moves a channel of 32+ values far less).
DENSENET_CASES = [
    ("sgd_nesterov", "sgd", 1e-3, {"momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
     True, "warmup_cosine"),
    ("adamw", "adamw", 1e-5, {"weight_decay": 0.05, "eps": 1e-4}, True, "warmup_cosine"),
]
MARGIN["densenet121"] = {8: 1e-5, 2048: 2e-7}
SEED0["densenet121"] = 20000
DENSENET_OUT = os.path.join(HERE, "train_steps", "densenet.safetensors")
DN_TOL_FACTOR = 3.0
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
    if tag == "densenet121":
        from gen_densenet import synth_model
        m, _ = synth_model(torch.float64)
        m.train()
        return m
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


class _Below(Exception):
    pass


def relu_margins(model, x, table=None):
    """min |ReLU input| of one float64 forward, by values per channel; model
    is already a float64 copy. With table: None as soon as one ReLU input
    misses its margin (the rest of the forward is skipped)."""
    got = {}

    def pre(mod, inp):
        t = inp[0]
        k = t.shape[0] * t.shape[2] * t.shape[3]
        got[k] = min(got.get(k, np.inf), t.detach().abs().min().item())
        if table is not None and not margins_ok({k: got[k]}, table):
            raise _Below()

    hooks = [mod.register_forward_pre_hook(pre) for mod in model.modules()
             if isinstance(mod, torch.nn.ReLU)]
    try:
        with torch.no_grad():
            model(x.double())
    except _Below:
        return None
    finally:
        for h in hooks:
            h.remove()
    return got


def margins_ok(got, table):
    """Every ReLU input with K values per channel clears the margin of the
    smallest key >= K of table (K above every key: not screened)."""
    keys = sorted(table)
    for k, v in got.items():
        bound = next((b for b in keys if k <= b), None)
        if bound is not None and v < table[bound]:
            return False
    return True


def pick_batch(models, shards, shape, classes, mean, std, table, seed0):
    """(seed, u8 [*shape], labels [n]) for the first seed from seed0 whose
    float64 forward through models[i] on shard i clears the margins."""
    m64 = [copy.deepcopy(m).double() for m in models]   # same weights for every try
    for s in range(seed0, seed0 + MAX_TRIES):
        rs = np.random.RandomState(s)
        u8 = rs.randint(0, 256, size=shape).astype(np.uint8)
        labels = rs.randint(0, classes, size=shape[0]).astype(np.int32)
        lo, ok = 0, True
        for m, n in zip(m64, shards):
            ok = ok and relu_margins(m, to_input(u8[lo:lo + n], mean, std), table) is not None
            lo += n
        if ok:
            return s, u8, labels
    raise SystemExit("no batch from seed %d clears the ReLU margins" % seed0)


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


def run_case(tag, ci, case, shape, classes, mean, std, n_sample, out, meta, replay=None):
    """replay: (u8 [STEPS, ...], labels) to run on instead of screening."""
    name, kind, lr, opts, no_decay, sched = case
    model = build(tag) if replay is None else build(tag).float()
    opt = make_optimizer(kind, model, no_decay, lr, opts)
    sch = make_sched(opt, sched)
    losses, u8s, labs, seeds = [], [], [], []
    for k in range(STEPS):
        if replay is None:
            seed, u8, labels = pick_batch([model], [shape[0]], shape, classes, mean, std,
                                          MARGIN[tag], SEED0[tag] + 1000 * ci + 100 * k)
        else:
            seed, u8, labels = -1, replay[0][k], replay[1][k]
        u8s.append(u8)
        labs.append(labels)
        seeds.append(str(seed))
        opt.zero_grad(set_to_none=True)
        x = to_input(u8, mean, std).to(next(model.parameters()).dtype)
        loss = F.cross_entropy(model(x), torch.from_numpy(labels.astype(np.int64)),
                               reduction="none")
        (loss.sum() / x.shape[0]).backward()
        opt.step()
        if sch:
            sch.step()
        losses.append(loss.detach().numpy())
        save_state(out, ("%s/%s" % (tag, name), k + 1), model, n_sample)
    out["%s/%s.loss" % (tag, name)] = np.stack(losses).astype(np.float32)
    out["%s/%s.input_u8" % (tag, name)] = np.stack(u8s)
    out["%s/%s.labels" % (tag, name)] = np.stack(labs)
    meta["%s/%s.seeds" % (tag, name)] = ",".join(seeds)
    out["%s/%s/cfg" % (tag, name)] = case_cfg(kind, lr, opts, no_decay, sched_index(sched))


def run_gbatch(case, n_sample, out, meta):
    name, kind, lr, opts, no_decay, sched = case
    workers = [build("wrn")]
    workers.append(copy.deepcopy(workers[0]))
    opts_ = [make_optimizer(kind, w, no_decay, lr, opts) for w in workers]
    scheds = [make_sched(o, sched) for o in opts_]
    G = sum(GBATCH_SHARDS)
    u8 = np.zeros((STEPS, G, 1, 28, 28), np.uint8)
    labels = np.zeros((STEPS, G), np.int32)
    seeds = []
    for k in range(STEPS):
        seed, u8[k], labels[k] = pick_batch(workers, GBATCH_SHARDS, (G, 1, 28, 28), 10, None,
                                            None, MARGIN["wrn"], SEED0["gbatch"] + 100 * k)
        seeds.append(str(seed))
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
    out["gbatch.input_u8"] = u8
    out["gbatch.labels"] = labels
    meta["gbatch.seeds"] = ",".join(seeds)


def put_scheds(out):
    for sname, phases, milestones in SCHEDS:
        cfg, ms = sched_cfg(phases, milestones)
        out["sched/%s/cfg" % sname] = cfg
        out["sched/%s/milestones" % sname] = ms


def gen_densenet():
    from gen_densenet import synth_model
    out, meta = {}, {}
    put_scheds(out)
    _, manifest = synth_model(torch.float32)
    meta.update({"densenet121.manifest": manifest, "densenet121.sample": "64",
                 "cases": ",".join(c[0] for c in DENSENET_CASES),
                 "scheds": ",".join(s[0] for s in SCHEDS), "dtype": "float64",
                 "torch": torch.__version__, "generator": "tests/golden/gen_train_steps.py"})
    for ci, case in enumerate(DENSENET_CASES):
        run_case("densenet121", ci, case, (2, 3, 64, 64), 10, MEAN, STD, 64, out, meta)
        # PyTorch's own float32 on the same batches: its distance from the
        # float64 values sets each key's tolerance
        key = "densenet121/%s" % case[0]
        out32 = {}
        run_case("densenet121", ci, case, (2, 3, 64, 64), 10, MEAN, STD, 64, out32, {},
                 replay=(out[key + ".input_u8"], out[key + ".labels"]))
        for k, v in out32.items():
            if v.dtype == np.float32 and k in out and not k.endswith("/cfg"):
                ref = out[k].astype(np.float64)
                dev = np.max(np.abs(v - ref) / np.maximum(1.0, np.abs(ref)))
                out[k + ".tol"] = np.array([max(1e-5, DN_TOL_FACTOR * dev)], np.float32)
        print("densenet121 %s: seeds %s" % (case[0], meta["densenet121/%s.seeds" % case[0]]),
              flush=True)
    safetensors_io.save(out, DENSENET_OUT, meta)
    print("wrote %s: %d tensors, %d bytes" % (DENSENET_OUT, len(out),
                                              os.path.getsize(DENSENET_OUT)))


def main():
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    if sys.argv[1:] == ["densenet"]:
        gen_densenet()
        return
    out, meta = {}, {}
    put_scheds(out)
    models = [("wrn", (4, 1, 28, 28), 10, None, None, 256),
              ("resnet18", (4, 3, 64, 64), 1000, MEAN, STD, 128)]
    for tag, shape, classes, mean, std, n_sample in models:
        meta[tag + ".sample"] = str(n_sample)
        for ci, case in enumerate(CASES):
            if tag == "resnet18":
                lr, over = RESNET18[case[0]]
                case = (case[0], case[1], lr, dict(case[3], **over)) + case[4:]
            run_case(tag, ci, case, shape, classes, mean, std, n_sample, out, meta)
            print("%s %s: seeds %s" % (tag, case[0], meta["%s/%s.seeds" % (tag, case[0])]),
                  flush=True)
    run_gbatch([c for c in CASES if c[0] == GBATCH_CASE][0], 256, out, meta)
    meta.update({"cases": ",".join(c[0] for c in CASES), "scheds": ",".join(s[0] for s in SCHEDS),
                 "gbatch.case": GBATCH_CASE,
                 "gbatch.shards": ",".join(str(n) for n in GBATCH_SHARDS),
                 "torch": torch.__version__, "generator": "tests/golden/gen_train_steps.py"})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    safetensors_io.save(out, OUT, meta)
    print("wrote %s: %d tensors, %d bytes" % (OUT, len(out), os.path.getsize(OUT)))
    if sys.argv[1:] != ["main"]:
        gen_densenet()


if __name__ == "__main__":
    main()
