#!/usr/bin/python3
"""Convert PyTorch checkpoints to safetensors (and back) keeping the state_dict names ddpipe loads.

    export_torchvision.py IN.pth OUT.safetensors [--arch resnet18|resnet34|resnet50|densenet121|wideresnet [--channels 16,160,320,640]]
    export_torchvision.py --pretrained-arch resnet18 OUT.safetensors     # random init, no download
    export_torchvision.py --reverse IN.safetensors OUT.pth [--arch ...] [--optimizer-out OPT.pth]

IN.pth may be a state_dict, a dict holding one under 'state_dict' / 'model' / 'model_state_dict'
(as training scripts save them, optimizer and epoch alongside), or a whole pickled nn.Module.
A 'module.' prefix (DistributedDataParallel) or '_orig_mod.' (torch.compile) is stripped.

With --arch the names and shapes are checked against that architecture (torchvision.models.<arch>
or the seed 'wideresnet'); a mismatch is an error that lists the missing, extra and misshapen tensors.
For wideresnet, --channels and the class count default to what the checkpoint's shapes say.
No network is used: torchvision models are built with weights=None.

--reverse also reads ddpipe training checkpoints (gpud/checkpoint.h): the model tensors become the
state_dict; with --optimizer-out the optimizer state (optim.<param>.<state> tensors) becomes a
PyTorch optimizer state_dict (torch.optim.SGD / Adam / AdamW, or torch-optimizer's NovoGrad) whose
parameter indices follow the order the parameters were registered in gpud (metadata optim.params),
or model.parameters() order with --arch; parameters added with decay=false form a second
param_group with weight_decay 0. Load it with optimizer.load_state_dict() on an optimizer built
with the same groups.
"""

import argparse
import collections
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import seed_models  # noqa: E402

CONTAINER_KEYS = ("state_dict", "model_state_dict", "model", "net", "module")
PREFIXES = ("module.", "_orig_mod.")


class ExportError(Exception):
    pass


def _expose_seed_classes():
    """Pickled seed models reference __main__.WideResNet etc. (the course trains from a script)."""
    main = sys.modules["__main__"]
    for name in ("WideResNet", "conv_block", "cbrblock"):
        if not hasattr(main, name):
            setattr(main, name, getattr(seed_models, name))


def _is_tensor_dict(obj):
    return isinstance(obj, dict) and len(obj) > 0 and all(isinstance(v, torch.Tensor) for v in obj.values())


def extract_state_dict(obj, source):
    """Find the model's state_dict in whatever torch.load returned."""
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if _is_tensor_dict(obj):
        return obj
    if isinstance(obj, dict):
        for key in CONTAINER_KEYS:
            if key in obj:
                inner = obj[key]
                if isinstance(inner, torch.nn.Module):
                    return inner.state_dict()
                if _is_tensor_dict(inner):
                    return inner
        non_tensor = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)]
        raise ExportError(f"{source}: no state_dict found: expected tensors, or one of the keys "
                          f"{', '.join(CONTAINER_KEYS)}; top-level keys are {sorted(map(str, obj))[:12]}"
                          + (f" (non-tensor: {non_tensor[:5]})" if non_tensor else ""))
    raise ExportError(f"{source}: holds a {type(obj).__name__}, not a state_dict or nn.Module")


def strip_prefixes(state):
    out = collections.OrderedDict()
    for name, t in state.items():
        stripped = name
        changed = True
        while changed:
            changed = False
            for p in PREFIXES:
                if stripped.startswith(p):
                    stripped, changed = stripped[len(p):], True
        if stripped in out:
            raise ExportError(f"tensor {stripped!r} appears twice after stripping prefixes (from {name!r})")
        out[stripped] = t
    return out


