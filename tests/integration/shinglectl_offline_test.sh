#!/usr/bin/env bash
# shinglectl's offline commands as an operator meets them: import a generated
# dump, dump it back byte for byte, re-import a dump (through a pipe and in
# small batches), info figures, a bad line refused as FILE:LINE with nothing
# written, import-rspamd of a fuzzy.db made with rspamd's schema by the sqlite3
# CLI, and the writer lock: imports refused while another process holds it,
# dump and info still working; then the same beside a real daemon, and
# `shinglectl sync` through its control socket.
# Usage: shinglectl_offline_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
ctl=$(realpath "$build/tools/shinglectl")
shingled=$(realpath "$build/src/daemon/shingled")
# expect_run NAME RC PATTERN COMMAND...: the command exits RC and its
# stdout+stderr matches the extended regex PATTERN.
expect_run() {
  local name=$1 want_rc=$2 pattern=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -Eq -- "$pattern" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "rc=$rc (want $want_rc), output: $out"
  fi
}
same_file() {  # same_file NAME EXPECTED ACTUAL
  if cmp -s "$2" "$3"; then
    pass "$1"
  else
    fail "$1" "$(diff "$2" "$3" | head -5)"
  fi
}

tmp=$(mktemp -d)
locker=""
daemon=""
cleanup() {
  [ -n "$locker" ] && kill "$locker" 2>/dev/null && wait "$locker" 2>/dev/null
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"

# 1000 records in random order: every 7th with 2-4 flags (flags in record
# order, not sorted), every 5th without shingles, values and times spanning
# their full ranges. canonical.jsonl is what a dump must print: the same
# lines sorted by digest. expected_info.json holds the figures info must show.
python3 - <<'EOF'
import json, random
rnd = random.Random(20240601)
records = []
seen = set()
while len(records) < 1000:
    digest = bytes(rnd.getrandbits(8) for _ in range(64))
    if digest in seen:
        continue
    seen.add(digest)
    i = len(records)
    nflags = 1 + (i % 3 + 1 if i % 7 == 0 else 0)
    flags = rnd.sample([1, 2, 3, 11, 4294967295], nflags)
    values = [rnd.choice([rnd.randint(1, 100), -2147483648, 2147483647, 0]) for _ in flags]
    first = rnd.randint(0, 4294967295)
    last = rnd.randint(first, 4294967295)
    shingles = None if i % 5 == 0 else [rnd.getrandbits(64) for _ in range(32)]
    records.append((digest, list(zip(flags, values)), first, last, shingles))

def line(r):
    digest, flags, first, last, shingles = r
    s = '{"digest":"%s","flags":[%s],"first_write":%d,"last_write":%d' % (
        digest.hex(), ','.join('{"flag":%d,"value":%d}' % fv for fv in flags), first, last)
    if shingles is not None:
        s += ',"shingles":[%s]' % ','.join('"%016x"' % v for v in shingles)
    return s + '}'

with open('input.jsonl', 'w') as f:
    for r in records:
        f.write(line(r) + '\n')
with open('canonical.jsonl', 'w') as f:
    for r in sorted(records, key=lambda r: r[0]):
        f.write(line(r) + '\n')
per_flag = {}
for r in records:
    for flag, _ in r[1]:
        per_flag[str(flag)] = per_flag.get(str(flag), 0) + 1
json.dump({'hashes': len(records), 'with_shingles': sum(r[4] is not None for r in records),
           'flags': per_flag}, open('expected_info.json', 'w'))
# The same file with line 500 damaged (a 126-digit digest), and its line 1
# changed to a different but valid record: neither may be written.
lines = open('input.jsonl').read().splitlines()
bad = list(lines)
r0 = json.loads(bad[0])
r0['first_write'] = (r0['first_write'] + 1) % 2**32
bad[0] = json.dumps(r0)
r499 = json.loads(bad[499])
r499['digest'] = r499['digest'][2:]
bad[499] = json.dumps(r499)
open('bad.jsonl', 'w').write('\n'.join(bad) + '\n')
EOF

expect_run "help lists the offline commands" 0 'import-rspamd FUZZY_DB' "$ctl" --help
expect_run "import into a missing database creates it" 0 \
  '^imported 1000 records from input.jsonl into db1 \(1 transaction\); it holds 1000 hashes$' \
  "$ctl" import --db db1 input.jsonl
check "the database is a directory with data.mdb" test -f db1/data.mdb
"$ctl" dump --db db1 >dump1.jsonl 2>dump1.err
check "dump exits 0" test $? -eq 0
same_file "dump is byte-identical to the canonical dump" canonical.jsonl dump1.jsonl
expect_run "dump --output names the file" 0 '^dumped 1000 records from db1 to out.jsonl$' \
  "$ctl" dump --db db1 --output out.jsonl
same_file "dump --output writes the same bytes" canonical.jsonl out.jsonl
check "dump --output leaves no temporary file" test "$(ls out.jsonl.* 2>/dev/null | wc -l)" -eq 0

# Round trip through a pipe (standard input is spooled) into a second database.
expect_run "import from a pipe" 0 '^imported 1000 records from <stdin> into db2' \
  bash -c "cat dump1.jsonl | '$ctl' import --db db2 -"
"$ctl" dump --db db2 >dump2.jsonl
same_file "dump -> import -> dump is identical" canonical.jsonl dump2.jsonl
expect_run "import in batches of 300 takes 4 transactions" 0 '\(4 transactions\); it holds 1000 hashes' \
  "$ctl" import --db db3 --batch 300 input.jsonl
"$ctl" dump --db db3 >dump3.jsonl
same_file "a batched import dumps identically" canonical.jsonl dump3.jsonl
expect_run "re-importing replaces, never duplicates" 0 'it holds 1000 hashes$' \
  "$ctl" import --db db3 canonical.jsonl

# info: the figures the generator computed.
"$ctl" info --db db1 --json >info.json
if python3 - <<'EOF'
import json, sys, time
got = json.load(open('info.json'))
want = json.load(open('expected_info.json'))
problems = []
for k in ('hashes', 'with_shingles', 'flags'):
    if got[k] != want[k]:
        problems.append('%s: got %r want %r' % (k, got[k], want[k]))
if got['schema_version'] != 1: problems.append('schema_version %r' % got['schema_version'])
if abs(got['last_sync'] - time.time()) > 600: problems.append('last_sync %r' % got['last_sync'])
if not got['last_sync_utc'].endswith('Z'): problems.append('last_sync_utc %r' % got['last_sync_utc'])
if got['data_bytes'] < 1000 * 64: problems.append('data_bytes %r' % got['data_bytes'])
if got['undecodable'] != 0: problems.append('undecodable %r' % got['undecodable'])
if problems: print('; '.join(problems))
sys.exit(1 if problems else 0)
EOF
then pass "info --json figures are right"; else fail "info --json figures are right" "$(cat info.json)"; fi
flag1=$(python3 -c 'import json; print(json.load(open("expected_info.json"))["flags"]["1"])')
expect_run "info table shows hashes, per-flag counts, size and UTC sync time" 0 \
  "hashes +1000.*flag 1 +$flag1 .*data.mdb +[0-9]+ bytes in use.*last sync +[0-9]+ \([0-9-]+T[0-9:]+Z\)" \
  bash -c "'$ctl' info --db db1 | tr '\n' ' '"
printf 'hashfile = "%s/db1";\n' "$tmp" >shingled.conf
expect_run "info --config takes the hashfile" 0 'hashes +1000' "$ctl" info --config shingled.conf

# A bad line: FILE:LINE: reason, and nothing of the file written.
expect_run "a bad line is refused as FILE:LINE with the reason" 1 \
  '^shinglectl: bad.jsonl:500: "digest" has 126 characters, not 128 hex digits' \
  "$ctl" import --db db4 bad.jsonl
check "a refused import into a new database leaves no database" test ! -e db4
expect_run "a refused import into an existing database says nothing was imported" 1 \
  'bad.jsonl:500: .* nothing imported' \
  bash -c "'$ctl' import --db db2 bad.jsonl 2>&1 | tr '\n' ' '; exit \${PIPESTATUS[0]}"
"$ctl" dump --db db2 >dump2b.jsonl
same_file "the existing database is unchanged (line 1 not written either)" canonical.jsonl dump2b.jsonl
echo '{"digest":"00"}' >tiny.jsonl
expect_run "a bad line from a pipe names <stdin>" 1 '<stdin>:1: missing key "flags"' \
  bash -c "cat tiny.jsonl | '$ctl' import --db db2"

# import-rspamd: a fuzzy.db with rspamd's own schema, made by the sqlite3 CLI
# the way rspamd fills it (64-byte digests as text, shingles as int64).
python3 - <<'EOF' >rspamd.sql
schema = """CREATE TABLE IF NOT EXISTS digests(id INTEGER PRIMARY KEY, flag INTEGER NOT NULL,
 digest TEXT NOT NULL, value INTEGER, time INTEGER);
CREATE TABLE IF NOT EXISTS shingles(value INTEGER NOT NULL, number INTEGER NOT NULL,
 digest_id INTEGER REFERENCES digests(id) ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS sources(name TEXT UNIQUE, version INTEGER, last INTEGER);
CREATE UNIQUE INDEX IF NOT EXISTS d ON digests(digest);
CREATE INDEX IF NOT EXISTS t ON digests(time);
CREATE INDEX IF NOT EXISTS dgst_id ON shingles(digest_id);
CREATE UNIQUE INDEX IF NOT EXISTS s ON shingles(value, number);"""
print("BEGIN;" + schema)
a = bytes(range(64)).hex()           # holds a NUL byte, as real digests do
b = bytes(range(100, 164)).hex()
print("INSERT INTO digests VALUES(1, 1, CAST(X'%s' AS TEXT), 10, 1700000000);" % a)
print("INSERT INTO digests VALUES(2, 2, CAST(X'%s' AS TEXT), -3, 1700000100);" % b)
print("INSERT INTO digests VALUES(3, 1, CAST(X'0102030405' AS TEXT), 1, 1);")  # bad digest
for n in range(32):
    v = -1 if n == 0 else n * 1000003   # -1: the u64 ffffffffffffffff
    print("INSERT INTO shingles VALUES(%d, %d, 1);" % (v, n))
print("COMMIT;")
sh = ','.join('"%016x"' % ((-1 if n == 0 else n * 1000003) & 0xFFFFFFFFFFFFFFFF) for n in range(32))
with open('rspamd_expected.jsonl', 'w') as f:
    f.write('{"digest":"%s","flags":[{"flag":1,"value":10}],"first_write":1700000000,'
            '"last_write":1700000000,"shingles":[%s]}\n' % (a, sh))
    f.write('{"digest":"%s","flags":[{"flag":2,"value":-3}],"first_write":1700000100,'
            '"last_write":1700000100}\n' % b)
EOF
sqlite3 fuzzy.db <rspamd.sql
check "sqlite3 made the rspamd fuzzy.db" test -s fuzzy.db
expect_run "import-rspamd reports records, shingles and skips" 0 \
  'imported 2 records from fuzzy.db into db5.*fuzzy.db: 3 digest rows: 2 records \(1 with shingles, 1 without, 0 with an incomplete shingle set\); skipped 1 rows \(1 bad digest, 0 bad flag\)' \
  bash -c "'$ctl' import-rspamd fuzzy.db --db db5 | tr '\n' ' '"
"$ctl" dump --db db5 >dump5.jsonl
same_file "the dump shows the rspamd records" rspamd_expected.jsonl dump5.jsonl
expect_run "import-rspamd refuses a file that is not rspamd's" 1 \
  'input.jsonl: .*not an SQLite database' "$ctl" import-rspamd input.jsonl --db db6
check "a refused import-rspamd leaves no database" test ! -e db6
sqlite3 other.db 'CREATE TABLE x(y);'
expect_run "import-rspamd names a missing table" 1 "other.db: not an rspamd fuzzy database: no table 'digests'" \
  "$ctl" import-rspamd other.db --db db6

# The writer lock: another process holds <db>/shingled.lock as a daemon would.
python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(120)' db1/shingled.lock locked.flag &
locker=$!
for _ in $(seq 50); do [ -e locked.flag ] && break; sleep 0.1; done
check "the lock holder is up" test -e locked.flag
expect_run "import is refused while another process holds the database" 1 \
  'db1: in use by another process' "$ctl" import --db db1 input.jsonl
expect_run "import-rspamd is refused too" 1 'db1: in use by another process' \
  "$ctl" import-rspamd fuzzy.db --db db1
"$ctl" dump --db db1 >dump_locked.jsonl
same_file "dump works beside the lock holder" canonical.jsonl dump_locked.jsonl
expect_run "info works beside the lock holder" 0 'hashes +1000' "$ctl" info --db db1
kill "$locker"
wait "$locker" 2>/dev/null
locker=""
expect_run "import works again once the holder is gone" 0 'imported 1000 records' \
  "$ctl" import --db db1 input.jsonl

# A real daemon on its own database: dump and info beside it, imports refused
# naming its pid, sync through the control socket.
python3 - <<'PY'
import random, time
rnd = random.Random(7)
now = int(time.time()) - 100   # recent: the daemon's expiry must leave them alone
lines = []
for i in range(50):
    d = bytes(rnd.getrandbits(8) for _ in range(64)).hex()
    sh = '' if i % 2 else ',"shingles":[%s]' % ','.join('"%016x"' % rnd.getrandbits(64) for _ in range(32))
    lines.append('{"digest":"%s","flags":[{"flag":%d,"value":%d}],"first_write":%d,"last_write":%d%s}'
                 % (d, 1 + i % 3, 1 + i, now, now, sh))
open('live.jsonl', 'w').write('\n'.join(sorted(lines)) + '\n')
PY
check "import the daemon's database" bash -c "'$ctl' import --db dbd live.jsonl >/dev/null"
port=$((20000 + RANDOM % 20000))
printf 'bind_socket = "127.0.0.1:%d";\ncounters_bind_socket = [];\nratelimit_bind_socket = [];\nhashfile = "%s/dbd";\ncontrol_socket = "%s/ctl.sock";\n' \
  "$port" "$tmp" "$tmp" >live.conf
"$shingled" --config live.conf >daemon.log 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S ctl.sock ] && break; sleep 0.1; done
if [ -S ctl.sock ]; then
  pass "daemon started on the imported database"
  expect_run "shinglectl sync waits for a committed sync" 0 '^synced' "$ctl" --socket ctl.sock sync
  "$ctl" dump --config live.conf >dump_live.jsonl
  same_file "dump beside a running daemon" live.jsonl dump_live.jsonl
  expect_run "info beside a running daemon" 0 'hashes +50' "$ctl" info --config live.conf
  expect_run "import is refused while the daemon runs, naming its pid" 1 \
    "dbd: in use by another process \\(pid $daemon\\)" "$ctl" import --config live.conf live.jsonl
  kill -TERM "$daemon"
  wait "$daemon"
  check "the daemon stops cleanly" test $? -eq 0
  expect_run "import works once the daemon has stopped" 0 'it holds 50 hashes' \
    "$ctl" import --config live.conf live.jsonl
else
  fail "daemon started on the imported database" "$(tail -5 daemon.log)"
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
fi
daemon=""

# Usage and operational errors: exit 2 and 1, naming the file.
expect_run "import-rspamd without a file is a usage error" 2 'needs the rspamd fuzzy database file' \
  "$ctl" import-rspamd --db db1
expect_run "an option that does not apply is a usage error" 2 '--batch applies to import' \
  "$ctl" dump --db db1 --batch 5
expect_run "--db and --config together is a usage error" 2 'not both' \
  "$ctl" info --db db1 --config shingled.conf
expect_run "an unknown command is a usage error" 2 "unknown command 'frobnicate'" "$ctl" frobnicate
expect_run "dump of a missing database names it" 1 'nope.lmdb: no such database' \
  "$ctl" dump --db nope.lmdb
check "dump of a missing database creates nothing" test ! -e nope.lmdb
expect_run "import of a missing file names it" 1 'missing.jsonl: No such file or directory' \
  "$ctl" import --db db1 missing.jsonl

finish
