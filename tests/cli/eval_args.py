"""`ddpipe eval` reads its flags as users type them: `--predictions` alone
before another flag means topk (it was a bare flag once) and does not take
that flag as its value; a flag where a value belongs is refused in one line.
No daemons: every case stops at a check after the parse (a missing weights
file), which proves the parse itself passed.

usage: eval_args.py DDPIPE WORK_DIR"""
import os
import subprocess
import sys


def run(ddpipe, *args):
    r = subprocess.run([ddpipe, "eval", *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def main():
    ddpipe, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "run")
    missing = os.path.join(work, "no-such.safetensors")
    common = ["--data", work, "--model", "resnet18", "--weights", missing]
    bad = 0
    for args in (["--predictions", "--out", out] + common,
                 common + ["--out", out, "--predictions"],
                 ["--predictions", "probs", "--out", out] + common,
                 ["--predictions=all", "--out", out] + common):
        rc, text = run(ddpipe, *args)
        # parsed and checked up to the weights: the error names them, not an argument
        if rc == 0 or "--weights" not in text or "unexpected argument" in text \
                or "needs a value" in text:
            print("FAIL: ddpipe eval %s\n  rc %d: %s" % (" ".join(args), rc, text.strip()))
            bad += 1
    rc, text = run(ddpipe, "--out", "--predictions", *common)
    want = "ddpipe eval: --out needs a value (DIR), got the flag --predictions"
    if rc == 0 or want not in text or len(text.strip().splitlines()) != 1:
        print("FAIL: --out --predictions: want the one line %r, got rc %d: %s" % (
            want, rc, text.strip()))
        bad += 1
    if bad:
        sys.exit(1)
    print("ddpipe eval: flags parsed as typed")


if __name__ == "__main__":
    main()
