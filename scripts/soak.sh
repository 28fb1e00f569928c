#!/usr/bin/env bash
# Soak: all three services under steady load for a warm-up and then
# MINUTES (default 30), the daemon's RSS and each service's latency sampled
# every 10 s.
#
# One worker pinned to CPU 0 (the daemon's other threads, persistence
# above all, may use either CPU, as on a server they use the cores the
# workers leave); shingle-load on CPU 1 (three open-loop generators
# sharing it, so they sleep between sends instead of spinning: --busy-poll 0,
# whose wake-ups show in the latency as a floor of a few hundred us). First each service's capacity
# alone is measured (closed loop, 5 s); then all three run together, open
# loop, each at a third of half its capacity, so the server core is about
# half busy with a mix of everything: fuzzy CHECKs (default mix over STORED
# hashes), counter increment-and-reads over 100k counters, rate-limit bucket
# messages in the rspamd plugin's flow (check, then update) to 100k
# recipients, with scripts/bench-ratelimit.sh's rates (buckets drain and
# go). Every reply is verified as shingle-load does. After the warm-up
# nothing should grow. The warm-up lasts until two minutes past the third
# 10-minute boundary after the start (22 to 32 minutes): the counters and
# buckets are created and the first syncs done in the first minutes, but a
# counter touched in every period outgrows its inline record at its fifth
# live period and takes its dense ring (docs/counters.md) then, so the
# counters' memory reaches its steady size only there.
#
#   scripts/soak.sh [MINUTES]
#     env: STORED=100000 BUILD=build WARMUP_WINDOWS=(10-s windows; default as above)
#          SYNC=60 (the daemon's `sync` seconds)
#
# Prints one line per 10-s window (RSS, and per service: requests answered,
# lost, wrong, p99), then the verdicts: RSS after the warm-up within 5 % of
# its value at the end of the warm-up, nothing lost or wrong in any window,
# and after the warm-up each service's worst window p99 within 3x its
# median window p99. Exit 1 if any verdict fails. Stops only the processes
# it started.
set -uo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-30}
BUILD=${BUILD:-build}
STORED=${STORED:-100000}
WARMUP_WINDOWS=${WARMUP_WINDOWS:-}
SHINGLED=$BUILD/src/daemon/shingled
LOAD=$BUILD/tools/shingle-load
for b in "$SHINGLED" "$LOAD"; do [ -x "$b" ] || { echo "soak: $b is not built" >&2; exit 1; }; done

