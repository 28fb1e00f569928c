"""Prints N loopback ports (20000-40000) that are free right now for both
TCP and UDP, space-separated, none of the TAKEN ones:
`python3 free_ports.py N [TAKEN...]`. Shared by the integration tests and
the benchmark scripts that start rspamd, Redis and shingled on private ports."""
import random
import socket
import sys


def free_ports(n, taken=()):
    got = []
    while len(got) < n:
        p = random.randint(20000, 40000)
        if p in got or p in taken:
            continue
        ok = True
        for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, typ)
            try:
                s.bind(('127.0.0.1', p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            got.append(p)
    return got


if __name__ == '__main__':
    taken = {int(t) for arg in sys.argv[2:] for t in arg.split()}
    print(' '.join(map(str, free_ports(int(sys.argv[1]), taken))))
