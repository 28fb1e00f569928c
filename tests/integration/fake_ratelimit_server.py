#!/usr/bin/env python3
"""A fake shingled rate-limit service for testing contrib/rspamd/shingled_ratelimit.lua
without shingled: it decodes every datagram strictly by the layout of docs/ratelimit.md
(written from the document, not from the C++ codec), logs it as one JSON line, and answers
with a crafted reply chosen by the principal recipient's local part:

  silent...      never answers                  (the plugin must fail open)
  badid...       answers with another request id (the plugin must ignore it)
  resend...      ignores the first copy of a datagram, answers identical resends: limit "to"
  limit-FAMILY.. verdict limit, deciding family FAMILY (to, to_ip, to_ip_from, bounce_to,
                 bounce_to_ip, user), level 3, capacity 3, wait 20000 ms
  white...       verdict whitelisted
  anything else  verdict accept; a check is answered with reservation mask MASK_ON_CHECK

Malformed datagrams get no reply (as shingled) and are logged with "error".
Never sends anywhere but to the datagram's source, on loopback.

  serve PORT LOG                  run the fake
  show LOG RCPT                   the decoded requests whose first recipient is RCPT (JSON lines)
  expect LOG RCPT PHASE JSON      exit 0 if a request for RCPT in PHASE has the fields of JSON
                                  and its bytes equal encode() of those fields (id aside)
"""
import json
import math
import socket
import struct
import sys
import time

MAGIC = b'shrl'
PHASES = {1: 'one-shot', 2: 'check', 3: 'update', 4: 'release'}
FAMILIES = ['to', 'to_ip', 'to_ip_from', 'bounce_to', 'bounce_to_ip', 'user']
MASK_ON_CHECK = 0x8000000000000105   # bits in the first and the last byte: byte order shows


class Malformed(Exception):
    pass


def decode(b):
    """Request bytes -> dict, or raises Malformed with the docs' reason name."""
    if len(b) < 16:
        raise Malformed('too_short')
    if len(b) > 8192:
        raise Malformed('too_long')
    if b[:4] != MAGIC:
        raise Malformed('bad_magic')
    version, kind, n, reserved = b[4], b[5], b[6], b[7]
    if version != 1:
        raise Malformed('bad_version')
    if kind != 1:
        raise Malformed('bad_kind')        # the plugin only sends message requests
    if n != 1:
        raise Malformed('bad_count')       # ... with one message each
    if reserved != 0:
        raise Malformed('bad_reserved')
    rid = b[8:16]
    at = 16
    if len(b) < at + 32:
        raise Malformed('truncated')
    phase, outcome, fam, flags = b[at], b[at + 1], b[at + 2], b[at + 3]
    rcpt_count, = struct.unpack_from('<H', b, at + 4)
    r, res2 = b[at + 6], b[at + 7]
    mask, = struct.unpack_from('<Q', b, at + 8)
    ipb = b[at + 16:at + 32]
    if phase not in PHASES:
        raise Malformed('bad_phase')
    if outcome > 2 or (outcome != 0 and phase not in (1, 3)):
        raise Malformed('bad_outcome')
    if fam not in (0, 4, 6):
        raise Malformed('bad_ip_family')
    if flags & ~1 or res2:
        raise Malformed('bad_reserved')
    if r > 32 or r > rcpt_count:
        raise Malformed('bad_rcpts')
    if mask and phase in (1, 2):
        raise Malformed('bad_mask')
    alen = {0: 0, 4: 4, 6: 16}[fam]
    if any(ipb[alen:]):
        raise Malformed('bad_reserved')
    ip = ''
    if fam == 4:
        ip = socket.inet_ntop(socket.AF_INET, ipb[:4])
    elif fam == 6:
        ip = socket.inet_ntop(socket.AF_INET6, ipb)
    at += 32

    def string():
        nonlocal at
        if at >= len(b) or at + 1 + b[at] > len(b):
            raise Malformed('truncated')
        s = b[at + 1:at + 1 + b[at]]
        at += 1 + b[at]
        return s.decode('utf-8', 'surrogateescape')

    sender = string()
    if not flags & 1 and sender:
        raise Malformed('bad_reserved')
    user = string()
    rcpts = []
    for _ in range(r):
        s = string()
        if not s:
            raise Malformed('bad_rcpts')
        rcpts.append(s)
    if at != len(b):
        raise Malformed('trailing_bytes')
    return {'id': rid.hex(), 'phase': PHASES[phase], 'outcome': outcome, 'ip': ip,
            'has_sender': bool(flags & 1), 'sender': sender, 'user': user,
            'rcpt_count': rcpt_count, 'rcpts': rcpts, 'mask': '%016x' % mask}


