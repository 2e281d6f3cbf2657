#!/usr/bin/python3
"""Generate the optimizer and learning-rate-schedule goldens of gpud/optim
(run with Debian's python3: torch 1.13). Output: tests/golden/optim/optim.safetensors

Optimizer cases (metadata "cases", comma-separated): a small "model" of five
tensors (conv.weight [4,2,3,3], bn.weight [4], bn.bias [4], fc.weight [3,8],
fc.bias [3]), initial weights, 3 steps of gradients, and PyTorch's weights
and optimizer state after each step:

  <case>/init/<param>            weights before the first step
  <case>/grad/<k>/<param>        gradient of step k = 1..3 (absent: p.grad is None)
  <case>/after/<k>/<param>       weights after step k
  <case>/state/<param>/<name>    optimizer state after step 3 (PyTorch's names)
  <case>/cfg                     F64 [13]: kind (0 sgd, 1 adam, 2 adamw, 3 novograd),
                                 lr, weight_decay, momentum, dampening, nesterov,
                                 beta1, beta2, eps, amsgrad, grad_averaging,
                                 no_decay (1: bn.* and *.bias in a second param group
                                 with weight_decay 0), schedule index (-1: constant lr)

When a case has a schedule, it starts from the case's lr (its base_lr is not
used) and is stepped after each optimizer step (one "epoch" per step), so the
3 steps use 3 different learning rates.

Schedules (metadata "scheds"): 50 epochs of get_last_lr() from
torch.optim.lr_scheduler, stepped once per epoch:

  sched/<name>/cfg               F64 [n, 8]: kind (0 LinearLR, 1 StepLR, 2 CosineAnnealingLR),
                                 start_factor, end_factor, total_iters, step_size, gamma,
                                 T_max, eta_min
  sched/<name>/milestones        F64 [n] (n-1 SequentialLR milestones, then a 0)
  sched/<name>/base_lr           F64 []
  sched/<name>/lr                F64 [50]

NovoGrad: torch has none. The NVIDIA DDP course uses NovoGrad with
grad_averaging=True (`NovoGrad(params, lr=..., grad_averaging=True,
weight_decay=...)`); its signature is torch-optimizer's (jettify/pytorch-optimizer,
torch_optimizer/novograd.py, v0.3), itself NVIDIA DeepLearningExamples'
Novograd. That package is not in Debian, so NovoGrad below is a re-statement
of its step (same operations, same order), written as a torch Optimizer.

Deterministic: the same bytes on every run.
"""
import math
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402

OUT = os.path.join(HERE, "optim", "optim.safetensors")
SHAPES = [("conv.weight", (4, 2, 3, 3)), ("bn.weight", (4,)), ("bn.bias", (4,)),
          ("fc.weight", (3, 8)), ("fc.bias", (3,))]
KINDS = {"sgd": 0, "adam": 1, "adamw": 2, "novograd": 3}
SCHED_KINDS = {"linear": 0, "step": 1, "cosine": 2}
EPOCHS = 50


