"""NCCL in gpud (docs/CUDA.md "NCCL in gpud"): reducerd between fake gpuds
relays rank 0's NCCL communicator id to the other members of each
generation, a fresh one per generation, and rejects (and counts) every id
that is not rank 0's of the current generation with its token.

Job 1: three ranks offer NCCL (JOIN nccl=1): WELCOME says nccl=1; rank 0's
NCCLID reaches ranks 1 and 2 (not rank 0, without a token); a forged one
(rank 1, a wrong token, a wrong world, a second id) is rejected. Rank 2 is
lost (ranks 0 and 1 report it silent): MEMBERS(gen 1, nccl=1) and the new
rank 0's new id reaches rank 1; generation 0's id is then stale (dropped).
Job 2: one of two ranks does not offer NCCL: no 'nccl' key in WELCOME (the
bytes of a job without NCCL), and an NCCLID is rejected."""
import os
import subprocess
import time
from ddp_it import *
from ddp_trust import auth

try:
    import msgpack
    import zmq
except ImportError:
    fail("python3-zmq and python3-msgpack are needed (scripts/install-deps.sh --test)")
from ddp_fake import expect_msg, new_dealer, pack, wait_log

JOIN, WELCOME, MEMBERS, STEP, NCCLID = 1, 2, 15, 16, 19
ctx = zmq.Context()
CONFIG = "--model wideresnet --lr 0.1 --seed 3 --global-batch-size 8"


def start(wd, workers):
    ep = "ipc://%s/reducer" % wd
    logpath = os.path.join(wd, "reducerd.log")
    log = open(logpath, "w")
    proc = subprocess.Popen([os.path.join(BIN, "reducerd"), "--bind", ep, "--pub",
                             "ipc://%s/events" % wd, "--train", "--workers", str(workers),
                             "--min-workers", "1", "--worker-timeout", "60", "--verbose"],
                            stdout=log, stderr=log)
    return ep, logpath, proc




def nothing(sock, what, ms=500):
    if sock.poll(ms):
        m = msgpack.unpackb(sock.recv(), raw=False)
        check(m["t"] != NCCLID, "%s got an NCCLID: %r" % (what, m))


def gang(ep, logpath, offers):
    socks, welcomes = [], []
    for i, offer in enumerate(offers):
        s = new_dealer(ctx, ep, b"g%d" % i)
        extra = {"nccl": 1} if offer else {}
        s.send(pack(JOIN, role=1, pid=100 + i, want_rank=i, name="g%d" % i, host="h",
                    backend="cuda", ring="tcp://127.0.0.1:%d" % (41000 + i), config=CONFIG,
                    **extra))
        socks.append(s)
    for s in socks:
        welcomes.append(expect_msg(s, WELCOME, logpath))
    return socks, welcomes


def ncclid(gen, world, idbytes, a):
    return pack(NCCLID, gen=gen, world=world, id=idbytes, **a)


# ---- job 1: every rank offers NCCL --------------------------------------
wd = workdir("nccl-relay")
ep, logpath, proc = start(wd, 3)
try:
    socks, w = gang(ep, logpath, [1, 1, 1])
    for r in range(3):
        check(w[r]["rank"] == r and w[r].get("nccl") == 1, "WELCOME %d: %r" % (r, w[r]))
    a = [auth(x["job"], x["session"], x["token"]) for x in w]
    id0 = bytes((i * 5 + 1) % 256 for i in range(128))

    # forged (each with an id of its own, so a relayed one would show):
    # rank 1 sends one; rank 0 with rank 1's token; the wrong world. Log
    # lines are rate-limited per (peer, kind): the first of each peer shows
    bad = [bytes([0xf0 + k]) * 128 for k in range(4)]
    socks[1].send(ncclid(0, 3, bad[0], a[1]))
    wait_log(proc, logpath, "rejected NCCLID from g1: only rank 0 of generation 0 (g0)")
    socks[0].send(ncclid(0, 3, bad[1], a[1]))
    wait_log(proc, logpath, "rejected NCCLID from g0: without rank 0's session token")
    socks[0].send(ncclid(0, 2, bad[2], a[0]))
    socks[0].send(ncclid(1, 3, bad[3], a[0]))
    # garbage: a blank id, a short one (the codec rejects and counts them)
    socks[0].send(ncclid(0, 3, bytes(128), a[0]))
    socks[0].send(ncclid(0, 3, id0[:100], a[0]))
    wait_log(proc, logpath, "'id' is all zeros")
    wait_log(proc, logpath, "'id' bin is 100 bytes")

    socks[0].send(ncclid(0, 3, id0, a[0]))
    for r in (1, 2):
        m = expect_msg(socks[r], NCCLID, logpath)
        check(m["id"] == id0 and m["world"] == 3 and m.get("gen", 0) == 0,
              "rank %d's first NCCLID is not rank 0's valid one: %r" % (r, m))
        check("token" not in m, "the relayed id carries a token: %r" % m)
    nothing(socks[0], "rank 0 (its own id)")
    socks[0].send(ncclid(0, 3, bad[0], a[0]))   # a second id: not passed on
    for r in (1, 2):
        nothing(socks[r], "rank %d (a second id)" % r)

    # rank 2 falls silent: ranks 0 and 1 report it; generation 1 of 2 ranks
    for r in (0, 1):
        socks[r].send(pack(STEP, rank=r, gen=0, epoch=0, step=0, status=1, suspect=2, **a[r]))
    mem = [expect_msg(socks[r], MEMBERS, logpath) for r in (0, 1)]
    for r in (0, 1):
        check(mem[r]["gen"] == 1 and mem[r]["rank"] == r and mem[r]["world"] == 2 and
              mem[r].get("nccl") == 1, "MEMBERS %d: %r" % (r, mem[r]))
    a1 = [auth(w[0]["job"], m["session"], m["token"]) for m in mem]
    # generation 0's id is stale now: dropped, not passed on
    socks[0].send(ncclid(0, 3, id0, a[0]))
    nothing(socks[1], "rank 1 (a stale id)")
    id1 = bytes((i * 11 + 3) % 256 for i in range(128))
    socks[0].send(ncclid(1, 2, id1, a1[0]))
    m = expect_msg(socks[1], NCCLID, logpath)
    check(m["id"] == id1 and m["gen"] == 1 and m["world"] == 2, "generation 1's id: %r" % m)
    nothing(socks[2], "the lost rank 2")
    wait_log(proc, logpath, "generation 1: rank 0's NCCL id passed on to 1 rank")
finally:
    proc.kill()
    proc.wait()

# ---- job 2: a rank without NCCL: the job sums on the ring ---------------
wd = workdir("nccl-relay-mixed")
ep, logpath, proc = start(wd, 2)
try:
    socks, w = gang(ep, logpath, [1, 0])
    for r in range(2):
        check("nccl" not in w[r], "WELCOME %d of a job without NCCL has 'nccl': %r" % (r, w[r]))
    a0 = auth(w[0]["job"], w[0]["session"], w[0]["token"])
    socks[0].send(ncclid(0, 2, bytes(range(1, 129)), a0))
    wait_log(proc, logpath, "generation 0 does not sum over NCCL (a member did not offer it)")
    nothing(socks[1], "rank 1 of a job without NCCL")
finally:
    proc.kill()
    proc.wait()
print("ok")
