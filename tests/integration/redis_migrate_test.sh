#!/usr/bin/env bash
# shinglectl's Redis migration against a real redis-server (started here on
# a private port) and a fake one, without rspamd:
#  - current rspamd's layout from fixtures built from its documented key
#    format (F/V, F1..F7/V1..V7, C, S, shingle keys with TTLs): imported with
#    every flag, the largest first, and exported back field for field; the
#    3.4 layout keeps one flag;
#  - streaming: several sorter runs' worth of digests (small runs forced
#    through SHINGLED_SPILL_RUN) come out complete and in order;
#  - bad inputs: keys of the wrong type, truncated fields, a shingle key of
#    the wrong size, a connection dropped mid-scan, a garbled reply, a
#    database held by another process: exit 1, the key and the reason, and
#    the database as it was (absent, or with its earlier records);
#  - export: refuses a filled prefix without --merge; --merge replaces.
# Usage: redis_migrate_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
ctl=$(realpath "$build/tools/shinglectl")
tools="$here/redis_tools.py"
for t in redis-server redis-cli python3; do command -v "$t" >/dev/null || { echo "$t not found"; echo "0 passed, 1 failed"; exit 1; }; done

expect_run() {  # NAME RC PATTERN COMMAND...
  local name=$1 want_rc=$2 pattern=$3 out rc
  shift 3
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -Eq -- "$pattern" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "rc=$rc (want $want_rc), output: $out"
  fi
}