def encode(f, rid):
    """The request the document specifies for the fields f (as decode returns them)."""
    phase = {v: k for k, v in PHASES.items()}[f['phase']]
    if f['ip'] == '':
        fam, ipb = 0, bytes(16)
    elif ':' in f['ip']:
        fam, ipb = 6, socket.inet_pton(socket.AF_INET6, f['ip'])
    else:
        fam, ipb = 4, socket.inet_pton(socket.AF_INET, f['ip']) + bytes(12)

    def lstr(s):
        e = s.encode('utf-8', 'surrogateescape')
        return bytes([len(e)]) + e

    out = MAGIC + bytes([1, 1, 1, 0]) + rid
    out += bytes([phase, f['outcome'], fam, 1 if f['has_sender'] else 0])
    out += struct.pack('<HBBQ', f['rcpt_count'], len(f['rcpts']), 0, int(f['mask'], 16)) + ipb
    out += lstr(f['sender']) + lstr(f['user']) + b''.join(lstr(r) for r in f['rcpts'])
    return out


def reply(rid, verdict, family=0, rcpt=0, wait=0, mask=0, level=0.0, cap=0.0, nb=1):
    score = 2 * math.tanh(level / (2 * cap)) if cap else 0.0
    return (MAGIC + bytes([1, 1, 1, 0]) + rid +
            struct.pack('<BBBBIQfffB3x', verdict, 0, family, rcpt, wait, mask, level, cap, score, nb))


def answer(f, raw, seen):
    """The reply bytes for a decoded request, or None for no reply."""
    rid = raw[8:16]
    local = (f['rcpts'][0] if f['rcpts'] else '').split('@')[0].lower()
    if local.startswith('silent'):
        return None
    if local.startswith('badid'):
        return reply(bytes(b ^ 0xff for b in rid), 1, 1, 0, 20000, 0, 3.0, 3.0)
    if local.startswith('resend'):
        if raw not in seen:
            return None
        return reply(rid, 1, 1, 0, 20000, 0, 3.0, 3.0)
    if local.startswith('limit-'):
        fam = local[len('limit-'):]
        if fam not in FAMILIES:
            fam = 'to'
        idx = FAMILIES.index(fam)
        return reply(rid, 1, idx + 1, 255 if fam == 'user' else 0, 20000, 0, 3.0, 3.0)
    if local.startswith('white'):
        return reply(rid, 2)
    mask = MASK_ON_CHECK if f['phase'] == 'check' else 0
    return reply(rid, 0, 1, 0, 0, mask, 1.0, 3.0, 3)


def serve(port, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('127.0.0.1', int(port)))
    seen = set()
    with open(log, 'a', buffering=1) as out:
        while True:
            raw, addr = s.recvfrom(65536)
            entry = {'t': round(time.time(), 3), 'src_port': addr[1], 'len': len(raw),
                     'hex': raw.hex(), 'resend': raw in seen}
            try:
                f = decode(raw)
                entry.update(f)
                rep = answer(f, raw, seen)
            except Malformed as e:
                entry['error'] = str(e)
                rep = None
            seen.add(raw)
            entry['replied'] = rep is not None
            out.write(json.dumps(entry) + '\n')
            if rep is not None:
                s.sendto(rep, addr)


def entries(log, rcpt):
    with open(log) as fh:
        for line in fh:
            e = json.loads(line)
            if e.get('rcpts', [None])[:1] == [rcpt] or (rcpt == '*' and 'error' in e):
                yield e


def expect(log, rcpt, phase, want_json):
    """Every request for RCPT in PHASE must carry the fields of WANT and be byte for byte
    the document's encoding of them; at least one must exist. Prints what it saw."""
    want = json.loads(want_json)
    got = [e for e in entries(log, rcpt) if e.get('phase') == phase]
    if not got:
        print('no %s request for %s' % (phase, rcpt))
        return 1
    for e in got:
        diff = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
        if diff:
            print('fields differ (seen, expected): %s' % json.dumps(diff))
            return 1
        ref = encode(e, bytes.fromhex(e['id'])).hex()
        if ref != e['hex']:
            print('bytes differ from the documented encoding: seen %s, expected %s' % (e['hex'], ref))
            return 1
    print('%d %s request(s), %d bytes, fields %s' % (len(got), phase, got[0]['len'],
          json.dumps({k: got[0].get(k) for k in ('ip', 'sender', 'user', 'rcpts', 'rcpt_count',
                                                  'outcome', 'mask')})))
    return 0


if __name__ == '__main__':
    a = sys.argv[1:]
    if a[:1] == ['serve']:
        serve(a[1], a[2])
    elif a[:1] == ['show']:
        for e in entries(a[1], a[2]):
            print(json.dumps(e))
    elif a[:1] == ['expect']:
        sys.exit(expect(a[1], a[2], a[3], a[4]))
    else:
        print(__doc__)
        sys.exit(2)
