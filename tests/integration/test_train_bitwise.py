"""Bitwise training for any worker count (issue 31, docs/TRAINING.md): with
`--chunk N` a run is a pure function of data, seed, global batch and
hyper-parameters, so model.safetensors is the SAME BYTES (filecmp, not a
tolerance: test_train_invariance.py is the tolerance version) for any W and
however the ranks came and went. The job: a small WideResNet, 204
Fashion-MNIST samples, 2 epochs, plain SGD with momentum, no --val; --chunk 8.

Cases (argv picks a subset by name; none: all of them):

  g48-sync, g48-ghost, g40-sync, g40-ghost
            W = 1, 2, 3, 4 with --global-batch-size 48 or 40, with and
            without --sync-bn (ghost BatchNorm over each chunk): every W
            the same bytes. G = 48 is 6 chunks a step (W = 4: 2/2/1/1),
            G = 40 is 5 (W = 4: 2/1/1/1); N = 204 leaves a last step of 12
            samples (G = 48, 5 steps an epoch: chunks 8 + 4, ranks 2 and
            up empty) or 4 (G = 40, 6 steps: one short chunk, every rank
            but 0 empty). sync and ghost of one G must differ (else
            --sync-bn did nothing).
  g48-bf16  the same with --precision bf16 (ghost BatchNorm), W = 1 and 4
            only: bf16's rounding points are per sample and per chunk, so
            bf16 is bitwise too (on the CPU backends; docs/BF16.md); W = 4
            (2/2/1/1) holds both a rank of several chunks and ranks of one
            against W = 1's six on one rank, and the fp32 configs above run
            W = 2 and 3's splits through the same chunk code.
  kill      W = 3, rank R SIGKILLs itself before step S (--fault R:S; R, S
            random): the survivors redo S with W = 2 and end with W = 1's bytes;
  kill9     W = 3, the test SIGKILLs a random rank once rank 0 logged a
            random step K (--verbose), i.e. in whatever step is in flight;
  join      W = 2, --pause-at-step S (random): a third gpud joins (--join),
            W = 3 from step S on;
  resume0   W = 2 stopped by a lost rank (--min-workers 2 --rejoin-timeout
            0 --fault 1:S) at a random step S of epoch 0: the checkpoint of
            step S, resumed with W = 3;
  resume1   the same with W = 3 stopped in epoch 1, resumed with W = 1;
  break     the negative control: DDPIPE_BITWISE_BREAK=float-ring in the
            gpuds' environment (the gradients summed as floats over the
            ring) must make W = 3 DIFFER from g48-sync's W = 1 (a one-rank
            ring sums nothing, so W = 1 is the same with or without the
            knob): the comparison can fail.

Options: --seed N (the random ranks and steps; default: a fresh one,
printed, so a failure reruns with the same choices), --workers 1,2,.. (the
W of the g* cases), --no-chunk (a harness check of today's build: no
--chunk flag, and differences are reported, not failed), --list.
Each run prints one line: case, W, options, sha256 of model.safetensors.
Every wait is on an event (a log line, a file, an exit) and bounded."""
import atexit
import filecmp
import hashlib
import os
import random
import signal
import subprocess
import sys
from ddp_it import *
from ddp_elastic import file_has, finish, gpud_of, joiner_cmd, wait_for

N, EPOCHS, CHUNK = 204, 2, 8
COMMON = ["--epochs", str(EPOCHS), "--seed", "7", "--lr", "0.05", "--momentum", "0.9",
          "--ring-timeout", "5"]
# --worker-timeout: 20 s where nobody dies (a loaded box must not lose a
# rank by accident), 2 s where the test kills one (the loss is seen soon).
CALM, ELASTIC = ["--worker-timeout", "20"], ["--worker-timeout", "2"]
CONFIGS = {"g48-sync": (48, ["--sync-bn"]), "g48-ghost": (48, []),
           "g40-sync": (40, ["--sync-bn"]), "g40-ghost": (40, []),
           "g48-bf16": (48, ["--precision", "bf16"])}
# the W a config runs (of --workers); absent: all of them. Each run is a
# whole job (~2.5 s under ASan), the suite's longest test once had 30.
CONFIG_WORKERS = {"g48-bf16": (1, 4)}
ELASTIC_CASES = ["kill", "kill9", "join", "resume0", "resume1", "break"]
CASES = list(CONFIGS) + ELASTIC_CASES


