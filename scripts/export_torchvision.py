#!/usr/bin/python3
"""Convert PyTorch checkpoints to safetensors (and back) keeping the state_dict names ddpipe loads.

    export_torchvision.py IN.pth OUT.safetensors [--arch resnet18|wideresnet [--channels 16,160,320,640]]
    export_torchvision.py --pretrained-arch resnet18 OUT.safetensors     # random init, no download
    export_torchvision.py --reverse IN.safetensors OUT.pth [--arch ...]

IN.pth may be a state_dict, a dict holding one under 'state_dict' / 'model' / 'model_state_dict'
(as training scripts save them, optimizer and epoch alongside), or a whole pickled nn.Module.
A 'module.' prefix (DistributedDataParallel) or '_orig_mod.' (torch.compile) is stripped.

With --arch the names and shapes are checked against that architecture (torchvision.models.<arch>
or the seed 'wideresnet'); a mismatch is an error that lists the missing, extra and misshapen tensors.
For wideresnet, --channels and the class count default to what the checkpoint's shapes say.
No network is used: torchvision models are built with weights=None.
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
    state = collections.OrderedDict(sorted(tensors.items()))
    if arch:
        model, _ = check_against(arch, state, args.channels or meta.get("channels"))
        # Keep the module order PyTorch itself would produce, and prove the dict loads strictly.
        state = collections.OrderedDict((n, tensors[n]) for n in model.state_dict())
        model.load_state_dict(state, strict=True)
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
    args = ap.parse_args(argv)
    try:
        if args.reverse and args.pretrained_arch:
            raise ExportError("--reverse and --pretrained-arch do not combine")
        reverse(args) if args.reverse else export(args)
    except ExportError as e:
        print(f"export_torchvision: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
