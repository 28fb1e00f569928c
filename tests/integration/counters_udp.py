#!/usr/bin/env python3
"""One counter request as raw datagrams, for tests that need what
`shinglectl counters` does not do: an increment-and-read, or the very same
datagram (same bytes, same source port) sent to several servers in turn.

  counters_udp.py --servers PORT[,PORT...] --op read|add|add-read --prefix P
                  [--tag N] [--delta N] ENTRY...

ENTRY is TYPE:SHINGLE or TYPE:SHINGLE:PAIR (decimal). The one datagram goes
to each server on 127.0.0.1 in turn, from one socket, each answer awaited
(1 s, three tries). Prints one JSON line per server: {"status": S,
"today": [...]} (today's sum of each entry, for reads)."""
import argparse
import json
import socket
import struct
import sys

OPS = {"read": 1, "add": 2, "add-read": 3}


def request(op, prefix, tag, delta, entries):
    p = prefix.encode()
    out = b"shct" + struct.pack("<BBHI", 1, OPS[op], len(entries), tag) + struct.pack("<B", len(p)) + p
    for e in entries:
        parts = [int(x, 0) for x in e.split(":")]
        pair = len(parts) == 3
        d = 0 if op == "read" else delta
        out += struct.pack("<HBBIQ", parts[0], 1 if pair else 0, 0, d, parts[1])
        if pair:
            out += struct.pack("<Q", parts[2])
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--servers", required=True)
    a.add_argument("--op", required=True, choices=OPS)
    a.add_argument("--prefix", required=True)
    a.add_argument("--tag", type=int, default=0x5EED)
    a.add_argument("--delta", type=int, default=1)
    a.add_argument("entries", nargs="+")
    o = a.parse_args()
    data = request(o.op, o.prefix, o.tag, o.delta, o.entries)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    for port in o.servers.split(","):
        reply = None
        for _ in range(3):
            s.sendto(data, ("127.0.0.1", int(port)))
            try:
                reply, _ = s.recvfrom(65536)
                break
            except socket.timeout:
                continue
        if reply is None:
            print(json.dumps({"status": None}))
            continue
        status = reply[12]
        today = []
        if o.op != "add" and len(reply) >= 16 + 48 * len(o.entries):
            for i in range(len(o.entries)):
                today.append(struct.unpack_from("<6Q", reply, 16 + 48 * i)[3])
        print(json.dumps({"status": status, "today": today}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