def usage(msg):
    print("%s\nusage: %s [--seed N] [--workers 1,2,3,4] [--no-chunk] [--list] [CASE ...]\n"
          "cases: %s" % (msg, sys.argv[0], " ".join(CASES)), flush=True)
    sys.exit(2)


def parse_argv(argv):
    seed, workers, chunk, cases = None, [1, 2, 3, 4], True, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--seed", "--workers") and i + 1 < len(argv):
            try:
                if a == "--seed":
                    seed = int(argv[i + 1])
                else:
                    workers = [int(w) for w in argv[i + 1].split(",")]
            except ValueError:
                usage("%s %s: not a number" % (a, argv[i + 1]))
            i += 2
            continue
        if a == "--no-chunk":
            chunk = False
        elif a == "--list":
            print("\n".join(CASES))
            sys.exit(0)
        elif a in CASES:
            cases.append(a)
        else:
            usage("unknown argument %r" % a)
        i += 1
    if not workers or any(w < 1 for w in workers):
        usage("--workers wants ranks >= 1")
    return seed, workers, chunk, cases or CASES


SEED, WORKERS, CHUNKED, SELECTED = parse_argv(sys.argv[1:])
if SEED is None:
    SEED = random.SystemRandom().randrange(1 << 31)
print("test_train_bitwise: --seed %d (rerun with it for the same ranks and steps)%s" % (
    SEED, "; --no-chunk: a harness check, differences are reported, not failed"
    if not CHUNKED else ""), flush=True)
rng = None          # set per case below

train = idx_subset("train", 0, N)
wd = workdir("train-bitwise")
JOINERS = []        # started by hand, so ended by hand: a failed check leaves none behind
problems = []       # every failed comparison, reported together at the end
ref_cache = {}      # config -> the run directory of its W = 1 run
top = {}            # config -> the run directory of its largest W


@atexit.register
def _end_joiners():
    for p in JOINERS:
        if p.poll() is None:
            p.kill()


def steps_per_epoch(cfg):
    g = CONFIGS[cfg][0]
    return (N + g - 1) // g


def key_flags(cfg, extra=()):
    """What tells the runs apart (the rest is COMMON)."""
    g, bn = CONFIGS[cfg]
    chunk = ["--chunk", str(CHUNK)] if CHUNKED else []
    return ["--global-batch-size", str(g)] + chunk + bn + list(extra)


def flags(cfg, extra=()):
    return key_flags(cfg, COMMON + list(extra))


def model_of(out):
    return os.path.join(out, "model.safetensors")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def report(case, w, opts, out):
    """The one line per run a failure is read from."""
    path = model_of(out)
    check(os.path.exists(path), "%s W=%s: no model.safetensors in %s" % (case, w, out))
    print("run %-10s W=%-5s %-62s sha256=%s" % (case, w, " ".join(opts), sha256(path)), flush=True)


def train_run(case, cfg, w, extra=(), env=None, label=None, expect_rc=0):
    """ddpipe train of config cfg on w ranks into wd/label; env: variables
    for the job's processes (the gpuds inherit ddpipe's environment)."""
    out = os.path.join(wd, label or "%s-w%d" % (case, w))
    p = run_train(train, out, w, flags(cfg, extra), expect_rc=expect_rc, env=env)
    assert_no_leftovers(out)
    if expect_rc == 0:
        report(case, w, ["%s=%s" % kv for kv in (env or {}).items()] + key_flags(cfg, extra), out)
    return out, p


def same(case, what, a, b):
    """a's and b's model.safetensors are the same bytes (a problem if not)."""
    if filecmp.cmp(model_of(a), model_of(b), shallow=False):
        print("%s: %s: identical" % (case, what), flush=True)
        return True
    d, tensor = weights_diff(model_of(a), model_of(b))
    problems.append("%s: %s: model.safetensors differ (largest difference %.3g in %s)" % (
        case, what, d, tensor))
    print("%s: %s: DIFFER (largest difference %.3g in %s)" % (case, what, d, tensor), flush=True)
    return False


def reference(cfg):
    """The W = 1 run of cfg, every other run of it is compared with."""
    if cfg not in ref_cache:
        ref_cache[cfg] = train_run(cfg, cfg, 1, CALM, label="%s-w1" % cfg)[0]
    return ref_cache[cfg]


