"""Session tokens of proto/PROTOCOL.md "Trust" for fake peers in tests:
keyed BLAKE2b-128 over (session u64 LE, role u8, rank i32 LE, name + NUL),
the job secret as key (libsodium crypto_generichash = hashlib.blake2b)."""
import hashlib
import os
import struct

GPUD, LOADER, REPORTER = 1, 2, 3


def token(secret, session, role, rank, name):
    data = struct.pack("<QBi", session, role, rank) + name.encode() + b"\0"
    return hashlib.blake2b(data, digest_size=16, key=secret).digest()


def new_secret():
    """(secret, session) as a fake reducerd would draw them."""
    return os.urandom(32), struct.unpack("<Q", os.urandom(8))[0] | 1


def auth(job, session, tok):
    """The msgpack keys a trusted message carries."""
    return {"job": job, "session": session, "token": tok}
