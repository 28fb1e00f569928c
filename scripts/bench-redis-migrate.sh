#!/usr/bin/env bash
# The Redis migration's speed and memory (issue 19): for each store size, a
# shingled database of N hashes with 32 shingles each (every 4th with two
# flags) is exported into an empty redis-server (rspamd's current layout:
# N digest hashes + 32 N shingle keys), then imported back into an empty
# database. Prints records/s and the peak RSS of each shinglectl run, the
# CPU time redis-server spent answering the import, and the largest size of
# the importer's temporary files. redis-server runs on CPU 0, shinglectl on
# CPU 1.
#
#   scripts/bench-redis-migrate.sh [N ...]     (default: 250000 1000000)
#   env: CTL=build/tools/shinglectl
set -euo pipefail
CTL=$(realpath "${CTL:-build/tools/shinglectl}")
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(250000 1000000)
TMP=$(mktemp -d /tmp/bench-redis-migrate.XXXXXX)
REDIS_PID=""
cleanup() {
  if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
port=$(python3 -S "$(dirname "$0")/../tests/integration/free_ports.py" 1)
taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis.log" >/dev/null 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

peak_rss_mib() { awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$1"; }
field() { grep -o "$2" "$1" | head -1; }

echo "| hashes | keys in Redis | export records/s | export peak RSS | import s | redis-server CPU s during import | import records/s | import peak RSS | temp files |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in "${SIZES[@]}"; do
  rm -rf "$TMP/a" "$TMP/b"
  redis-cli -p "$port" flushall >/dev/null
  python3 - "$n" >"$TMP/input.jsonl" <<'EOF'
import random, sys
rnd = random.Random(19)
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    flags = '{"flag":1,"value":%d}' % (i % 1000 + 10)
    if i % 4 == 0:
        flags += ',{"flag":2,"value":3}'
    sh = ",".join('"%016x"' % rnd.getrandbits(64) for _ in range(32))
    w('{"digest":"%0128x","flags":[%s],"first_write":1790000000,"last_write":1795000000,"shingles":[%s]}\n'
      % (rnd.getrandbits(512), flags, sh))
EOF
  taskset -c 1 "$CTL" import --db "$TMP/a" "$TMP/input.jsonl" >/dev/null
  rm -f "$TMP/input.jsonl"
  taskset -c 1 /usr/bin/time -v "$CTL" export-rspamd-redis --redis "127.0.0.1:$port" --db-dir "$TMP/a" \
    >"$TMP/export.out" 2>"$TMP/export.time"
  keys=$(redis-cli -p "$port" dbsize)
  redis_cpu_before=$(awk '{print $14 + $15}' /proc/$REDIS_PID/stat)
  # the temporary files are unlinked: their size is sampled from /proc while running
  taskset -c 1 /usr/bin/time -v "$CTL" import-rspamd-redis --redis "127.0.0.1:$port" --db-dir "$TMP/b" \
    >"$TMP/import.out" 2>"$TMP/import.time" &
  ipid=$!
  spill=0
  while kill -0 "$ipid" 2>/dev/null; do
    s=0
    for fd in /proc/$(pgrep -P "$ipid" | head -1)/fd/*; do
      case "$(readlink "$fd" 2>/dev/null)" in "$TMP"/*deleted*) s=$((s + $(stat -L -c %s "$fd" 2>/dev/null || echo 0))) ;; esac
    done
    if [ "$s" -gt "$spill" ]; then spill=$s; fi
    sleep 1
  done
  wait "$ipid"
  ex_rate=$(field "$TMP/export.out" '([0-9]* records/s)' | tr -d '(' | cut -d' ' -f1)
  im_s=$(field "$TMP/import.out" 'in [0-9.]* s' | cut -d' ' -f2)
  im_rate=$(field "$TMP/import.out" '([0-9]* records/s' | tr -d '(' | cut -d' ' -f1)
  redis_cpu_s=$(echo "($(awk '{print $14 + $15}' /proc/$REDIS_PID/stat) - $redis_cpu_before) / $(getconf CLK_TCK)" | bc -l | xargs printf '%.1f')
  grep -q "^$n digests ($n with shingles" "$TMP/import.out" || { echo "import did not bring back all $n with shingles:" >&2; cat "$TMP/import.out" >&2; exit 1; }
  echo "| $n | $keys | $ex_rate | $(peak_rss_mib "$TMP/export.time") MiB | $im_s | $redis_cpu_s | $im_rate | $(peak_rss_mib "$TMP/import.time") MiB | $((spill / 1048576)) MiB |"
done
