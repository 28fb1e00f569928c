#!/usr/bin/env python3
"""Plain fuzzy requests one at a time, for tests that count answers exactly.

    fuzzy_udp.py --to HOST:PORT [--from ADDR] [--cmd check|ping|stat]
                 [--count N] [--timeout SEC] [--seed S]

Sends N requests (protocol v4, 76 bytes, digest from --seed) one after the
other, each waiting up to --timeout for its reply, and prints one line per
request: the reply's value and flag ("403 0"), or "silent". A reply whose
tag is not the request's is ignored (a late one)."""
import argparse
import hashlib
import socket
import struct
import sys
import time

CMDS = {"check": 0, "stat": 3, "ping": 4}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--to", required=True)
    ap.add_argument("--from", dest="src", default="")
    ap.add_argument("--cmd", default="check", choices=sorted(CMDS))
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=0.5)
    ap.add_argument("--seed", default="shingled")
    a = ap.parse_args()
    host, port = a.to.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if a.src:
        s.bind((a.src, 0))
    s.connect((host, int(port)))
    digest = hashlib.sha512(a.seed.encode()).digest()
    for i in range(a.count):
        tag = (int(time.time() * 1000) + i) & 0xFFFFFFFF
        # version 4, cmd, shingles 0, flag 1, value 1, tag, digest
        s.send(struct.pack("<BBBBiI", 4, CMDS[a.cmd], 0, 1, 1, tag) + digest)
        deadline = time.monotonic() + a.timeout
        answer = "silent"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                r = s.recv(2048)
            except socket.timeout:
                break
            if len(r) >= 16 and struct.unpack_from("<I", r, 8)[0] == tag:
                value, flag = struct.unpack_from("<iI", r, 0)
                answer = "%d %d" % (value, flag)
                break
        print(answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
