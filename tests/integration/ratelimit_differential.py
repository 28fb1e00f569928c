"""The same rate-limit call sequence through current rspamd's Redis scripts
and through shingled (protocol kind 3, at the same client times); every
decision and bucket level must agree. Standard library only.

  live PORT_REDIS PORT_SHINGLED SCRIPTS_DIR [RECORD.jsonl]
      runs the scripts (ratelimit_check/update/cleanup_pending.lua, read
      from SCRIPTS_DIR, an installed rspamd's lualib/redis_scripts) with
      EVAL on the Redis at 127.0.0.1:PORT_REDIS, the same calls on shingled,
      compares; with RECORD, writes every call and Redis's answer to it
  replay PORT_SHINGLED RECORD.jsonl
      the calls of a recorded live run on shingled, compared with the
      answers Redis gave then (for machines without current rspamd)

The sequence is fixed (seeded): 60 buckets (bursts 1-12, rates 0.2-40 a
second, a third with dynamic multipliers and their own factors), 1,500
messages of 1-4 buckets each, 1-6 recipients (a quarter of the buckets
charged 1, skip_recipients), two-phase as the rspamd plugin drives them:
check every bucket at t; if none refused, update each at t + 0..120 ms
with the verdict's factors (ham, spam or neither); if one refused, clean up
the pending of those that reserved, at t (shingled releases them at the
check). A tenth of the messages overlap the next one (its check runs before
this one's update), so pending capacity matters. Times start five minutes
in the past (shingled takes client times within ten minutes of its clock).

Prints one line per mismatch (at most 20) and a summary; exit 0 only if all
agree. Levels are compared within 1e-4 relative (shingled answers f32).
"""
import json
import random
import socket
import struct
import sys
import time

import redis_tools

EXPIRE = 3600
DEFAULT_FACTORS = (1.01, 0.99, 1.02, 0.98, 5.0, 10.0)  # ham/spam rate, ham/spam burst, max mults


def sequence():
    rng = random.Random(20261126)
    buckets = []
    for i in range(60):
        dyn = i % 3 == 0
        own = dyn and i % 2 == 0
        factors = (round(rng.uniform(1.005, 1.1), 3), round(rng.uniform(0.9, 0.995), 3),
                   round(rng.uniform(1.005, 1.1), 3), round(rng.uniform(0.9, 0.995), 3),
                   float(rng.choice([2, 5])), float(rng.choice([3, 10]))) if own else DEFAULT_FACTORS
        buckets.append({"key": "RLdiff%02d" % i, "burst": float(rng.randint(1, 12)),
                        "rate": round(rng.uniform(0.2, 40), 4), "dyn": dyn, "own": own,
                        "factors": factors, "skip_rcpts": i % 4 == 1})
    messages, t = [], 0
    for _ in range(1500):
        t += rng.randint(0, 400)
        picked = rng.sample(range(60), rng.randint(1, 4))
        messages.append({"t": t, "buckets": picked, "rcpts": rng.randint(1, 6),
                         "scan_ms": rng.randint(0, 120), "overlap": rng.random() < 0.1,
                         "outcome": rng.choice([0, 0, 1, 2])})
    return buckets, messages


def calls():
    """The calls in order: (op, time offset, message index, bucket indexes)."""
    buckets, messages = sequence()
    out, held = [], None  # held: an overlapping message's update, sent after the next check
    for m_i, m in enumerate(messages):
        out.append(("check", m["t"], m_i))
        if held is not None:
            out.append(held)
            held = None
        finish = ("finish", m["t"] + m["scan_ms"], m_i)
        if m["overlap"]:
            held = finish
        else:
            out.append(finish)
    if held is not None:
        out.append(held)
    return buckets, messages, out


def cost(b, m):
    return 1 if b["skip_rcpts"] else m["rcpts"]


# ---------------------------------------------------------------- shingled, kind 3