tmp=$(mktemp -d)
redis_pid=""; fake_pid=""; locker=""
cleanup() {
  for p in $redis_pid $fake_pid $locker; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"
read -r port fake_port <<<"$(python3 -S "$here/free_ports.py" 2)"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
  --logfile "$tmp/redis.log" >/dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
R() { redis-cli -p "$port" "$@"; }
fresh() { R -n "${1:-0}" flushdb >/dev/null; }

# ---------------------------------------------------------------- current layout fixtures
# Three digests as current rspamd writes them: D1 with three flags (F/V the
# largest), its own shingles in S and all 32 shingle keys; D2 as 3.4 wrote
# it (F/V/C only) with a TTL; D3 with 16 of its 32 shingle keys taken over
# by D1 (rspamd's last writer wins).
python3 - <<'EOF'
import json
D1, D2, D3 = "a1" * 64, "b2" * 64, "c3" * 64
sh1 = [1000 + i for i in range(32)]
sh3 = [3000 + i for i in range(32)]
S1 = ",".join("%d_%d" % (i, v) for i, v in enumerate(sh1))
cmds = [
    ["HSET", "hex:" + "66757a7a79" + D1, "F", "2", "V", "30", "F1", "1", "V1", "20", "F2", "7", "V2", "-3",
     "C", "1700000000", "S", S1],
    ["EXPIRE", "hex:" + "66757a7a79" + D1, "7776000"],
    ["HSET", "hex:" + "66757a7a79" + D2, "F", "1", "V", "4", "C", "1700000500"],
    ["EXPIRE", "hex:" + "66757a7a79" + D2, "3600"],
    ["HSET", "hex:" + "66757a7a79" + D3, "F", "3", "V", "1"],
    ["EXPIRE", "hex:" + "66757a7a79" + D3, "7776000"],
    ["SET", "fuzzy_count", "5"],
    ["SET", "fuzzylocal", "9"],
]
for i, v in enumerate(sh1):
    cmds.append(["SET", "fuzzy_%d_%d" % (i, v), "hex:" + D1, "EX", "7776000"])
for i, v in enumerate(sh3):
    cmds.append(["SET", "fuzzy_%d_%d" % (i, v), "hex:" + (D1 if i % 2 else D3), "EX", "7776000"])
json.dump(cmds, open("fixture.json", "w"))
EOF
python3 "$tools" write "$port" fixture.json || fail fixture_written "redis_tools write failed"
expect_run "import-rspamd-redis reads the current layout" 0 \
  '^3 digests \(1 with shingles, 1 without, 1 with an incomplete shingle set; 1 with several flags\); flag 1: 2; flag 2: 1; flag 3: 1; flag 7: 1' \
  "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db-dir cur
"$ctl" dump --db cur >cur.jsonl
if python3 - cur.jsonl <<'EOF'
import json, sys, time
recs = {r["digest"][:2]: r for r in map(json.loads, open(sys.argv[1]))}
d1, d2, d3 = recs["a1"], recs["b2"], recs["c3"]
assert d1["flags"] == [{"flag": 2, "value": 30}, {"flag": 1, "value": 20}, {"flag": 7, "value": -3}], d1
assert d1["shingles"] == ["%016x" % (1000 + i) for i in range(32)], d1.get("shingles")
assert d1["first_write"] == 1700000000
now = time.time()
assert abs(d1["last_write"] - now) < 30, d1          # TTL 90 d = expire: written just now
assert abs(d2["last_write"] - (now + 3600 - 7776000)) < 30, d2   # 1 h left of 90 d
assert d2["first_write"] == 1700000500 and "shingles" not in d2
assert "shingles" not in d3 and d3["flags"] == [{"flag": 3, "value": 1}]
EOF
then pass "flags largest first, S-owned shingles, C as first_write, TTL as expiry"; else fail "imported fixture records" "$(cat cur.jsonl | cut -c1-200)"; fi

fresh 1
expect_run "export --layout current into an empty database" 0 '^exported 3 digests .*layout current.*: 1 with shingles' \
  "$ctl" export-rspamd-redis --redis "127.0.0.1:$port" --db 1 --db-dir cur
d1_key="66757a7a79$(printf 'a1%.0s' $(seq 64))"
want_fields="C=1700000000 F1=1 F2=7 F=2 S=$(python3 -c 'print(",".join("%d_%d" % (i, 1000 + i) for i in range(32)))') V1=20 V2=-3 V=30"
# (redis-cli cannot pass a binary key: redis_tools reads it, fields sorted)
got=$(python3 "$tools" hgetall "$port" 1 "$d1_key")
if [ "$got" = "$want_fields" ]; then pass "the exported hash has current rspamd's fields"; else fail "exported fields" "want: $want_fields; got: $got"; fi
shingle_ttl=$(R -n 1 ttl fuzzy_5_1005)
owner=$(R -n 1 --raw get fuzzy_5_1005 | head -c 64 | od -An -tx1 | tr -d ' \n' | cut -c1-4)
if [ "$owner" = a1a1 ] && [ "$shingle_ttl" -gt 7770000 ]; then pass "shingle keys point at their digest, with the TTL"; else fail "exported shingle key" "owner=$owner ttl=$shingle_ttl"; fi
if [ "$(R -n 1 get fuzzy_count)" = 3 ] && [ "$(R -n 1 get fuzzylocal)" = 1 ]; then pass "rspamd's count and version keys"; else fail "count/version keys" "$(R -n 1 get fuzzy_count) $(R -n 1 get fuzzylocal)"; fi

fresh 2
expect_run "export --layout 3.4 keeps one flag per hash and says so" 0 '2 further flags were left out' \
  "$ctl" export-rspamd-redis --redis "127.0.0.1:$port" --db 2 --layout 3.4 --db-dir cur
got=$(python3 "$tools" hgetall "$port" 2 "$d1_key")
if [ "$got" = "C=1700000000 F=2 V=30" ]; then pass "the 3.4 hash is F/V/C of the largest flag"; else fail "3.4 fields" "got: $got"; fi
expect_run "export refuses a filled prefix" 1 "already holds keys .*give --merge" \
  "$ctl" export-rspamd-redis --redis "127.0.0.1:$port" --db 2 --db-dir cur
expect_run "export --merge writes into it, replacing each digest" 0 '^exported 3 digests' \
  "$ctl" export-rspamd-redis --redis "127.0.0.1:$port" --db 2 --merge --db-dir cur
got=$(python3 "$tools" hgetall "$port" 2 "$d1_key")
if [ "$got" = "$want_fields" ]; then pass "--merge replaced the 3.4 hash whole"; else fail "merged fields" "got: $got"; fi

# ---------------------------------------------------------------- streaming through several runs
fresh 3
python3 - <<'EOF'
import json, random
rnd = random.Random(5)
cmds = []
for n in range(3000):
    d = "%0128x" % rnd.getrandbits(512)
    key = "hex:66757a7a79" + d
    cmds.append(["HSET", key, "F", str(1 + n % 3), "V", str(n), "C", "1700000000"])
    cmds.append(["EXPIRE", key, "600000"])
    if n % 3:
        for i in range(32):
            cmds.append(["SET", "fuzzy_%d_%d" % (i, rnd.getrandbits(64)), "hex:" + d])
json.dump([["SELECT", "3"]] + cmds, open("many.json", "w"))
EOF
python3 "$tools" write "$port" many.json
expect_run "3000 digests through many sorter runs" 0 '^3000 digests \(2000 with shingles, 1000 without, 0 with' \
  env SHINGLED_SPILL_RUN=97 "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db 3 --db-dir many
expect_run "all of them stored" 0 'hashes +3000' "$ctl" info --db many

# ---------------------------------------------------------------- bad inputs
fresh 4
"$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db 3 --db-dir kept >/dev/null 2>&1
"$ctl" dump --db kept >kept.before
bad() {  # NAME PATTERN SPEC-JSON
  local name=$1 pattern=$2
  fresh 4
  echo "[[\"SELECT\", \"4\"], $3]" >bad.json
  python3 "$tools" write "$port" bad.json
  expect_run "$name: refused" 1 "$pattern" "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db 4 --db-dir bad
  check "$name: no database left behind" test ! -e bad
  expect_run "$name: an existing database refuses it too" 1 "$pattern" \
    "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db 4 --db-dir kept
  "$ctl" dump --db kept >kept.after
  if cmp -s kept.before kept.after; then pass "$name: the existing database is unchanged"; else fail "$name: kept database changed" "$(diff kept.before kept.after | head -3)"; fi
}
K="\"hex:66757a7a79$(printf 'ab%.0s' $(seq 64))\""
bad "a digest key holding a string" "fuzzy<abab.*>: not a hash \\(Redis: WRONGTYPE" "[\"SET\", $K, \"x\"]"
bad "a shingle key holding a hash" "fuzzy_3_77: not a string \\(Redis: TYPE hash\\)" "[\"HSET\", \"fuzzy_3_77\", \"F\", \"1\"], [\"HSET\", $K, \"F\", \"1\", \"V\", \"1\"]"
bad "a hash without V" "fuzzy<abab.*>: no field V" "[\"HSET\", $K, \"F\", \"1\"]"
bad "a truncated S" "field S has fewer than 32 shingle entries" "[\"HSET\", $K, \"F\", \"1\", \"V\", \"1\", \"S\", \"0_1,1_2\"]"
bad "a flag slot without its value" "field F3 without V3" "[\"HSET\", $K, \"F\", \"1\", \"V\", \"1\", \"F3\", \"2\"]"
bad "a shingle key of 10 bytes" "fuzzy_0_5: holds 10 bytes" "[\"SET\", \"fuzzy_0_5\", \"0123456789\"], [\"HSET\", $K, \"F\", \"1\", \"V\", \"1\"]"

for mode in drop garbage; do
  python3 "$tools" fake "$fake_port" "$mode" >fake.log 2>&1 &
  fake_pid=$!
  for _ in $(seq 50); do grep -q listening fake.log 2>/dev/null && break; sleep 0.1; done
  pattern=$([ "$mode" = drop ] && echo 'connection lost' || echo 'SCAN answered the integer 42')
  expect_run "a server that ${mode}s mid-scan: refused" 1 "$pattern" \
    "$ctl" import-rspamd-redis --redis "127.0.0.1:$fake_port" --db-dir dropped --timeout 5
  check "a server that ${mode}s mid-scan: no database left behind" test ! -e dropped
  wait "$fake_pid" 2>/dev/null; fake_pid=""
done

expect_run "an unreachable Redis" 1 "cannot connect" \
  "$ctl" import-rspamd-redis --redis "127.0.0.1:$fake_port" --db-dir none --timeout 2
expect_run "--redis is required" 2 "needs --redis" "$ctl" import-rspamd-redis --db-dir none
expect_run "a bad --layout" 2 "--layout is 3.4 or current" \
  "$ctl" export-rspamd-redis --redis "127.0.0.1:$port" --layout 4.0
expect_run "--merge is export's" 2 "unknown option --merge for import-rspamd-redis" \
  "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --merge

# The writer lock, as a daemon holds it.
python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(60)' kept/shingled.lock locked.flag &
locker=$!
for _ in $(seq 50); do [ -e locked.flag ] && break; sleep 0.1; done
expect_run "a database in use by another process is refused" 1 'kept: in use by another process' \
  "$ctl" import-rspamd-redis --redis "127.0.0.1:$port" --db 3 --db-dir kept
finish