def infer_wrn(state):
    """Channels, in-channels and classes of a seed WideResNet from its tensor shapes."""
    need = ["input_block.cbr.0.weight", "block1.scale.weight", "block3.scale.weight",
            "block5.scale.weight", "fc.weight"]
    missing = [n for n in need if n not in state]
    if missing:
        raise ExportError(f"not a seed WideResNet state_dict: missing {', '.join(missing)}")
    chans = tuple(int(state[n].shape[0]) for n in need[:4])
    return chans, int(state[need[0]].shape[1]), int(state["fc.weight"].shape[0])


def infer_classes(state, default=1000):
    for name in ("fc.weight", "classifier.weight", "head.weight", "heads.head.weight"):
        if name in state and state[name].dim() == 2:
            return int(state[name].shape[0])
    return default


def build_reference(arch, state, channels_text):
    """Build `arch` with random init, shaped like `state` where the arch allows it."""
    if arch == "wideresnet":
        chans, in_ch, classes = infer_wrn(state) if state is not None else (seed_models.DEFAULT_CHANNELS, 1, 10)
        if channels_text:
            chans = seed_models.parse_channels(channels_text)
        return seed_models.WideResNet(classes, chans, in_channels=in_ch), chans
    classes = infer_classes(state) if state is not None else 1000
    try:
        return seed_models.build(arch, num_classes=classes), None
    except (ValueError, TypeError) as e:
        raise ExportError(str(e)) from None


def _some(items, sep, limit=12):
    """Join the first `limit` items; a wrong arch would otherwise print hundreds of names."""
    more = f"{sep}... and {len(items) - limit} more" if len(items) > limit else ""
    return sep.join(items[:limit]) + more


def check_against(arch, state, channels_text):
    """Raise ExportError naming every missing, extra or misshapen tensor. Returns (model, channels)."""
    model, chans = build_reference(arch, state, channels_text)
    want = model.state_dict()
    missing = [n for n in want if n not in state]
    extra = [n for n in state if n not in want]
    shape = [f"{n}: checkpoint {tuple(state[n].shape)} vs {arch} {tuple(want[n].shape)}"
             for n in want if n in state and tuple(state[n].shape) != tuple(want[n].shape)]
    dtype = [f"{n}: checkpoint {state[n].dtype} vs {arch} {want[n].dtype}"
             for n in want if n in state and state[n].is_floating_point() != want[n].is_floating_point()]
    problems = []
    if missing:
        problems.append(f"missing {len(missing)}: " + _some(missing, ", "))
    if extra:
        problems.append(f"extra {len(extra)}: " + _some(extra, ", "))
    if shape:
        problems.append(f"shape mismatch {len(shape)}: " + _some(shape, "; "))
    if dtype:
        problems.append(f"dtype mismatch {len(dtype)}: " + _some(dtype, "; "))
    if problems:
        raise ExportError(f"tensors do not match {arch}" + (f" channels {chans}" if chans else "")
                          + ":\n  " + "\n  ".join(problems))
    return model, chans


def metadata_for(arch, chans, state, source):
    meta = {"format": "pt", "source": os.path.basename(source) if source else "random-init"}
    if arch:
        meta["arch"] = arch
        meta["num_classes"] = str(infer_classes(state))
    if chans:
        meta["channels"] = ",".join(str(c) for c in chans)
        meta["in_channels"] = str(int(state["input_block.cbr.0.weight"].shape[1]))
    return meta