def check_training(out, case, lost=0, joined=0, world=None):
    """summary.json's training says what the case did happen (else it
    degenerates into a plain run and proves nothing)."""
    t = summary(out).get("training") or {}
    check(t.get("ranks_lost", 0) == lost and t.get("ranks_joined", 0) == joined and
          (world is None or t.get("world_size") == world),
          "%s: summary.json's training %r, want ranks_lost %d, ranks_joined %d, world_size %s"
          % (case, t, lost, joined, world))


# ---- W = 1..4 of each configuration ---------------------------------------

def case_workers(cfg):
    outs = {}
    ws = [w for w in WORKERS if w in CONFIG_WORKERS.get(cfg, WORKERS)] or WORKERS
    for w in ws:
        outs[w] = reference(cfg) if w == 1 else train_run(cfg, cfg, w, CALM)[0]
    base = min(outs)
    for w in sorted(outs):
        if w != base:
            same(cfg, "W=%d vs W=%d" % (base, w), outs[base], outs[w])
    # --sync-bn changes the arithmetic (with --chunk at any W: ghost BN is per
    # chunk; without it only from W = 2 on): its bytes must not equal ghost BN's
    top[cfg] = outs[max(outs)]
    other = "g%d-%s" % (CONFIGS[cfg][0], "ghost" if cfg.endswith("sync") else "sync")
    if cfg.endswith(("sync", "ghost")) and other in top and (CHUNKED or max(outs) > 1):
        check(not filecmp.cmp(model_of(top[cfg]), model_of(top[other]), shallow=False),
              "%s and %s trained the same bytes: --sync-bn had no effect" % (cfg, other))


# ---- a rank lost, a rank joining, a resume ---------------------------------

def case_kill():
    cfg = "g48-sync"
    total = EPOCHS * steps_per_epoch(cfg)
    rank, step = rng.randrange(3), rng.randrange(1, total)
    print("kill: W=3, rank %d SIGKILLs itself before step %d of %d (--fault %d:%d)" % (
        rank, step, total, rank, step), flush=True)
    out, _ = train_run("kill", cfg, 3, ELASTIC + ["--fault", "%d:%d" % (rank, step)])
    check_training(out, "kill", lost=1, world=2)
    same("kill", "W=3 -> 2 at step %d (rank %d) vs W=1" % (step, rank), reference(cfg), out)


