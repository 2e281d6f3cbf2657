"""Slowloris on --metrics-http (issue 28): a reporterd waiting for a job
serves /metrics while one address holds 64 TCP connections that send
nothing (reopened when the server drops them) and 40 dashboard streams
(GET /events) that never read. From that same address (loopback: the
scraper and the attacker share 127.0.0.1) each of 3 scrapes must answer
within SCRAPE_S; a scrape that does not is "down" (main: nothing for the
10 s idle timeout, or the connection refused). At most 16 of the streams
are served, the others get 503; after the attack a new page gets its
stream again."""
import atexit
import os
import select
import signal
import socket
import subprocess
import time
from ddp_it import *

SCRAPE_S = 5      # a bound for "down", far above a scrape's latency, below main's 10 s timeout
IDLE, STREAMS = 64, 40
MAX_STREAMS = 16  # reporterd's dashboard streams (WEBFEED_MAX_CLIENTS)


def request(port, path, timeout):
    """(status, body) of GET path, or None when nothing came back within timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" %
                   path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    return int(parts[1]), body


def scrape(port):
    try:
        return request(port, "/metrics", SCRAPE_S)
    except OSError:  # refused or reset at connect
        return None


def idle_socket(port):
    """A connection that sends nothing; None if not even the TCP handshake completed."""
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=SCRAPE_S)
    except OSError:
        return None


def closed_by_server(s):
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


wd = workdir("metrics-slowloris")
port = free_port()
log = open(os.path.join(wd, "reporterd.log"), "w")
# no reducerd: reporterd waits for a job, /metrics up, until SIGTERM
rep = subprocess.Popen([os.path.join(BIN, "reporterd"), "--sub", "ipc://%s/events" % wd,
                        "--reducer", "ipc://%s/coord" % wd, "--out", os.path.join(wd, "run"),
                        "--metrics-http", "127.0.0.1:%d" % port], stdout=log, stderr=log)
# a failed check exits from anywhere below: reporterd must not outlive the test
atexit.register(lambda: rep.poll() is None and (rep.kill(), rep.wait()))
idle, streams = [], []
try:
    deadline = time.time() + 30
    up = None
    while time.time() < deadline and rep.poll() is None and not up:
        try:
            up = request(port, "/metrics", 5)
        except OSError:
            time.sleep(0.1)
    check(up and up[0] == 200 and b"ddpipe_" in up[1],
          "/metrics never came up:\n" + read(os.path.join(wd, "reporterd.log")))

    idle = [idle_socket(port) for _ in range(IDLE)]
    for _ in range(STREAMS):
        s = idle_socket(port)
        if s:
            try:
                s.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Accept: text/event-stream\r\n\r\n")
            except OSError:
                s.close()
                s = None
        streams.append(s)
    check(rep.poll() is None, "reporterd died under the attack")
    for n in range(3):
        t0 = time.time()
        got = scrape(port)
        dt = time.time() - t0
        check(got is not None, "scrape %d: /metrics down (nothing within %d s, or refused) "
              "with %d idle sockets and %d never-reading streams held" %
              (n + 1, SCRAPE_S, IDLE, STREAMS))
        check(got[0] == 200 and b"ddpipe_" in got[1], "scrape %d: %r" % (n + 1, got[:1]))
        print("scrape %d under attack: 200 in %.2f s" % (n + 1, dt), flush=True)
        # the attacker reopens what the server dropped
        for i, s in enumerate(idle):
            if s is None or closed_by_server(s):
                if s:
                    s.close()
                idle[i] = idle_socket(port)

    # the streams: at most MAX_STREAMS served (200), the rest refused (503) or dropped
    served = refused = 0
    for s in streams:
        if s is None:
            continue
        s.settimeout(SCRAPE_S)
        try:
            head = s.recv(12)
        except OSError:
            head = b""
        served += head.startswith(b"HTTP/1.1 200")
        refused += head.startswith(b"HTTP/1.1 503")
    print("streams: %d served, %d refused (503)" % (served, refused), flush=True)
    check(served <= MAX_STREAMS, "%d dashboard streams served at once (at most %d)" %
          (served, MAX_STREAMS))
    check(served + refused >= MAX_STREAMS,
          "only %d of %d streams answered" % (served + refused, STREAMS))
finally:
    for s in idle + streams:
        if s:
            s.close()

try:
    # the attack's streams end (their sockets are closed): a real page gets one again
    deadline, ok = time.time() + 30, None
    while time.time() < deadline and not ok:
        s = socket.create_connection(("127.0.0.1", port), timeout=SCRAPE_S)
        s.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        try:
            head = s.recv(12)
        except OSError:
            head = b""
        s.close()
        ok = head.startswith(b"HTTP/1.1 200")
        if not ok:
            time.sleep(0.2)
    check(ok, "no dashboard stream for a new page after the attack ended")
finally:
    rep.send_signal(signal.SIGTERM)
    try:
        rep.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rep.kill()
        rep.wait()
        fail("reporterd did not stop on SIGTERM")
log.close()
rlog = read(os.path.join(wd, "reporterd.log"))
check("ERROR: AddressSanitizer" not in rlog and "runtime error" not in rlog, "sanitizer:\n" + rlog)
print("1 passed, 0 failed")