class Shingled:
    def __init__(self, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(2)
        self.addr = ("127.0.0.1", port)
        self.next_id = 1

    def message(self, phase, outcome, mask, at_ms, specs):
        body = b""
        for b, c in specs:
            flags = (1 if b["dyn"] else 0) | (2 if b["own"] else 0)
            key = b["key"].encode()
            body += bytes([len(key), flags]) + struct.pack("<HIdd", c, EXPIRE, b["burst"], b["rate"]) + key
            if b["own"]:
                body += struct.pack("<6d", *b["factors"])
        item = bytes([phase, outcome, len(specs), 0, 0, 0, 0, 0]) + struct.pack("<Qq", mask, at_ms)
        rid = self.next_id
        self.next_id += 1
        req = b"shrl" + bytes([1, 3, 1, 0]) + struct.pack("<Q", rid) + item + body
        for _ in range(5):
            self.sock.sendto(req, self.addr)
            try:
                while True:
                    r = self.sock.recv(4096)
                    if len(r) >= 16 and struct.unpack("<Q", r[8:16])[0] == rid:
                        break
            except socket.timeout:
                continue
            if len(r) != 56 or r[7] != 0:
                raise RuntimeError("bad reply of %d bytes, status %d" % (len(r), r[7]))
            verdict = r[16]
            mask_r, = struct.unpack("<Q", r[24:32])
            level, = struct.unpack("<f", r[32:36])
            limited, = struct.unpack("<Q", r[48:56])
            return verdict, mask_r, level, limited
        raise RuntimeError("shingled did not answer")

    def level(self, b, at_ms):
        """level + pending of one bucket as a check at at_ms would see it, changing
        nothing (a release of nothing)."""
        return self.message(4, 0, 0, at_ms, [(b, 1)])[2]


# ---------------------------------------------------------------- Redis, rspamd's scripts

class Redis:
    def __init__(self, port, scripts_dir):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = redis_tools.Reader(self.sock)
        self.scripts = {}
        for name in ("check", "update", "cleanup_pending"):
            with open("%s/ratelimit_%s.lua" % (scripts_dir, name)) as f:
                self.scripts[name] = f.read()

    def call(self, *args):
        self.sock.sendall(redis_tools.encode([str(a) for a in args]))
        r = self.reader.reply()
        if isinstance(r, str) and r.startswith("ERR"):
            raise RuntimeError(r)
        return r

    def eval(self, name, keys):
        return self.call("EVAL", self.scripts[name], len(keys), *keys)


def lua_num(x):
    """A number as rspamd's plugin passes it (Lua's %.14g)."""
    return "%.14g" % x


def redis_script_calls(b, m, op, at_ms, allowed_msg):
    """The EVAL of one bucket as the plugin drives it: (script, KEYS)."""
    n = cost(b, m)
    dyn = "true" if b["dyn"] else "false"
    if op == "check":
        return "check", [b["key"], at_ms, lua_num(b["rate"] / 1000.0), lua_num(b["burst"]), EXPIRE, n,
                         dyn, "RL_cache_prefix", 30]
    if allowed_msg:
        f = b["factors"]
        if b["dyn"] and m["outcome"] == 2:
            mr, mb = f[1], f[3]
        elif b["dyn"] and m["outcome"] == 1:
            mr, mb = f[0], f[2]
        else:
            mr, mb = 1.0, 1.0
        return "update", [b["key"], at_ms, lua_num(mr), lua_num(mb), lua_num(f[4]), lua_num(f[5]),
                          EXPIRE, n, dyn]
    return "cleanup_pending", [b["key"], at_ms, EXPIRE, n]


# ---------------------------------------------------------------- the run

def run(shingled, redis=None, record=None, replay=None):
    buckets, messages, order = calls()
    base = int(time.time() * 1000) - 300_000
    state = {}  # message index -> {"allowed": bool, "mask": int, "reserved": [bucket indexes]}
    mismatches, decisions, levels = [], 0, 0
    replay_iter = iter(replay or [])
    out = open(record, "w") if record else None

    def report(what):
        mismatches.append(what)
        if len(mismatches) <= 20:
            print("MISMATCH " + what)

    for op, t, m_i in order:
        m = messages[m_i]
        at = base + t
        if op == "check":
            verdict, mask, _, limited = shingled.message(2, 0, 0, at, [(buckets[i], cost(buckets[i], m)) for i in m["buckets"]])
            flags = []
            for pos, i in enumerate(m["buckets"]):
                if redis is not None:
                    script, keys = redis_script_calls(buckets[i], m, "check", at, True)
                    r = redis.eval(script, keys)
                    flag = int(r[0])
                    if out:
                        out.write(json.dumps({"m": m_i, "op": "check", "b": i, "flag": flag}) + "\n")
                else:
                    rec = next(replay_iter)
                    assert rec["m"] == m_i and rec["op"] == "check" and rec["b"] == i, rec
                    flag = rec["flag"]
                flags.append(flag)
                decisions += 1
                if bool(flag) != bool(limited >> pos & 1):
                    report("message %d bucket %s at +%d ms: rspamd's check says %s, shingled %s"
                           % (m_i, buckets[i]["key"], t, "limit" if flag else "allow",
                              "limit" if limited >> pos & 1 else "allow"))
            allowed = not any(flags)
            state[m_i] = {"allowed": allowed, "mask": mask,
                          "reserved": [i for i, f in zip(m["buckets"], flags) if not f]}
            if not allowed:
                # shingled released the reserved buckets at the check; rspamd's
                # plugin cleans them up (the same time, see the docstring)
                for i in state[m_i]["reserved"]:
                    if redis is not None:
                        script, keys = redis_script_calls(buckets[i], m, "finish", at, False)
                        redis.eval(script, keys)
        else:
            st = state[m_i]
            if st["allowed"]:
                shingled.message(3, m["outcome"], st["mask"], at,
                                 [(buckets[i], cost(buckets[i], m)) for i in m["buckets"]])
                for i in m["buckets"]:
                    if redis is not None:
                        script, keys = redis_script_calls(buckets[i], m, "finish", at, True)
                        redis.eval(script, keys)
            for i in m["buckets"]:
                # Read at a time before every call of the run: no leak is
                # computed, so this is the stored level + pending, as HMGET
                # reads it (an update may move a bucket's time back, P14).
                got = shingled.level(buckets[i], base - 1)
                if redis is not None:
                    b_, p_ = redis.call("HMGET", buckets[i]["key"], "b", "p")
                    want = float(b_ or 0) + float(p_ or 0)
                    if out:
                        out.write(json.dumps({"m": m_i, "op": "level", "b": i, "level": want}) + "\n")
                else:
                    rec = next(replay_iter)
                    assert rec["m"] == m_i and rec["op"] == "level" and rec["b"] == i, rec
                    want = rec["level"]
                levels += 1
                if abs(got - want) > 1e-4 * max(1.0, abs(want)):
                    report("message %d bucket %s at +%d ms: rspamd's level + pending %.6f, shingled %.6f"
                           % (m_i, buckets[i]["key"], t, want, got))
    if out:
        out.close()
    print("%d decisions and %d bucket levels compared over %d messages: %d mismatches"
          % (decisions, levels, len(messages), len(mismatches)))
    return not mismatches


def main():
    if sys.argv[1] == "live":
        ok = run(Shingled(int(sys.argv[3])), Redis(int(sys.argv[2]), sys.argv[4]),
                 record=sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        with open(sys.argv[3]) as f:
            recorded = [json.loads(line) for line in f]
        ok = run(Shingled(int(sys.argv[2])), replay=recorded)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