class NovoGrad(torch.optim.Optimizer):
    """torch-optimizer 0.3's NovoGrad (https://arxiv.org/abs/1905.11286): one
    second moment per tensor, of the squared gradient norm; while it is 0 it
    takes the norm itself (first step); the gradient is divided by
    sqrt(v) + eps, then gets the L2 term, then (grad_averaging) times 1 - beta1,
    and feeds a momentum without bias correction."""

    def __init__(self, params, lr=1e-3, betas=(0.95, 0), eps=1e-8, weight_decay=0,
                 grad_averaging=False, amsgrad=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        grad_averaging=grad_averaging, amsgrad=amsgrad)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.clone()   # the original divides p.grad in place; keep ours
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros([])
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros([])
                state["step"] += 1
                v = state["exp_avg_sq"]
                norm = torch.sum(torch.pow(grad, 2))
                if v == 0:
                    v.copy_(norm)
                else:
                    v.mul_(beta2).add_(norm, alpha=1 - beta2)
                if group["amsgrad"]:
                    torch.max(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
                    denom = state["max_exp_avg_sq"].sqrt().add_(group["eps"])
                else:
                    denom = v.sqrt().add_(group["eps"])
                grad.div_(denom)
                if group["weight_decay"] != 0:
                    grad.add_(p, alpha=group["weight_decay"])
                if group["grad_averaging"]:
                    grad.mul_(1 - beta1)
                state["exp_avg"].mul_(beta1).add_(grad)
                p.add_(state["exp_avg"], alpha=-group["lr"])


# name: (kind, lr, options, no_decay, schedule name or None, {step: [params without grad]})
CASES = [
    ("sgd", "sgd", 0.1, {}, False, None, {}),
    ("sgd_momentum", "sgd", 0.1, {"momentum": 0.9}, False, "linear", {}),
    ("sgd_nesterov_wd", "sgd", 0.05, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
     True, None, {}),
    ("sgd_dampening", "sgd", 0.1, {"momentum": 0.8, "dampening": 0.5, "weight_decay": 0.02},
     False, "warmup_step", {}),
    ("adam", "adam", 0.01, {}, False, None, {}),
    ("adam_wd_amsgrad", "adam", 0.02, {"weight_decay": 0.01, "amsgrad": True, "betas": (0.8, 0.9)},
     False, "cosine", {}),
    ("adam_skip", "adam", 0.01, {}, False, None, {2: ["fc.bias"]}),
    ("adamw", "adamw", 0.01, {"weight_decay": 0.1}, True, "warmup_cosine", {}),
    ("novograd", "novograd", 0.05, {"betas": (0.95, 0.98), "weight_decay": 0.001,
                                     "grad_averaging": True}, False, None, {}),
    ("novograd_ams", "novograd", 0.02, {"betas": (0.9, 0.5), "amsgrad": True,
                                         "weight_decay": 0.01}, True, "step", {}),
]

# name: (base_lr, [(kind, kwargs)], milestones)
SCHEDS = [
    ("linear", 0.1, [("linear", dict(start_factor=0.1, end_factor=1.0, total_iters=5))], []),
    ("linear_default", 0.1, [("linear", {})], []),
    ("step", 0.1, [("step", dict(step_size=10, gamma=0.5))], []),
    ("cosine", 0.1, [("cosine", dict(T_max=20, eta_min=1e-3))], []),
    ("warmup_cosine", 0.4, [("linear", dict(start_factor=0.01, end_factor=1.0, total_iters=5)),
                            ("cosine", dict(T_max=45))], [5]),
    ("warmup_step", 0.1, [("linear", dict(start_factor=0.25, total_iters=3)),
                          ("step", dict(step_size=7, gamma=0.3))], [3]),
    ("three_phase", 0.05, [("linear", dict(start_factor=0.1, end_factor=1.0, total_iters=4)),
                           ("step", dict(step_size=5, gamma=0.5)),
                           ("cosine", dict(T_max=10, eta_min=1e-4))], [4, 20]),
]
SCHED_INDEX = {name: i for i, (name, *_rest) in enumerate(SCHEDS)}


def make_scheduler(opt, phases, milestones):
    S = torch.optim.lr_scheduler
    built = []
    for kind, kw in phases:
        cls = {"linear": S.LinearLR, "step": S.StepLR, "cosine": S.CosineAnnealingLR}[kind]
        built.append(cls(opt, **kw))
    if len(built) == 1:
        return built[0]
    return S.SequentialLR(opt, built, milestones=milestones)


def sched_cfg(phases, milestones):
    rows = []
    for kind, kw in phases:
        rows.append([SCHED_KINDS[kind], kw.get("start_factor", 1.0 / 3), kw.get("end_factor", 1.0),
                     kw.get("total_iters", 5), kw.get("step_size", 0), kw.get("gamma", 0.1),
                     kw.get("T_max", 0), kw.get("eta_min", 0.0)])
    ms = list(milestones) + [0]
    return torch.tensor(rows, dtype=torch.float64), torch.tensor(ms, dtype=torch.float64)


def gen_sched(name, base_lr, phases, milestones, out):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base_lr)
    sch = make_scheduler(opt, phases, milestones)
    lrs = []
    for _ in range(EPOCHS):
        lrs.append(sch.get_last_lr()[0])
        opt.step()
        sch.step()
    cfg, ms = sched_cfg(phases, milestones)
    out[f"sched/{name}/cfg"] = cfg
    out[f"sched/{name}/milestones"] = ms
    out[f"sched/{name}/base_lr"] = torch.tensor(base_lr, dtype=torch.float64)
    out[f"sched/{name}/lr"] = torch.tensor(lrs, dtype=torch.float64)