def case_kill9():
    cfg = "g40-ghost"
    total = EPOCHS * steps_per_epoch(cfg)
    after, victim = rng.randrange(0, total - 2), rng.randrange(3)
    print("kill9: W=3, kill -9 of rank %d once rank 0 logged step %d of %d" % (victim, after, total),
          flush=True)
    out = os.path.join(wd, "kill9-w3")
    proc = subprocess.Popen(train_cmd(train, out, 3, flags(cfg, ELASTIC + ["--verbose"])),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log0 = os.path.join(out, "logs", "gpud.0.log")
    wait_for("rank 0's step %d" % after, lambda: file_has(log0, "step %d (epoch" % after), proc)
    pid = gpud_of(out, victim)[0]
    check(pid is not None, "kill9: no gpud process of rank %d after step %d" % (victim, after))
    os.kill(pid, signal.SIGKILL)
    finish(proc, out, "kill9")
    assert_no_leftovers(out)
    report("kill9", "3->2", key_flags(cfg, ["(kill -9 of rank %d after step %d)" % (victim, after)]), out)
    check_training(out, "kill9", lost=1, world=2)
    same("kill9", "W=3 -> 2 after step %d (rank %d) vs W=1" % (after, victim), reference(cfg), out)


def case_join():
    cfg = "g48-ghost"
    spe = steps_per_epoch(cfg)
    total = EPOCHS * spe
    # reducerd admits joiners at a step boundary inside an epoch's training
    # (docs/ELASTIC.md "Joining"): the hook's step is not an epoch's first
    step = rng.choice([s for s in range(1, total) if s % spe != 0])
    print("join: W=2, a third rank joins before step %d of %d (--pause-at-step %d)" % (
        step, total, step), flush=True)
    out = os.path.join(wd, "join-w2")
    proc = subprocess.Popen(train_cmd(train, out, 2, flags(cfg, ELASTIC + [
        "--verbose", "--max-workers", "3", "--pause-at-step", str(step), "--rejoin-timeout", "300"])),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for("the pause", lambda: file_has(os.path.join(out, "logs", "reducerd.log"),
                                           "paused with 2 ranks"), proc)
    args = gpud_of(out, 0)[1]
    check(args is not None, "join: no gpud of rank 0 in %s" % out)
    log = os.path.join(out, "joiner.log")
    with open(log, "w") as f:
        joiner = subprocess.Popen(joiner_cmd(args, "joiner-bitwise"), stdout=f, stderr=subprocess.STDOUT)
    JOINERS.append(joiner)
    finish(proc, out, "join")
    try:
        rc = joiner.wait(timeout=120)
    except subprocess.TimeoutExpired:
        joiner.kill()
        fail("join: the joiner did not exit within 120 s after the job")
    check(rc == 0, "join: the joiner exited %d:\n%s" % (rc, read(log)[-3000:]))
    check("entered the job as rank 2 of 3 at step %d" % step in read(log),
          "join: the joiner does not say it entered as rank 2 at step %d:\n%s" % (step, read(log)[-3000:]))
    assert_no_leftovers(out)
    report("join", "2->3", key_flags(cfg, ["(joined before step %d)" % step]), out)
    check_training(out, "join", joined=1, world=3)
    same("join", "W=2 -> 3 at step %d vs W=1" % step, reference(cfg), out)


def case_resume(case, cfg, epoch, w_stop, w_resume):
    """A job of w_stop ranks stopped by a lost rank at a random step of
    `epoch`, then --resume'd in place with w_resume ranks."""
    spe = steps_per_epoch(cfg)
    step = rng.randrange(epoch * spe + 1, (epoch + 1) * spe)
    rank = w_stop - 1           # not rank 0: it writes the checkpoint
    print("%s: W=%d stopped before step %d (epoch %d) by rank %d's loss, resumed with W=%d" % (
        case, w_stop, step, epoch, rank, w_resume), flush=True)
    out, p = train_run(case, cfg, w_stop, ELASTIC + [
        "--min-workers", str(w_stop), "--rejoin-timeout", "0", "--fault", "%d:%d" % (rank, step)],
        label="%s-w%d" % (case, w_stop), expect_rc=None)
    check(p.returncode not in (0, 130), "%s: the stopped job exited %d:\n%s" % (
        case, p.returncode, p.stderr))
    _, meta = safetensors_read(os.path.join(out, "checkpoint.safetensors"))
    check(meta.get("ckpt.step") == str(step) and meta.get("ckpt.epoch") == str(epoch),
          "%s: checkpoint %s, want epoch %d step %d (the last committed step)" % (
              case, meta, epoch, step))
    train_run(case, cfg, w_resume, CALM + ["--resume", out], label="%s-w%d" % (case, w_stop))
    same(case, "W=%d stopped at step %d, resumed with W=%d vs W=1" % (w_stop, step, w_resume),
         reference(cfg), out)


def case_break():
    """Proves the comparison can fail: the old float ring sum in chunk mode."""
    cfg = "g48-sync"
    env = {"DDPIPE_BITWISE_BREAK": "float-ring"}
    a = reference(cfg)      # W = 1: no ring, the knob changes nothing
    b = train_run("break", cfg, 3, CALM, env=env)[0]
    if filecmp.cmp(model_of(a), model_of(b), shallow=False):
        problems.append("break: with DDPIPE_BITWISE_BREAK=float-ring W=3 is still W=1's "
                        "bytes: the knob does not reach the sum, or the test cannot fail")
        print("break: W=3 vs W=1: identical (WRONG: the negative control must differ)", flush=True)
    else:
        print("break: W=3 (float-ring) vs W=1 differ, as they must with float-ring", flush=True)


RUN = {"kill": case_kill, "kill9": case_kill9, "join": case_join,
       "resume0": lambda: case_resume("resume0", "g40-sync", 0, 2, 3),
       "resume1": lambda: case_resume("resume1", "g48-sync", 1, 3, 1),
       "break": case_break}
for name in CASES:      # in CASES' order, whatever argv's
    if name in SELECTED:
        # each case its own generator: a subset run with the same --seed
        # draws the same ranks and steps as the full run did
        rng = random.Random("%d/%s" % (SEED, name))
        if name in CONFIGS:
            case_workers(name)
        else:
            RUN[name]()

if problems:
    msg = "%d comparison(s) failed (--seed %d):\n  %s" % (len(problems), SEED, "\n  ".join(problems))
    if CHUNKED:
        fail(msg)
    print("--no-chunk (harness check, today's arithmetic): %s" % msg, flush=True)
print("1 passed, 0 failed")