def export(args):
    if args.pretrained_arch:
        if len(args.paths) != 1:
            raise ExportError("--pretrained-arch takes exactly one path: OUT.safetensors")
        arch, out, source = args.pretrained_arch, args.paths[0], None
        torch.manual_seed(args.seed)
        model, chans = build_reference(arch, None, args.channels)
        state = model.eval().state_dict()
    else:
        if len(args.paths) != 2:
            raise ExportError("usage: export_torchvision.py IN.pth OUT.safetensors [--arch ARCH]")
        source, out = args.paths
        arch = args.arch
        _expose_seed_classes()
        try:
            obj = torch.load(source, map_location="cpu")
        except FileNotFoundError:
            raise ExportError(f"{source}: no such file") from None
        except Exception as e:  # unpickling errors come in many types; name the file and the cause
            raise ExportError(f"{source}: torch.load failed: {type(e).__name__}: {e}") from None
        state = strip_prefixes(extract_state_dict(obj, source))
        chans = None
        if arch:
            _, chans = check_against(arch, state, args.channels)
    tensors = {n: t.detach().cpu().contiguous() for n, t in state.items()}
    safetensors_io.save(tensors, out, metadata_for(arch, chans, tensors, source))
    print(f"wrote {out}: {len(tensors)} tensors" + (f", checked against {arch}" if arch else ""))


CKPT_PREFIXES = ("optim.", "ckpt.")
OPTIM_STATES = ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step")


def _meta_float(meta, key, default=0.0):
    try:
        return float(meta.get(key, default))
    except ValueError:
        raise ExportError(f"metadata {key} is not a number: {meta.get(key)!r}") from None


def _param_groups(kind, meta, order):
    """PyTorch's param_groups (hyper-parameters as gpud saved them; the lr of the latest step)."""
    no_decay = {n for n in meta.get("optim.no_decay", "").split(",") if n}
    common = {"lr": _meta_float(meta, "optim.lr"), "weight_decay": _meta_float(meta, "optim.weight_decay")}
    if kind == "sgd":
        common.update(momentum=_meta_float(meta, "optim.momentum"), dampening=_meta_float(meta, "optim.dampening"),
                      nesterov=bool(_meta_float(meta, "optim.nesterov")), maximize=False, foreach=None,
                      differentiable=False)
    else:
        common.update(betas=(_meta_float(meta, "optim.beta1"), _meta_float(meta, "optim.beta2")),
                      eps=_meta_float(meta, "optim.eps"), amsgrad=bool(_meta_float(meta, "optim.amsgrad")))
        if kind == "novograd":
            common["grad_averaging"] = bool(_meta_float(meta, "optim.grad_averaging"))
        else:
            common.update(maximize=False, foreach=None, capturable=False, differentiable=False, fused=False)
    decay = [i for i, n in enumerate(order) if n not in no_decay]
    plain = [i for i, n in enumerate(order) if n in no_decay]
    groups = [dict(common, params=decay)] if decay else []
    if plain:
        groups.append(dict(common, weight_decay=0.0, params=plain))
    return groups


def optimizer_state_dict(tensors, meta, order):
    """Turn a ddpipe checkpoint's optim.* tensors into a PyTorch optimizer state_dict."""
    kind = meta.get("optim.kind")
    if kind not in ("sgd", "adam", "adamw", "novograd"):
        raise ExportError(f"no optimizer state in the checkpoint (optim.kind is {kind!r})")
    by_param = collections.defaultdict(dict)
    for name, t in tensors.items():
        if not name.startswith("optim."):
            continue
        pname, _, sname = name[len("optim."):].rpartition(".")
        if sname not in OPTIM_STATES or pname not in order:
            raise ExportError(f"optimizer tensor {name}: unknown state or parameter")
        by_param[pname][sname] = t
    missing = [n for n in order if "step" not in by_param[n]]
    if missing:
        raise ExportError(f"no optimizer state for {len(missing)} parameters: " + _some(missing, ", "))
    state = {}
    for i, n in enumerate(order):
        st = dict(by_param[n])
        step = int(st.pop("step"))
        if kind == "sgd":
            if "momentum_buffer" in st:   # plain SGD keeps no state at all
                state[i] = {"momentum_buffer": st["momentum_buffer"]}
        elif step > 0:
            # torch 1.13 Adam/AdamW keep step as a float32 tensor; torch-optimizer's NovoGrad an int
            st["step"] = torch.tensor(float(step)) if kind != "novograd" else step
            state[i] = st
    return {"state": state, "param_groups": _param_groups(kind, meta, order)}