def make_optimizer(kind, params, no_decay, lr, opts):
    if no_decay:
        decay = [p for n, p in params if not (n.startswith("bn.") or n.endswith("bias"))]
        plain = [p for n, p in params if n.startswith("bn.") or n.endswith("bias")]
        groups = [{"params": decay}, {"params": plain, "weight_decay": 0.0}]
    else:
        groups = [{"params": [p for _, p in params]}]
    return optimizer_for_groups(kind, groups, lr, opts)


def optimizer_for_groups(kind, groups, lr, opts):
    """The PyTorch optimizer of `kind` over param groups (shared with gen_train_steps.py)."""
    opts = dict(opts)
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, foreach=False, **opts)
    if kind == "adam":
        return torch.optim.Adam(groups, lr=lr, foreach=False, **opts)
    if kind == "adamw":
        return torch.optim.AdamW(groups, lr=lr, foreach=False, **opts)
    return NovoGrad(groups, lr=lr, **opts)


def case_cfg(kind, lr, opts, no_decay, sched_index):
    """The cfg vector the C tests read; sched_index -1: no schedule."""
    defaults = {"sgd": {}, "adam": {"betas": (0.9, 0.999), "eps": 1e-8},
                "adamw": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2},
                "novograd": {"betas": (0.95, 0.0), "eps": 1e-8}}[kind]
    o = dict(defaults, **opts)
    b1, b2 = o.get("betas", (0.0, 0.0))
    return torch.tensor([KINDS[kind], lr, o.get("weight_decay", 0.0), o.get("momentum", 0.0),
                         o.get("dampening", 0.0), float(o.get("nesterov", False)), b1, b2,
                         o.get("eps", 0.0), float(o.get("amsgrad", False)),
                         float(o.get("grad_averaging", False)), float(no_decay),
                         sched_index], dtype=torch.float64)


def gen_case(name, kind, lr, opts, no_decay, sched, no_grad, gen, out):
    params = [(n, torch.nn.Parameter(torch.randn(s, generator=gen) * 0.5)) for n, s in SHAPES]
    for n, p in params:
        out[f"{name}/init/{n}"] = p.detach().clone()
    opt = make_optimizer(kind, params, no_decay, lr, opts)
    sch = None
    if sched:
        _, _, phases, milestones = SCHEDS[SCHED_INDEX[sched]]
        sch = make_scheduler(opt, phases, milestones)
    for k in (1, 2, 3):
        for n, p in params:
            if n in no_grad.get(k, []):
                p.grad = None
                continue
            g = torch.randn(p.shape, generator=gen) * (0.3 + 0.2 * k)
            out[f"{name}/grad/{k}/{n}"] = g.clone()
            p.grad = g
        opt.step()
        if sch:
            sch.step()
        for n, p in params:
            out[f"{name}/after/{k}/{n}"] = p.detach().clone()
    for n, p in params:
        for sname, v in opt.state[p].items():
            if v is None:          # SGD without momentum keeps momentum_buffer None
                continue
            if torch.is_tensor(v):
                out[f"{name}/state/{n}/{sname}"] = v.detach().clone().to(torch.float32)
            else:
                out[f"{name}/state/{n}/{sname}"] = torch.tensor(float(v), dtype=torch.float32)
    out[f"{name}/cfg"] = case_cfg(kind, lr, opts, no_decay, SCHED_INDEX[sched] if sched else -1)


def main():
    warnings.simplefilter("ignore")   # scheduler-order warnings of the schedule-only runs
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    out = {}
    for name, base_lr, phases, milestones in SCHEDS:
        gen_sched(name, base_lr, phases, milestones, out)
    for case in CASES:
        gen_case(*case, gen, out)
    meta = {"cases": ",".join(c[0] for c in CASES), "scheds": ",".join(s[0] for s in SCHEDS),
            "torch": torch.__version__, "generator": "tests/golden/gen_optim.py"}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    safetensors_io.save(out, OUT, meta)
    print(f"wrote {OUT}: {len(out)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
