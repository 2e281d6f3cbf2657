#!/usr/bin/python3
# A tap monitor for bench/tap_bench.sh: subscribes to everything, decodes
# each msgpack body (as a real monitor would) and, at the `end` event or
# after TIMEOUT seconds, prints "events N bytes B".
#   tap_bench_sub.py ENDPOINT [TIMEOUT]
import sys
import msgpack
import zmq

sock = zmq.Context().socket(zmq.SUB)
sock.connect(sys.argv[1])
sock.setsockopt(zmq.SUBSCRIBE, b"")
timeout_ms = int(float(sys.argv[2] if len(sys.argv) > 2 else 120) * 1000)
events = size = 0
while sock.poll(timeout_ms):
    topic, body = sock.recv_multipart()
    msgpack.unpackb(body, raw=False)
    events += 1
    size += len(body)
    if topic == b"end":
        break
print("events %d bytes %d" % (events, size), flush=True)
