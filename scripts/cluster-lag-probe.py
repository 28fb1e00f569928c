#!/usr/bin/env python3
"""Replication lag of a shingled cluster as a client sees it: how long after
one node acknowledged a WRITE another node finds it.

    cluster-lag-probe.py --write HOST:PORT --read HOST:PORT [--samples N]
                         [--seed S] [--timeout SEC]

Each sample WRITEs a fresh digest (rspamd's protocol v4, plain, no
shingles) to the --write node, waits for its acknowledgement (given after
JetStream stored the update), then CHECKs the --read node for it, one
request after another with no pause, until a CHECK finds it. Lag = the
time from the acknowledgement to the answer that found it (so it includes
one CHECK round trip, ~0.1 ms on loopback: the resolution of the figure).
Prints one JSON line: samples, p50/p90/p99/max in microseconds, and how
many samples were never found within --timeout (counted, not hidden).
Run it beside a load (scripts/bench-cluster.sh does) to see the lag under
write traffic."""
import argparse
import hashlib
import json
import socket
import struct
import sys
import time

WRITE, CHECK = 1, 0


def request(cmd, tag, digest):
    # version 4, command, shingle count 0, flag 1, value 1, tag, digest
    return struct.pack("<BBBBiI", 4, cmd, 0, 1, 1, tag) + digest


def ask(sock, data, tag, timeout):
    """Sends `data`, returns the reply with `tag` (None after `timeout`)."""
    sock.send(data)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            r = sock.recv(2048)
        except socket.timeout:
            return None
        if len(r) >= 16 and struct.unpack_from("<I", r, 8)[0] == tag:
            return r


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, int(port)))
    return s


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", required=True)
    ap.add_argument("--read", required=True)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", default="lag-probe")
    ap.add_argument("--timeout", type=float, default=5.0)
    a = ap.parse_args()
    w, r = connect(a.write), connect(a.read)
    lags, unacked, unseen = [], 0, 0
    tag = 1
    run = "%s-%f" % (a.seed, time.time())
    for i in range(a.samples):
        digest = hashlib.sha512(("%s-%d" % (run, i)).encode()).digest()
        tag += 1
        if ask(w, request(WRITE, tag, digest), tag, a.timeout) is None:
            unacked += 1
            continue
        acked = time.monotonic()
        found = None
        while time.monotonic() - acked < a.timeout:
            tag += 1
            reply = ask(r, request(CHECK, tag, digest), tag, 1.0)
            if reply is not None and struct.unpack_from("<f", reply, 12)[0] > 0.5:
                found = time.monotonic()
                break
        if found is None:
            unseen += 1
        else:
            lags.append((found - acked) * 1e6)
    lags.sort()
    print(json.dumps({"samples": len(lags), "unacked": unacked, "unseen": unseen,
                      "p50_us": round(percentile(lags, 50), 1), "p90_us": round(percentile(lags, 90), 1),
                      "p99_us": round(percentile(lags, 99), 1), "max_us": round(lags[-1], 1) if lags else 0}))
    return 0 if unacked == 0 and unseen == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