def _check_loads(kind, osd, shapes):
    """Prove the state_dict loads into the torch optimizer it is for (NovoGrad: not in torch)."""
    if kind == "novograd":
        return
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    groups = [dict({k: v for k, v in g.items() if k != "params"}, params=[params[i] for i in g["params"]])
              for g in osd["param_groups"]]
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    opt = cls(groups, lr=osd["param_groups"][0]["lr"])
    opt.load_state_dict(osd)


def reverse(args):
    if len(args.paths) != 2:
        raise ExportError("usage: export_torchvision.py --reverse IN.safetensors OUT.pth [--arch ARCH]")
    source, out = args.paths
    try:
        tensors = safetensors_io.load(source)
        meta = safetensors_io.load_metadata(source)
    except (OSError, ValueError) as e:
        raise ExportError(f"{source}: {e}") from None
    arch = args.arch or meta.get("arch")
    is_ckpt = meta.get("format") == "ddpipe-checkpoint"
    model_tensors = {n: t for n, t in tensors.items() if not (is_ckpt and n.startswith(CKPT_PREFIXES))}
    state = collections.OrderedDict(sorted(model_tensors.items()))
    model = None
    if arch:
        model, _ = check_against(arch, state, args.channels or meta.get("channels"))
        # Keep the module order PyTorch itself would produce, and prove the dict loads strictly.
        state = collections.OrderedDict((n, model_tensors[n]) for n in model.state_dict())
        model.load_state_dict(state, strict=True)
    if args.optimizer_out:
        if not is_ckpt:
            raise ExportError(f"{source}: not a ddpipe checkpoint (no optimizer state)")
        order = [n for n in meta.get("optim.params", "").split(",") if n]
        if model is not None:
            trainable = [n for n, p in model.named_parameters()]
            unknown = [n for n in order if n not in trainable]
            if unknown:
                raise ExportError(f"optimizer parameters not in {arch}: " + _some(unknown, ", "))
            order = [n for n in trainable if n in set(order)]   # model.parameters() order
        osd = optimizer_state_dict(tensors, meta, order)
        _check_loads(meta["optim.kind"], osd, [tuple(model_tensors[n].shape) for n in order])
        tmp = args.optimizer_out + ".tmp"
        torch.save(osd, tmp)
        os.replace(tmp, args.optimizer_out)
        print(f"wrote {args.optimizer_out}: {meta['optim.kind']} state of {len(order)} parameters "
              f"({len(osd['param_groups'])} param groups)")
    tmp = out + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, out)
    print(f"wrote {out}: {len(state)} tensors" + (f", checked against {arch}" if arch else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="IN OUT (or only OUT with --pretrained-arch)")
    ap.add_argument("--arch", help="check names/shapes against resnet18, resnet50, densenet121, wideresnet, ...")
    ap.add_argument("--channels", help="seed WideResNet channels, e.g. 16,160,320,640 (default: from the shapes)")
    ap.add_argument("--pretrained-arch", metavar="ARCH",
                    help="no checkpoint: export a randomly initialised ARCH (torchvision weights cannot be "
                         "downloaded here)")
    ap.add_argument("--seed", type=int, default=0, help="seed for --pretrained-arch's random init")
    ap.add_argument("--reverse", action="store_true", help="convert IN.safetensors back to OUT.pth")
    ap.add_argument("--optimizer-out", metavar="OPT.pth",
                    help="with --reverse of a ddpipe checkpoint: also write its optimizer state as a PyTorch "
                         "optimizer state_dict")
    args = ap.parse_args(argv)
    try:
        if args.reverse and args.pretrained_arch:
            raise ExportError("--reverse and --pretrained-arch do not combine")
        if args.optimizer_out and not args.reverse:
            raise ExportError("--optimizer-out goes with --reverse")
        reverse(args) if args.reverse else export(args)
    except ExportError as e:
        print(f"export_torchvision: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
