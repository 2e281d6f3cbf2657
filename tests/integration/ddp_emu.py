"""The emulated gpud in place of the real one (tests/gpud/cuemu: gpud built on
the cuda backend over the kernel emulator, DDPIPE_EMU_GPUD): ddpipe starts
the daemons from $DDPIPE_BIN, so a folder of the built daemons with the
emulated gpud beside them makes every job a --device cuda job without a GPU."""
import os
import re
import shutil
import tempfile

from ddp_it import BIN


def use_emulated_gpud():
    """Points DDPIPE_BIN at such a folder; returns it (remove it at the end)."""
    d = tempfile.mkdtemp(prefix="ddp-cuemu-bin-")
    for name in ("ddpipe", "loaderd", "reducerd", "reporterd"):
        os.symlink(os.path.join(BIN, name), os.path.join(d, name))
    os.symlink(os.environ["DDPIPE_EMU_GPUD"], os.path.join(d, "gpud"))
    os.environ["DDPIPE_BIN"] = d
    return d


def remove(d):
    shutil.rmtree(d, ignore_errors=True)


STEP_BYTES = re.compile(r"step bytes host<->backend \(cuda device arenas\): batch in (\d+), "
                        r"out (\d+), parameters/gradients (\d+), bn (\d+)")


def step_bytes(log):
    """A cuda gpud log's --verbose step lines, one a step: (batch in, out,
    parameters/gradients, bn) bytes between host and device, as ints."""
    return [tuple(int(v) for v in m) for m in STEP_BYTES.findall(log)]
