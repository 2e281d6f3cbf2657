"""Fake peers for daemon tests over real sockets (python3-zmq, msgpack):
protocol maps, DEALERs with a chosen identity, and waiting for a message
type with a bound that prints the daemon's log when it runs out, and
waiting for a line in the daemon's log (it must not exit meanwhile)."""
import time

import msgpack
import zmq

from ddp_it import check, fail, read


def pack(t, **kw):
    """A protocol map of type t (version 2) as msgpack bytes."""
    return msgpack.packb(dict(v=2, t=t, **kw), use_bin_type=True)


def new_dealer(ctx, endpoint, identity):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.IDENTITY, identity)
    s.connect(endpoint)
    return s


def expect_msg(sock, t, logpath, timeout=20):
    """The next message of type t on sock (others skipped); fails with the
    daemon's log at logpath after timeout seconds."""
    end = time.time() + timeout
    while time.time() < end:
        if sock.poll(100):
            m = msgpack.unpackb(sock.recv(), raw=False)
            if m["t"] == t:
                return m
    fail("no message of type %d within %ds:\n%s" % (t, timeout, read(logpath)))


def wait_log(proc, logpath, text, timeout=20):
    """Returns once the daemon proc (logging to logpath) has logged text;
    fails when it exits first or the bound runs out."""
    end = time.time() + timeout
    while time.time() < end:
        if text in read(logpath):
            return
        check(proc.poll() is None, "reducerd exited %s:\n%s" % (proc.returncode, read(logpath)))
        time.sleep(0.05)
    fail("reducerd never logged %r:\n%s" % (text, read(logpath)))
