#!/usr/bin/env python3
"""A small rate-limit client for the cluster tests (protocol:
include/shingled/ratelimit_wire.h). One request at a time, each resent as
the very same datagram when no answer comes within a second (as rspamd's
UDP client does), up to five times.

  ratelimit_udp.py bucket PORT KEY BURST LEAK COUNT   COUNT check-and-update
      calls of cost 1 on one bucket (kind 2); prints "allowed limited
      not_stored unanswered"
  ratelimit_udp.py peek PORT KEY BURST LEAK           the bucket's level now
      (kind 2, peek); prints it
  ratelimit_udp.py message PORT KEY BURST RATE COUNT  COUNT one-shot messages
      (kind 3) with one bucket each (rspamd's arithmetic: reserve, then
      commit or release); prints "accepted limited not_stored unanswered"
  ratelimit_udp.py envelope PORT RCPT COUNT           COUNT one-shot messages
      (kind 1) from a@example.net to RCPT: the server's rules form the
      buckets; prints the same four counts
  ratelimit_udp.py envelope-many PORT NRCPT COUNT [PREFIX]   COUNT
      one-shot messages (kind 1) from a 224-byte sender at 192.0.2.1,
      each listing the same NRCPT recipients of ~100 bytes, PREFIX before
      each (a request of ~1.9 KB for 16: the rules can form 64 buckets
      with long keys from it); prints the same four counts
  ratelimit_udp.py dynamic PORT KEY BURST PHASE OUTCOME COUNT SET
      COUNT kind-3 messages (PHASE 1 one-shot, 2 check; OUTCOME 0
      uncertain, 2 spam) with one bucket, dynamic multipliers on and own
      factors: SET 0 the set whose spam burst factor is 0.5, SET n > 0
      sets n .. n+COUNT-1, each request a set of its own; prints the four
      counts and the capacity of the last answer
"""
import os
import socket
import struct
import sys

MAGIC = b"shrl"


def request(kind, body, n):
    rid = struct.unpack("<Q", os.urandom(8))[0]
    return rid, MAGIC + bytes([1, kind, n, 0]) + struct.pack("<Q", rid) + body


def exchange(sock, port, rid, datagram):
    for _ in range(5):
        sock.sendto(datagram, ("127.0.0.1", port))
        try:
            while True:
                reply, _ = sock.recvfrom(4096)
                if len(reply) >= 16 and reply[:4] == MAGIC and struct.unpack("<Q", reply[8:16])[0] == rid:
                    return reply
        except socket.timeout:
            continue
    return None


def bucket_item(op, key, burst, leak):
    k = key.encode()
    return bytes([op, len(k), 0, 0, 0, 0, 0, 0]) + struct.pack("<ddd", burst, leak, 1.0) + k


def main():
    what, port = sys.argv[1], int(sys.argv[2])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    if what == "peek":
        key, burst, leak = sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
        rid, d = request(2, bucket_item(4, key, burst, leak), 1)
        reply = exchange(sock, port, rid, d)
        if reply is None or len(reply) != 16 + 24:
            print("unanswered")
            return 1
        print("%g" % struct.unpack("<d", reply[24:32])[0])
        return 0
    if what == "envelope":
        rcpt, count = sys.argv[3].encode(), int(sys.argv[4])
        key, burst, rate = "", 0.0, 0.0
    elif what == "envelope-many":
        nrcpt, count = int(sys.argv[3]), int(sys.argv[4])
        prefix = sys.argv[5].encode() if len(sys.argv) > 5 else b""
    elif what == "dynamic":
        key, burst = sys.argv[3], float(sys.argv[4])
        phase, outcome, count, first_set = (int(a) for a in sys.argv[5:9])
        capacity = None
    else:
        key, burst, rate, count = sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    tally = [0, 0, 0, 0]  # allowed/accepted, limited, not stored, unanswered
    for i in range(count):
        if what == "dynamic":
            k = key.encode()
            # ham rate, spam rate, ham burst, spam burst, max rate mult, max bucket mult
            factors = (1.01, 0.99, 1.02, 0.5, 5.0, 10.0) if first_set == 0 else \
                (1.01, 0.5 + (first_set + i) / 1000.0, 1.02, 0.98, 5.0, 10.0)
            item = bytes([phase, outcome, 1, 0, 0, 0, 0, 0]) + struct.pack("<Qq", 0, 0)
            spec = bytes([len(k), 3]) + struct.pack("<HIdd", 1, 0, burst, 0.0) + k + struct.pack("<6d", *factors)
            rid, d = request(3, item + spec, 1)
        elif what == "envelope":
            sender = b"a@example.net"
            item = bytes([1, 0, 0, 1]) + struct.pack("<H", 1) + bytes([1, 0]) + struct.pack("<Q", 0) + bytes(16)
            item += bytes([len(sender)]) + sender + bytes([0]) + bytes([len(rcpt)]) + rcpt
            rid, d = request(1, item, 1)
        elif what == "envelope-many":
            sender = b"s" * 212 + b"@example.net"
            rcpts = [prefix + (b"rcpt%02d-" % i) + b"r" * (84 - len(prefix)) + b"@example.net"
                     for i in range(nrcpt)]
            item = bytes([1, 0, 4, 1]) + struct.pack("<H", nrcpt) + bytes([nrcpt, 0]) + struct.pack("<Q", 0)
            item += bytes([192, 0, 2, 1]) + bytes(12)
            item += bytes([len(sender)]) + sender + bytes([0])
            item += b"".join(bytes([len(r)]) + r for r in rcpts)
            rid, d = request(1, item, 1)
        elif what == "bucket":
            rid, d = request(2, bucket_item(3, key, burst, rate), 1)
        else:
            k = key.encode()
            item = bytes([1, 0, 1, 0, 0, 0, 0, 0]) + struct.pack("<Qq", 0, 0)
            spec = bytes([len(k), 0]) + struct.pack("<HIdd", 1, 0, burst, rate) + k
            rid, d = request(3, item + spec, 1)
        reply = exchange(sock, port, rid, d)
        if reply is None or len(reply) < 17 or reply[7] != 0:
            tally[3] += 1
        elif what == "bucket":
            status = reply[16]
            tally[min(status, 2)] += 1
        else:
            verdict, flags = reply[16], reply[17]
            tally[2 if flags & 1 else 1 if verdict == 1 else 0] += 1
            if what == "dynamic":
                capacity = struct.unpack("<f", reply[16 + 20:16 + 24])[0]
    if what == "dynamic":
        print(" ".join(str(t) for t in tally), "%g" % capacity if capacity is not None else "none")
        return 0
    print(" ".join(str(t) for t in tally))
    return 0


if __name__ == "__main__":
    sys.exit(main())