TMP=$(mktemp -d /tmp/shingled-soak.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  if [ -s "$TMP/daemon.log" ]; then
    echo "--- the daemon's log (warnings and errors):" >&2
    tail -n 30 "$TMP/daemon.log" >&2
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
cat >"$TMP/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
ratelimit_bind_socket = "127.0.0.1:$((port + 1))";
counters_bind_socket = "127.0.0.1:$((port + 2))";
workers = 1;
max_hashes = $((STORED * 2));
counters_max = 1m;
ratelimit_service_max_buckets = 400k;
ratelimit {
  rates {
    to = "100 / 1min";
    to_ip = "30 / 1min";
    to_ip_from = "20 / 1min";
  }
}
pin_workers = true;
hashfile = "$TMP/db";
sync = ${SYNC:-60};
control_socket = "$TMP/ctl.sock";
EOF
taskset -c 0,1 "$SHINGLED" --config "$TMP/shingled.conf" --log-level warning >"$TMP/daemon.log" 2>&1 &
PID=$!
for _ in $(seq 200); do [ -S "$TMP/ctl.sock" ] && break; sleep 0.05; done
fuzzy="--server 127.0.0.1:$port"
rl="ratelimit messages --server 127.0.0.1:$((port + 1)) --keys 100000"
ctr="counters increment-read --server 127.0.0.1:$((port + 2)) --keys 100000 --prefix soak --no-final-check"
taskset -c 1 "$LOAD" write "$STORED" $fuzzy -q >/dev/null || { echo "soak: the fill failed" >&2; exit 1; }

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
capacity() {  # capacity ARGS...: answered per second alone, closed loop, 5 s
  local out
  out=$(taskset -c 1 "$LOAD" "$@" --duration 5 --json -q 2>/dev/null | tail -1)
  field "$out" "int(d['answered'] / max(d['seconds'], 0.001))"
}
# shellcheck disable=SC2086
cap_f=$(capacity check --stored "$STORED" $fuzzy)
# shellcheck disable=SC2086
cap_c=$(capacity $ctr)
# shellcheck disable=SC2086
cap_r=$(capacity $rl)
rate_f=$((cap_f / 6)); rate_c=$((cap_c / 6)); rate_r=$((cap_r / 6))
echo "capacity alone (req/s): fuzzy $cap_f, counters $cap_c, ratelimit $cap_r"
if [ -z "$WARMUP_WINDOWS" ]; then
  now=$(date +%s)
  WARMUP_WINDOWS=$(( (((now / 600) + 3) * 600 - now + 120 + 9) / 10 ))
fi
echo "soak rates (a third of half each): fuzzy $rate_f, counters $rate_c, ratelimit $rate_r;" \
  "warm-up $((WARMUP_WINDOWS * 10)) s, then $MINUTES min"

windows=$((WARMUP_WINDOWS + MINUTES * 6))
printf '%6s %9s | %-26s | %-26s | %-26s\n' t_s rss_mib "fuzzy ans/lost/wrong p99us" "counters" "ratelimit"
: >"$TMP/windows"
for w in $(seq 1 "$windows"); do
  # shellcheck disable=SC2086
  taskset -c 1 "$LOAD" check --stored "$STORED" $fuzzy --rate "$rate_f" --duration 10 --busy-poll 0 --json -q >"$TMP/f.json" 2>/dev/null &
  a=$!
  # shellcheck disable=SC2086
  taskset -c 1 "$LOAD" $ctr --rate "$rate_c" --duration 10 --busy-poll 0 --json -q >"$TMP/c.json" 2>/dev/null &
  b=$!
  # shellcheck disable=SC2086
  taskset -c 1 "$LOAD" $rl --rate "$rate_r" --duration 10 --busy-poll 0 --json -q >"$TMP/r.json" 2>/dev/null &
  c=$!
  wait $a $b $c
  rss_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
  line=$(python3 - "$TMP" "$w" "$rss_kib" <<'PY'
import json, sys
tmp, w, rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
row = {"t": w * 10, "rss_kib": rss}
for k in ("f", "c", "r"):
    try:
        d = json.loads(open(f"{tmp}/{k}.json").read().strip().splitlines()[-1])
        row[k] = {"answered": d["answered"], "lost": d["lost"], "wrong": d["wrong"], "p99": d["latency_us"]["p99"]}
    except Exception:
        row[k] = {"answered": 0, "lost": -1, "wrong": -1, "p99": 0}
print(json.dumps(row))
PY
)
  echo "$line" >>"$TMP/windows"
  python3 -c "
import json,sys; r=json.loads(sys.argv[1])
cell=lambda s: f\"{s['answered']}/{s['lost']}/{s['wrong']} {s['p99']:.0f}\"
print(f\"{r['t']:6d} {r['rss_kib']/1024:9.1f} | {cell(r['f']):<26} | {cell(r['c']):<26} | {cell(r['r']):<26}\")" "$line"
done

# Where replies went missing, as the daemon counts it (its own drops; the
# rest were lost in the kernel, e.g. at a full client socket).
"$BUILD/tools/shinglectl" --socket "$TMP/ctl.sock" stats 2>/dev/null |
  awk '$1 ~ /^(dropped|tx_errors|rx_packets|tx_packets|syncs|last_sync_ms|last_sync_changes|feed_chunks_allocated|feed_chunks_held_back)$/ {printf "%s %s  ", $1, $2} END {print ""}'

python3 - "$TMP/windows" "$WARMUP_WINDOWS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
warm = int(sys.argv[2])
ok = True
if len(rows) <= warm:
    print("verdict: too short to judge after the warm-up"); sys.exit(1)
base = rows[warm - 1]["rss_kib"]
peak = max(r["rss_kib"] for r in rows[warm:])
growth = (peak - base) / base
print(f"RSS after warm-up: {base/1024:.1f} MiB, peak after it {peak/1024:.1f} MiB ({growth*100:+.1f} %)"
      f" -> {'flat' if growth <= 0.05 else 'GROWING'}")
ok &= growth <= 0.05
for k, name in (("f", "fuzzy"), ("c", "counters"), ("r", "ratelimit")):
    lost = sum(r[k]["lost"] for r in rows)
    wrong = sum(r[k]["wrong"] for r in rows)
    # Latency is judged after the warm-up, as RSS is: the first syncs
    # (the fill's hashes, every counter new) are part of warming up.
    p99s = [r[k]["p99"] for r in rows[warm:]]
    med, worst = statistics.median(p99s), max(p99s)
    warm_worst = max(r[k]["p99"] for r in rows[:warm])
    stable = worst <= 3 * med
    print(f"{name}: {sum(r[k]['answered'] for r in rows)} answered, {lost} lost, {wrong} wrong; "
          f"p99 after the warm-up: median {med:.0f} us, worst window {worst:.0f} us "
          f"-> {'stable' if stable else 'UNSTABLE'} (worst during the warm-up {warm_worst:.0f} us)")
    ok &= lost == 0 and wrong == 0 and stable
print("soak: " + ("passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
