"""The emulated gpud in place of the real one (tests/gpud/cuemu: gpud built on
the cuda backend over the kernel emulator, DDPIPE_EMU_GPUD): ddpipe starts
the daemons from $DDPIPE_BIN, so a folder of the built daemons with the
emulated gpud beside them makes every job a --device cuda job without a GPU."""
import os
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
