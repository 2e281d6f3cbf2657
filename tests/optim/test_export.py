#!/usr/bin/python3
"""The optimizer state of a ddpipe checkpoint, exported by scripts/export_torchvision.py
--reverse --optimizer-out, loads into the PyTorch optimizer (torch.optim.SGD/Adam/AdamW, or
gen_optim's NovoGrad) built like the golden case and equals PyTorch's own state after the
same 3 steps (|ours - torch| <= 1e-5 * max(1, |torch|)), with the lr of the last step and the
no-decay param group. The checkpoints come from test_optim (argv[1]) run with
DDPIPE_OPTIM_CKPT_DIR. Exits 77 (skipped) where torch is not importable."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch not importable: skipped")
    sys.exit(77)

SRC = os.environ.get("DDPIPE_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "scripts"))
sys.path.insert(0, os.path.join(SRC, "tests", "golden"))
import export_torchvision  # noqa: E402
import gen_optim  # noqa: E402
import safetensors_io  # noqa: E402

TOL = 1e-5


def close(a, b):
    return bool(((a.float() - b.float()).abs() <= TOL * b.float().abs().clamp(min=1.0)).all())


def main():
    failures = 0
    golden = safetensors_io.load(gen_optim.OUT)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, DDPIPE_OPTIM_CKPT_DIR=tmp)
        rc = subprocess.run([sys.argv[1]], env=env, stdout=subprocess.DEVNULL).returncode
        if rc != 0:
            print(f"{sys.argv[1]} failed ({rc})")
            return 1
        for name, kind, lr, opts, no_decay, sched, _ in gen_optim.CASES:
            ck, out, opt_out = (os.path.join(tmp, f"{name}{ext}") for ext in (".safetensors", ".pth", "_opt.pth"))
            if export_torchvision.main(["--reverse", ck, out, "--optimizer-out", opt_out]) != 0:
                print(f"{name}: export failed")
                failures += 1
                continue
            weights = torch.load(out)
            params = [(n, torch.nn.Parameter(weights[n].clone())) for n, _ in gen_optim.SHAPES]
            opt = gen_optim.make_optimizer(kind, params, no_decay, lr, opts)
            opt.load_state_dict(torch.load(opt_out))
            checked = 0
            for n, p in params:
                if not close(p.detach(), golden[f"{name}/after/3/{n}"]):
                    print(f"{name}: weights of {n} differ")
                    failures += 1
                for sname, v in opt.state[p].items():
                    want = golden[f"{name}/state/{n}/{sname}"]
                    got = v if torch.is_tensor(v) else torch.tensor(float(v))
                    if not close(got, want):
                        print(f"{name}: state {sname} of {n} differs")
                        failures += 1
                    checked += 1
            want_states = sum(1 for k in golden if k.startswith(f"{name}/state/"))
            if checked != want_states:
                print(f"{name}: {checked} state tensors after loading, PyTorch has {want_states}")
                failures += 1
            groups = opt.param_groups
            if len(groups) != (2 if no_decay else 1) or (no_decay and groups[1]["weight_decay"] != 0):
                print(f"{name}: param groups {[(len(g['params']), g['weight_decay']) for g in groups]}")
                failures += 1
            if not sched and abs(groups[0]["lr"] - lr) > 1e-12:
                print(f"{name}: lr {groups[0]['lr']} vs {lr}")
                failures += 1
            print(f"  {name:18s} {kind}: {checked} state tensors equal PyTorch's after load_state_dict")
    print("test_export:", "all checks passed" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
