"""Helpers of redis_migrate_test.sh, standard library only.

  write PORT SPEC.json     send the commands of SPEC (a list of argument
                           lists; "hex:..." arguments are raw bytes) to the
                           Redis on 127.0.0.1:PORT, print the replies
  hgetall PORT DB HEXKEY   HGETALL of a binary key in database DB, as sorted
                           "name=value" pairs on one line
  fake PORT MODE           a fake Redis that answers PING, DBSIZE, one SCAN
                           page with one digest hash, its HGETALL and PTTL,
                           then MODE=drop closes the connection at the next
                           SCAN, MODE=garbage answers it with a bad reply
"""
import json
import socket
import sys


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        if isinstance(a, str):
            a = bytes.fromhex(a[4:]) if a.startswith("hex:") else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Reader:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return rest.decode()
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.exact(n)
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise ValueError(line)

    def command(self):
        items = self.reply()
        return [i.decode("latin-1") if isinstance(i, bytes) else i for i in items]


def write(port, spec):
    s = socket.create_connection(("127.0.0.1", int(port)))
    commands = json.load(open(spec))
    s.sendall(b"".join(encode(c) for c in commands))
    r = Reader(s)
    for c in commands:
        reply = r.reply()
        if isinstance(reply, str) and reply.startswith("ERR"):
            sys.exit("%s: %s" % (c[0], reply))


def hgetall(port, db, hexkey):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.sendall(encode(["SELECT", db]) + encode(["HGETALL", "hex:" + hexkey]))
    r = Reader(s)
    r.reply()
    items = r.reply()
    # Redis's field order is its own: sorted name=value pairs compare stably.
    print(" ".join(sorted(items[i].decode() + "=" + items[i + 1].decode() for i in range(0, len(items), 2))))


def fake(port, mode):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(port)))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    r = Reader(conn)
    digest_key = b"fuzzy" + bytes(range(64))
    scans = 0
    try:
        while True:
            cmd = r.command()
            name = cmd[0].upper()
            if name == "PING":
                conn.sendall(b"+PONG\r\n")
            elif name == "DBSIZE":
                conn.sendall(b":2\r\n")
            elif name == "SCAN":
                scans += 1
                if scans == 1:
                    conn.sendall(b"*2\r\n$2\r\n17\r\n*1\r\n$%d\r\n%s\r\n" % (len(digest_key), digest_key))
                elif mode == "drop":
                    conn.close()
                    return
                else:
                    conn.sendall(b":42\r\n")
            elif name == "HGETALL":
                conn.sendall(encode(["F", "1", "V", "5", "C", "1700000000"]))
            elif name == "PTTL":
                conn.sendall(b":86400000\r\n")
            else:
                conn.sendall(b"-ERR unknown command\r\n")
    except EOFError:
        pass


if __name__ == "__main__":
    {"write": write, "hgetall": hgetall, "fake": fake}[sys.argv[1]](*sys.argv[2:])
