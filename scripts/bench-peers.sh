#!/usr/bin/env bash
# Side-by-side peer benchmark (issue 8): the same verified CHECK workload
# against, in turn,
#   responder       bench/trivial_responder --oracle (the kernel's UDP floor)
#   shingled        one worker, LMDB hashfile in the temp dir
#   rspamd-sqlite   rspamd 3.4's fuzzy worker, sqlite backend (hash_file)
#   rspamd-redis    rspamd 3.4's fuzzy worker, Redis backend, its own redis-server
#   shingled-dpdk   shingled with io = dpdk on a net_memif port (no NIC needed;
#                   DPDK builds, as root), driven by bench/dpdk_memif_driver,
#                   which sends the same verified mix as Ethernet frames over
#                   memif with shingle-load's message model and verifier. The
#                   kernel is off the packet path on both sides, as with a NIC:
#                   the deployment's own I/O. Capacity only (the driver is
#                   closed loop); its latency and stall cells stay empty.
# each server pinned to CPU $SERVER_CPU (rspamd's worker and its redis-server
# together) and shingle-load pinned to CPU $LOAD_CPU. Per server:
#   1. write STORED hashes, wait until a CHECK sees them (rspamd applies
#      writes only at its next sync) and until they are committed (shingled:
#      `shinglectl sync`), so no server measures with a commit pending;
#   2. capacity: closed loop, INFLIGHT in flight, DURATION s, default mix
#      (50 % stored / 25 % near-duplicate sharing 24 of 32 / 25 % unknown);
#      server CPU sampled from /proc (all the server's processes): req/s and
#      requests per server-core-second;
#   3. latency at a fixed RATE (open loop): p50/p99/p99.9;
#   4. stall test: a probe at PROBE_RATE req/s (open loop) while STALL_WRITES
#      fresh hashes are written and made durable (shingled: `shinglectl sync`
#      returns when committed; rspamd: until a CHECK sees them, i.e. its sync
#      committed them): lost probes and worst latency.
# Output: a markdown table and one JSON line per server on stdout, a PNG bar
# chart of requests per server-core-second (gnuplot); with --record both are
# appended to bench/RESULTS.md and the chart goes to bench/peers.png.
#
# Usage: scripts/bench-peers.sh [OPTIONS]      (run scripts/bench-peers.sh --help)
# Every option also reads an environment variable of the same name in
# capitals (STORED=5000 DURATION=3 scripts/bench-peers.sh); flags win.
#   --stored N         hashes written before measuring (STORED, 100000)
#   --duration S       seconds per measurement (DURATION, 10)
#   --inflight K       closed-loop requests in flight (INFLIGHT, 32)
#   --dpdk-inflight K  the same for shingled-dpdk (DPDK_INFLIGHT, 128): with
#                      32 its worker polls idle between bursts, and capacity is
#                      what a server sustains when kept busy
#   --rate R           fixed-rate latency run, req/s (RATE, 5000)
#   --probe-rate R     stall-test probe, req/s (PROBE_RATE, 1000)
#   --probe-timeout S  a probe unanswered after S s is lost (PROBE_TIMEOUT, 30:
#                      longer than rspamd's commit stall, so a reply it sends
#                      after the stall counts as latency, not as loss)
#   --stall-writes N   fresh writes of the stall test (STALL_WRITES, 100000)
#   --sync S           rspamd's `sync` in seconds (RSPAMD_SYNC, 5)
#   --redis-timeout S  rspamd's Redis `timeout` (RSPAMD_REDIS_TIMEOUT, 60). With
#                      lua_redis's default of 1 s, rspamd 3.4 cannot commit 100k
#                      queued writes in one transaction: it retries 3 times,
#                      then logs "discard 100000 updates" and they are lost.
#   --visible-timeout S  give up waiting for writes to show (VISIBLE_TIMEOUT, 300)
#   --servers LIST     comma list of responder,shingled,rspamd-sqlite,rspamd-redis,
#                      shingled-dpdk (SERVERS, all five; shingled-dpdk is skipped
#                      with a log line in a build without DPDK or when not root)
#   --png PATH         chart path (PNG; default bench/peers.png with --record,
#                      else ${TMPDIR:-/tmp}/bench-peers.png)
#   --record           append the table and chart link to bench/RESULTS.md
#   --no-build         skip install-deps and the build
#   --keep             keep the temp dir (logs, configs, raw JSON)
# Also: SERVER_CPU (0), LOAD_CPU (1), SHINGLED_CONF_EXTRA (extra lines for
# shingled.conf, e.g. "busy_poll_us = 2000;"), START_TIMEOUT (30).
#
# On this shared machine run it under the build lock:
#   flock /tmp/shingled-build.lock scripts/bench-peers.sh
#
# To add a row (encrypted, rate limits, counters, ...): write start_KIND
# (sets SRV_PORT, SRV_CPU_PIDS, SRV_LOGS), durable_KIND (stall test: returns
# when the fresh writes are durable), optionally commit_KIND (commits the
# first writes before measuring, where visible does not mean committed) and
# add KIND to ALL_SERVERS / SERVERS.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------- parameters
ALL_SERVERS="responder,shingled,rspamd-sqlite,rspamd-redis,shingled-dpdk"
STORED=${STORED:-100000}
DURATION=${DURATION:-10}
INFLIGHT=${INFLIGHT:-32}
DPDK_INFLIGHT=${DPDK_INFLIGHT:-128}
RATE=${RATE:-5000}
PROBE_RATE=${PROBE_RATE:-1000}
PROBE_TIMEOUT=${PROBE_TIMEOUT:-30}
STALL_WRITES=${STALL_WRITES:-100000}
RSPAMD_SYNC=${RSPAMD_SYNC:-5}
RSPAMD_REDIS_TIMEOUT=${RSPAMD_REDIS_TIMEOUT:-60}
VISIBLE_TIMEOUT=${VISIBLE_TIMEOUT:-300}
SERVERS=${SERVERS:-$ALL_SERVERS}
PNG=${PNG:-}
RECORD=${RECORD:-0}
BUILD=${BUILD:-1}
KEEP=${KEEP:-0}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SHINGLED_CONF_EXTRA=${SHINGLED_CONF_EXTRA:-}
START_TIMEOUT=${START_TIMEOUT:-30}
ARGS="$*"

while [ $# -gt 0 ]; do
  case "$1" in
    --stored) STORED=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --inflight) INFLIGHT=$2; shift ;;
    --dpdk-inflight) DPDK_INFLIGHT=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --probe-rate) PROBE_RATE=$2; shift ;;
    --probe-timeout) PROBE_TIMEOUT=$2; shift ;;
    --stall-writes) STALL_WRITES=$2; shift ;;
    --sync) RSPAMD_SYNC=$2; shift ;;
    --redis-timeout) RSPAMD_REDIS_TIMEOUT=$2; shift ;;
    --visible-timeout) VISIBLE_TIMEOUT=$2; shift ;;
    --servers) SERVERS=$2; shift ;;
    --png) PNG=$2; shift ;;
    --record) RECORD=1 ;;
    --no-build) BUILD=0 ;;
    --keep) KEEP=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-peers: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[bench-peers %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

num() {  # 100k -> 100000, 1m -> 1000000
  case "$1" in
    *[kK]) echo $(( ${1%[kK]} * 1000 )) ;;
    *[mM]) echo $(( ${1%[mM]} * 1000000 )) ;;
    *) echo $(( $1 )) ;;
  esac
}
STORED=$(num "$STORED"); STALL_WRITES=$(num "$STALL_WRITES")
RATE=$(num "$RATE"); PROBE_RATE=$(num "$PROBE_RATE"); INFLIGHT=$(num "$INFLIGHT"); DPDK_INFLIGHT=$(num "$DPDK_INFLIGHT")
for s in ${SERVERS//,/ }; do
  case ",$ALL_SERVERS," in *",$s,"*) ;; *) die "--servers: unknown server '$s' (known: $ALL_SERVERS)" ;; esac
done
[ -n "$PNG" ] || { [ "$RECORD" = 1 ] && PNG=bench/peers.png || PNG="${TMPDIR:-/tmp}/bench-peers.png"; }
FRESH_FIRST=$((STORED + 1000000))   # ids of the stall test's fresh writes: never among the stored

# ---------------------------------------------------------------- deps, build
if [ "$BUILD" = 1 ]; then
  scripts/install-deps.sh
  [ -f build/build.ninja ] || meson setup build -Dbuildtype=release >/dev/null
  ninja -C build src/daemon/shingled tools/shinglectl tools/shingle-load bench/trivial_responder \
    bench/cpu_gap_probe >/dev/null
  if grep -q dpdk_memif_driver build/build.ninja; then ninja -C build bench/dpdk_memif_driver >/dev/null; fi
fi
MEMIF_DRIVER=$REPO/build/bench/dpdk_memif_driver
GAP_PROBE=$REPO/build/bench/cpu_gap_probe
SHINGLED=$REPO/build/src/daemon/shingled
SHINGLECTL=$REPO/build/tools/shinglectl
SL=$REPO/build/tools/shingle-load
RESPONDER=$REPO/build/bench/trivial_responder
for f in "$SHINGLED" "$SHINGLECTL" "$SL" "$RESPONDER"; do [ -x "$f" ] || die "$f is not built"; done
for t in taskset python3 gnuplot rspamd redis-server redis-cli; do
  command -v "$t" >/dev/null || die "$t not found (scripts/install-deps.sh installs it)"
done
[ "$(nproc)" -ge 2 ] || log "warning: fewer than 2 CPUs: server and generator share a core"

# ---------------------------------------------------------------- processes, cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench-peers.XXXXXX")
STARTED=()   # every process this script started, by pid
CHILDREN=()  # their children (rspamd's workers), recorded after start-up
cleanup() {
  local pid alive
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${STARTED[@]}" "${CHILDREN[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${STARTED[@]}" "${CHILDREN[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${STARTED[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

forget() {  # pid...: no longer ours (stopped)
  local p keep=() c
  for p in "${STARTED[@]}"; do
    c=0; for q in "$@"; do [ "$p" = "$q" ] && c=1; done
    [ $c = 1 ] || keep+=("$p")
  done
  STARTED=("${keep[@]}")
}
stop_pids() {  # pid...: TERM, wait up to 10 s, then KILL; also their recorded children
  local p alive
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do
    alive=0
    for p in "$@" "${CHILDREN[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "$@" "${CHILDREN[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
  CHILDREN=()
  forget "$@"
}
children_of() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }

free_port() {  # a port free for both UDP and TCP on 127.0.0.1, not in $TAKEN
  # shellcheck disable=SC2086
  python3 tests/integration/free_ports.py 1 $TAKEN
}
TAKEN=""
new_port() { local p; p=$(free_port); TAKEN="$TAKEN $p"; echo "$p"; }

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {  # pid... -> utime+stime ticks summed over the processes (all their threads)
  local p s t=0 f
  for p in "$@"; do
    s=$(cat /proc/"$p"/stat 2>/dev/null) || die "server process $p has exited"
    read -ra f <<<"${s##*) }"
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}

jget() {  # file key[.key...] -> value (missing: null)
  python3 - "$@" <<'PY'
import json, sys
try:
    d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    for k in sys.argv[2].split("."):
        d = d[k]
    print(json.dumps(d) if isinstance(d, (dict, list)) else d)
except Exception:
    print("null")
PY
}

# shingle-load on the generator's CPU against the current server, JSON only.
# Never fails the script: a wrong answer (exit 1) is a result to report.
load() {  # out-json-file args...
  local out=$1; shift
  taskset -c "$LOAD_CPU" "$SL" --server "127.0.0.1:$SRV_PORT" -q --json "$@" >"$out" 2>>"$TMP/shingle-load.err" || true
  [ -s "$out" ] || die "shingle-load $* gave no result: $(tail -n 3 "$TMP/shingle-load.err")"
}

ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)   # rspamd refuses to run workers as root otherwise
printf 'com\norg\nnet\n' >"$TMP/tld.dat"           # tiny TLD list: the stock one takes ~16 s to compile

show_logs() { local f; for f in "${SRV_LOGS[@]}"; do [ -f "$f" ] && { echo "---- $f (tail)" >&2; tail -n 20 "$f" >&2; }; done; return 0; }

# wait until the server answers a CHECK (pid: the process that must stay alive)
wait_answers() {  # pid what
  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    kill -0 "$1" 2>/dev/null || { show_logs; die "$2 exited during start-up (logs above)"; }
    if taskset -c "$LOAD_CPU" "$SL" check --server "127.0.0.1:$SRV_PORT" -q --json --count 1 --stored 1 \
         --mix unknown:1 --timeout 0.5 --show-wrong 0 >"$TMP/ready.json" 2>/dev/null &&
       [ "$(jget "$TMP/ready.json" answered)" = 1 ]; then
      return 0
    fi
    sleep 0.3
  done
  show_logs; die "$2 did not answer a CHECK on 127.0.0.1:$SRV_PORT within ${START_TIMEOUT}s (logs above)"
}

# ---------------------------------------------------------------- server kinds
# start_KIND: start the server pinned to SERVER_CPU; set SRV_PORT, SRV_CPU_PIDS
# (processes whose CPU counts as the server's), SRV_STOP_PIDS, SRV_LOGS, SRV_DESC.
start_responder() {
  SRV_PORT=$(new_port)
  SRV_LOGS=("$TMP/responder/stdout.log"); mkdir -p "$TMP/responder"
  taskset -c "$SERVER_CPU" "$RESPONDER" --bind "127.0.0.1:$SRV_PORT" --oracle >"${SRV_LOGS[0]}" 2>&1 &
  STARTED+=("$!"); SRV_CPU_PIDS=("$!"); SRV_STOP_PIDS=("$!")
  SRV_DESC="bench/trivial_responder --oracle"
  wait_answers "$!" "trivial_responder"
}

# shingled_conf DIR BIND ALLOW: the config both shingled rows share (fuzzy
# only, one worker, room for the stored and the stall test's hashes, data
# and control socket in DIR), then SHINGLED_CONF_EXTRA.
shingled_conf() {
  local cap=$(( (STORED + STALL_WRITES) * 2 )); [ $cap -ge 1000000 ] || cap=1000000
  cat <<EOF
bind_socket = "$2";
counters_bind_socket = [];
ratelimit_bind_socket = [];
allow_update = ["$3"];
workers = 1;
max_hashes = $cap;
hashfile = "$1/db";
control_socket = "$1/ctl.sock";
$SHINGLED_CONF_EXTRA
EOF
}
start_shingled() {
  local d="$TMP/shingled"; mkdir -p "$d"
  SRV_PORT=$(new_port)
  SRV_LOGS=("$d/stdout.log")
  shingled_conf "$d" "127.0.0.1:$SRV_PORT" 127.0.0.1 >"$d/shingled.conf"
  taskset -c "$SERVER_CPU" "$SHINGLED" --config "$d/shingled.conf" >"$d/stdout.log" 2>&1 &
  STARTED+=("$!"); SRV_CPU_PIDS=("$!"); SRV_STOP_PIDS=("$!")
  SRV_CTL="$d/ctl.sock"
  SRV_DESC="shingled, workers = 1${SHINGLED_CONF_EXTRA:+, $SHINGLED_CONF_EXTRA}"
  wait_answers "$!" "shingled"
}
durable_shingled() {  # returns when every acknowledged write is committed
  "$SHINGLECTL" --socket "$SRV_CTL" sync --timeout 600 >"$TMP/shingled/sync.out" 2>&1 ||
    die "shinglectl sync failed: $(cat "$TMP/shingled/sync.out")"
}
commit_shingled() { durable_shingled; }

start_rspamd() {  # name backend-ucl-lines
  local name=$1 backend=$2 d="$TMP/$1" main w c deadline
  mkdir -p "$d"
  SRV_PORT=$(new_port)
  SRV_LOGS=("$d/stdout.log" "$d/rspamd.log")
  cat >"$d/rspamd.conf" <<EOF
# Self-contained rspamd 3.4 config: the fuzzy storage worker only.
options {
  pidfile = "$d/rspamd.pid";
  url_tld = "$TMP/tld.dat";
  hs_cache_dir = "$d";
  dynamic_conf = "$d/dynamic";
  filters = "";
}
logging { type = "file"; filename = "$d/rspamd.log"; level = "info"; }
worker "fuzzy" {
  bind_socket = "127.0.0.1:$SRV_PORT";
  count = 1;
$backend
  sync = ${RSPAMD_SYNC}s;
  expire = 90d;
  allow_update = ["127.0.0.1"];
}
EOF
  taskset -c "$SERVER_CPU" rspamd -f "${ROOT_OPTS[@]}" -c "$d/rspamd.conf" --var DBDIR="$d" \
    --var RUNDIR="$d" --var LOGDIR="$d" >"$d/stdout.log" 2>&1 &
  main=$!
  STARTED+=("$main")
  SRV_STOP_PIDS=("$main")
  wait_answers "$main" "rspamd ($name)"
  # the fuzzy worker is a child of the main process: its CPU is the server's
  w=""
  for c in $(children_of "$main"); do
    CHILDREN+=("$c")
    tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -qi fuzzy && w=$c
  done
  if [ -z "$w" ]; then
    w=$(children_of "$main" | head -n 1)
    [ -n "$w" ] || { show_logs; die "rspamd ($name): no fuzzy worker process under pid $main"; }
    log "rspamd ($name): no child titled 'fuzzy'; using child $w"
  fi
  taskset -a -p -c "$SERVER_CPU" "$w" >/dev/null   # in case the worker changed its affinity
  SRV_CPU_PIDS=("$w")
  SRV_DESC="rspamd $(rspamd --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1) fuzzy worker (pid $w), $name, sync = ${RSPAMD_SYNC}s"
}

start_rspamd-sqlite() {
  start_rspamd rspamd-sqlite "  backend = \"sqlite\";
  hash_file = \"$TMP/rspamd-sqlite/fuzzy.db\";"
}

start_rspamd-redis() {
  local d="$TMP/rspamd-redis-server" rport deadline rpid
  mkdir -p "$d"
  rport=$(new_port)
  taskset -c "$SERVER_CPU" redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$d" --logfile "$d/redis.log" --daemonize no --unixsocket "$d/redis.sock" >"$d/stdout.log" 2>&1 &
  rpid=$!
  STARTED+=("$rpid")
  deadline=$(( $(date +%s) + START_TIMEOUT ))
  until [ "$(redis-cli -p "$rport" ping 2>/dev/null)" = PONG ]; do
    kill -0 "$rpid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ] ||
      { tail -n 20 "$d/redis.log" "$d/stdout.log" >&2; die "redis-server did not start on port $rport"; }
    sleep 0.1
  done
  # rspamd 3.4: fuzzy_backend.c selects the backend by the worker's `backend`
  # option; fuzzy_backend_redis.c loads the servers from the same worker block
  # (lua_redis.try_load_redis_servers: `servers`, `read_servers`/`write_servers`,
  # and `timeout`, a number of seconds, default 1).
  start_rspamd rspamd-redis "  backend = \"redis\";
  servers = \"127.0.0.1:$rport\";
  timeout = $RSPAMD_REDIS_TIMEOUT;"
  SRV_CPU_PIDS+=("$rpid")
  SRV_STOP_PIDS+=("$rpid")
  SRV_LOGS+=("$d/redis.log")
  SRV_DESC="$SRV_DESC, Redis timeout = ${RSPAMD_REDIS_TIMEOUT}s, redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-) (pid $rpid, --save '', same CPU, CPU counted)"
}
durable_rspamd() { wait_visible "$FRESH_FIRST" "$STALL_WRITES" "the stall test's writes" "$STALL_LOST" >/dev/null; }
durable_rspamd-sqlite() { durable_rspamd; }
durable_rspamd-redis() { durable_rspamd; }

# ---------------------------------------------------------------- measurements
# wait_visible FIRST N WHAT [LOST]: poll with small stored-only CHECK runs of
# 200 of the N ids until every answer is an exact hit; prints the seconds it
# took. LOST writes were never acknowledged (a peer dropped them under load):
# those ids may never be stored, so then the poll needs as many hits as the
# acknowledged share leaves, less four standard deviations of sampling. rspamd
# commits its whole queue in one transaction, so before the commit the fresh
# ids all miss and after it they hit as far as they were stored.
wait_visible() {
  local first=$1 n=$2 what=$3 lost=${4:-0} t0 deadline need f="$TMP/visible.json"
  need=$(python3 -c "import math; p = $lost / $n; print(200 if p == 0 else max(1, math.floor(200 * (1 - p) - 4 * math.sqrt(200 * p * (1 - p)))))")
  [ "$need" = 200 ] || log "$SRV_NAME: $lost of $what were never acknowledged: waiting for $need of 200 sampled ids to hit"
  t0=$(date +%s.%N)
  deadline=$(( $(date +%s) + VISIBLE_TIMEOUT ))
  while :; do
    for p in "${SRV_CPU_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { show_logs; die "$SRV_NAME exited"; }; done
    load "$f" check --first "$first" --stored "$n" --mix stored:1 --count 200 --inflight 8 \
      --timeout 1 --show-wrong 0
    if [ "$(jget "$f" exact_hits)" -ge "$need" ]; then break; fi
    [ "$(date +%s)" -lt "$deadline" ] || { show_logs; die "$SRV_NAME: $what not visible after ${VISIBLE_TIMEOUT}s (last poll: $(jget "$f" exact_hits) of 200 exact hits, $need needed)"; }
    sleep 0.5
  done
  python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))"
}

bench_server() {  # kind
  local kind=$1 r="$TMP/result-$1" c0 c1 t0 t1 ppid vis="null" wr="null" stall_s="null" sj="null"
  SRV_NAME=$kind
  mkdir -p "$r"
  log "$kind: starting"
  "start_$kind"
  log "$kind: $SRV_DESC on 127.0.0.1:$SRV_PORT (CPU pids ${SRV_CPU_PIDS[*]})"
  if [ "$kind" != responder ]; then
    log "$kind: writing $STORED hashes"
    load "$r/write.json" write "$STORED"
    wr="$r/write.json"
    [ "$(jget "$wr" lost)" = 0 ] && [ "$(jget "$wr" wrong)" = 0 ] ||
      die "$kind: write of $STORED: lost $(jget "$wr" lost), wrong $(jget "$wr" wrong) (a lost write cannot be redone: each id must be written once)"
    log "$kind: waiting until the writes are visible"
    vis=$(wait_visible 0 "$STORED" "the $STORED writes")
    log "$kind: visible after $vis s"
    # Measure a server at rest: shingled's writes are visible at once but
    # committed at its next minute sync, which must not land inside the
    # runs below (rspamd's visible writes are already committed).
    if declare -F "commit_$kind" >/dev/null; then
      log "$kind: committing the writes"
      "commit_$kind"
    fi
  fi

  log "$kind: capacity, $INFLIGHT in flight, ${DURATION}s"
  c0=$(cpu_ticks "${SRV_CPU_PIDS[@]}")
  load "$r/capacity.json" check --stored "$STORED" --inflight "$INFLIGHT" --duration "$DURATION" \
    --server-pid "${SRV_CPU_PIDS[0]}"
  c1=$(cpu_ticks "${SRV_CPU_PIDS[@]}")
  echo "$(( c1 - c0 ))" >"$r/capacity.cpu_ticks"

  log "$kind: latency at $RATE req/s, ${DURATION}s"
  load "$r/rate.json" check --stored "$STORED" --rate "$RATE" --duration "$DURATION"

  if [ "$kind" != responder ]; then
    log "$kind: stall test: probe at $PROBE_RATE req/s while $STALL_WRITES fresh writes are made durable"
    # The probe sleeps between sends (short busy poll) at real-time priority,
    # so the writer can share its CPU without delaying it.
    PRIO=(); chrt -f 1 true 2>/dev/null && PRIO=(chrt -f 1)
    taskset -c "$LOAD_CPU" "${PRIO[@]}" "$SL" --server "127.0.0.1:$SRV_PORT" -q --json check \
      --stored "$STORED" --rate "$PROBE_RATE" --duration 3600 --busy-poll 200 --timeout "$PROBE_TIMEOUT" >"$r/stall.json" 2>>"$TMP/shingle-load.err" &
    ppid=$!
    STARTED+=("$ppid")
    sleep 1
    t0=$(date +%s.%N)
    load "$r/stall-write.json" write "$STALL_WRITES" --first "$FRESH_FIRST"
    STALL_LOST=$(jget "$r/stall-write.json" lost)
    [ "$STALL_LOST" = 0 ] ||
      log "$kind: warning: $STALL_LOST of the stall test's writes were lost"
    "durable_$kind"
    t1=$(date +%s.%N)
    stall_s=$(python3 -c "print('%.1f' % ($t1 - $t0))")
    sleep 1
    kill -INT "$ppid" 2>/dev/null || true   # it stops sending, then waits for replies (<= PROBE_TIMEOUT)
    wait "$ppid" || true
    forget "$ppid"
    sj="$r/stall.json"
    [ -s "$sj" ] || die "$kind: the stall probe gave no result"
    log "$kind: stall test: writes durable after $stall_s s; probe lost $(jget "$sj" lost), max $(jget "$sj" latency_us.max) us"
  fi
  stop_pids "${SRV_STOP_PIDS[@]}"

  python3 - "$kind" "$SRV_DESC" "$r" "$CLK_TCK" "$vis" "$stall_s" "${#SRV_CPU_PIDS[@]}" >>"$TMP/results.jsonl" <<'PY'
import json, os, sys
kind, desc, r, tck, vis, stall_s, npids = sys.argv[1:8]
def load(n):
    p = os.path.join(r, n)
    return json.loads(open(p).read().strip().splitlines()[-1]) if os.path.exists(p) else None
cap, rate, stall, wr = load("capacity.json"), load("rate.json"), load("stall.json"), load("write.json")
cpu = int(open(os.path.join(r, "capacity.cpu_ticks")).read()) / float(tck)
out = {
    "server": kind, "desc": desc,
    "req_per_s": cap["req_per_s"], "answered": cap["answered"], "seconds": cap["seconds"],
    "server_cpu_s": round(cpu, 3), "server_cpu_share": round(cpu / cap["seconds"], 3) if cap["seconds"] else None,
    "req_per_server_core_s": round(cap["answered"] / cpu) if cpu > 0 else None,
    "req_per_generator_core_s": cap["req_per_generator_core_s"],
    "wrong": cap["wrong"], "lost": cap["lost"], "late": cap["late"],
    "p50_us": cap["latency_us"]["p50"], "p99_us": cap["latency_us"]["p99"],
    "rate": rate["rate"], "rate_req_per_s": rate["req_per_s"], "rate_wrong": rate["wrong"], "rate_lost": rate["lost"], "rate_late": rate["late"],
    "rate_p50_us": rate["latency_us"]["p50"], "rate_p99_us": rate["latency_us"]["p99"],
    "rate_p999_us": rate["latency_us"]["p999"], "rate_max_send_lag_us": rate["max_send_lag_us"],
    "write_req_per_s": wr["req_per_s"] if wr else None,
    "write_visible_after_s": float(vis) if vis != "null" else None,
}
if stall:
    out.update({"stall_sent": stall["sent"], "stall_lost": stall["lost"], "stall_wrong": stall["wrong"], "stall_late": stall["late"],
                "stall_p99_us": stall["latency_us"]["p99"], "stall_max_us": stall["latency_us"]["max"],
                "stall_max_send_lag_us": stall["max_send_lag_us"], "stall_durable_after_s": float(stall_s)})
wb = {}
for run in (cap, rate, stall):
    for k, v in (run or {}).get("wrong_by", {}).items():
        if v:
            wb[k] = wb.get(k, 0) + v
out["wrong_by_all_runs"] = wb
print(json.dumps(out))
PY
  log "$kind: done: $(tail -n 1 "$TMP/results.jsonl" | cut -c1-200)..."
}

# shingled-dpdk: shingled's DPDK backend on a net_memif port, the driver on
# the other end (scripts/bench-dpdk.sh and ../shared/notes/dpdk-here.md,
# recipe C). The driver writes STORED hashes first (acknowledged writes are
# visible at once), then runs the capacity measurement; shingled's CPU comes
# from /proc over that run (the driver's --server-pid).
bench_shingled-dpdk() {
  local d="$TMP/shingled-dpdk" prefix="bench-peers-$$" sock net out pid
  net=10.197.$(( $$ % 200 ))
  if [ ! -x "$MEMIF_DRIVER" ] || [ "$(id -u)" != 0 ]; then
    log "shingled-dpdk: skipped (needs a DPDK build, $MEMIF_DRIVER, and root)"
    return 0
  fi
  mkdir -p "$d"; sock="$d/memif.sock"; rm -f "$sock"
  SRV_PORT=$(new_port)
  local eal="--no-huge -m 512 --no-pci --no-telemetry"
  { shingled_conf "$d" "0.0.0.0:$SRV_PORT" "$net.1"
    cat <<EOF
io = dpdk;
dpdk_addresses = "$net.2/24";
dpdk_eal_args = "$eal --file-prefix $prefix-s -l $SERVER_CPU --vdev=net_memif0,role=server,id=0,socket=$sock,socket-abstract=no";
EOF
  } >"$d/shingled.conf"
  log "shingled-dpdk: starting"
  taskset -c "$SERVER_CPU" "$SHINGLED" --config "$d/shingled.conf" >"$d/stdout.log" 2>&1 &
  pid=$!
  STARTED+=("$pid")
  for _ in $(seq 300); do grep -q "worker(s) on" "$d/stdout.log" && break; sleep 0.1; done
  grep -q "worker(s) on" "$d/stdout.log" || { tail -n 20 "$d/stdout.log" >&2; die "shingled-dpdk did not start"; }
  log "shingled-dpdk: writing $STORED hashes, then capacity, $DPDK_INFLIGHT in flight, ${DURATION}s"
  # shellcheck disable=SC2086
  out=$(taskset -c "$LOAD_CPU" "$MEMIF_DRIVER" $eal --file-prefix "$prefix-c" -l "$LOAD_CPU" \
    "--vdev=net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" -- \
    --client-ip "$net.1/24" --fill "$STORED" --server "$net.2:$SRV_PORT" --json \
    check --stored "$STORED" --duration "$DURATION" --inflight "$DPDK_INFLIGHT" --server-pid "$pid" \
    2>"$d/driver.err") || true
  stop_pids "$pid"
  rm -rf "/var/run/dpdk/$prefix-s" "/var/run/dpdk/$prefix-c"
  if [[ "$out" != "{"* ]]; then
    log "shingled-dpdk: the driver gave no result: $(grep -v '^EAL' "$d/driver.err" | tail -n 3 | tr '\n' ' ')"
    return 0
  fi
  python3 - "$out" "shingled, workers = 1, io = dpdk (net_memif), bench/dpdk_memif_driver on CPU $LOAD_CPU, $DPDK_INFLIGHT in flight${SHINGLED_CONF_EXTRA:+, $SHINGLED_CONF_EXTRA}" >>"$TMP/results.jsonl" <<'PY'
import json, sys
cap, desc = json.loads(sys.argv[1]), sys.argv[2]
cpu = cap.get("server_cpu_s") or 0
print(json.dumps({
    "server": "shingled-dpdk", "desc": desc,
    "req_per_s": cap["req_per_s"], "answered": cap["answered"], "seconds": cap["seconds"],
    "server_cpu_s": cpu, "server_cpu_share": round(cpu / cap["seconds"], 3) if cap["seconds"] else 0,
    "req_per_server_core_s": cap.get("req_per_server_core_s"),
    "req_per_generator_core_s": cap.get("req_per_generator_core_s"),
    "wrong": cap["wrong"], "lost": cap["lost"], "late": cap.get("late", 0),
    "p50_us": cap["latency_us"]["p50"], "p99_us": cap["latency_us"]["p99"],
    "rate": None, "rate_req_per_s": None, "rate_wrong": 0, "rate_lost": None, "rate_late": None,
    "rate_p50_us": None, "rate_p99_us": None, "rate_p999_us": None, "rate_max_send_lag_us": None,
    "write_req_per_s": None, "write_visible_after_s": None,
    "wrong_by_all_runs": {k: v for k, v in cap.get("wrong_by", {}).items() if v},
}))
PY
  log "shingled-dpdk: done: $(tail -n 1 "$TMP/results.jsonl" | cut -c1-200)..."
}

# ---------------------------------------------------------------- run
log "temp dir $TMP; STORED=$STORED DURATION=$DURATION INFLIGHT=$INFLIGHT RATE=$RATE PROBE_RATE=$PROBE_RATE STALL_WRITES=$STALL_WRITES RSPAMD_SYNC=$RSPAMD_SYNC servers=$SERVERS"
: >"$TMP/results.jsonl"
# The machine's own latency floor: both CPUs spinning (as a polling server
# and generator do), how often a thread loses its CPU for longer than 85 µs
# (enough on its own to push a 15 µs answer past 100 µs).
GAP_NOTE=""
if [ -x "$GAP_PROBE" ]; then
  log "CPU gap probe on CPUs $SERVER_CPU and $LOAD_CPU, 5 s"
  taskset -c "$SERVER_CPU" "$GAP_PROBE" --seconds 5 --gap-us 85 >"$TMP/gap-server.txt" &
  gp=$!
  taskset -c "$LOAD_CPU" "$GAP_PROBE" --seconds 5 --gap-us 85 >"$TMP/gap-load.txt"
  wait "$gp" || true
  GAP_NOTE=$(python3 - "$TMP/gap-server.txt" "$TMP/gap-load.txt" "$SERVER_CPU" "$LOAD_CPU" <<'PY'
import json, sys
s, l = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:3])
print("CPU gaps > 85 µs while both CPUs spin (bench/cpu_gap_probe, 5 s): CPU %s %.2f %% of 200-µs windows "
      "(worst %.1f ms), CPU %s %.2f %% (worst %.1f ms). A request meets such a gap on either side about "
      "that often, so p99 below 100 µs needs both shares well under 1 %%."
      % (sys.argv[3], s["windows_hit_pct"], s["worst_us"] / 1000, sys.argv[4], l["windows_hit_pct"], l["worst_us"] / 1000))
PY
)
  log "$GAP_NOTE"
fi
for kind in ${SERVERS//,/ }; do
  if [ "$kind" = shingled-dpdk ]; then bench_shingled-dpdk; else bench_server "$kind"; fi
done

# ---------------------------------------------------------------- report
python3 - "$TMP/results.jsonl" "$TMP/chart.dat" >"$TMP/report.md" <<PY
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r["server"]: r for r in rows}
sh = by.get("shingled")
def n(x): return "–" if x is None else f"{x:,.0f}"
def us(x):
    if x is None: return "–"
    return f"{x/1000:.1f} ms" if x >= 1000 else f"{x:.0f} µs"
def wrong(r):
    t = r['wrong'] + r['rate_wrong'] + r.get('stall_wrong', 0)
    return str(t) + ("" if not t else " (" + ", ".join(f"{k} {v}" for k, v in r["wrong_by_all_runs"].items()) + ")")
def ratio(r):
    if not sh or r is sh or r["server"] == "shingled-dpdk" or not r["req_per_server_core_s"] or not sh["req_per_server_core_s"]: return "–"
    q = sh["req_per_server_core_s"] / r["req_per_server_core_s"]
    return f"{q*100:.0f} %" if r["server"] == "responder" else f"{q:.1f}×"
print(f"## Issue 8: shingled against its peers ($(date -u +%Y-%m-%d), scripts/bench-peers.sh${ARGS:+ $ARGS})")
print()
print("Each server on CPU $SERVER_CPU (rspamd's fuzzy worker with its redis-server), shingle-load on CPU $LOAD_CPU;")
print("$STORED hashes written and visible before measuring; CHECK mix 50 % stored / 25 % near-duplicate")
print("(24 of 32 shingles shared) / 25 % unknown, every reply verified; capacity: $INFLIGHT in flight,")
print("${DURATION} s; latency: $RATE req/s open loop, ${DURATION} s; stall test: a $PROBE_RATE req/s probe while")
print("$STALL_WRITES fresh hashes are written and made durable (rspamd: sync = ${RSPAMD_SYNC}s; Redis without")
print("persistence); a probe unanswered after ${PROBE_TIMEOUT} s is lost. Server CPU from /proc (utime + stime of all the server's processes).")
print("Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r).")
if """$GAP_NOTE""":
    print("""$GAP_NOTE""")
print()
print("| server | req/s | server CPU | req per server-core-s | shingled ÷ this | wrong | lost | p50 / p99 | p50 / p99 / p99.9 at ${RATE}/s | write → visible | stall: lost / sent | stall: max latency | stall: durable after |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    st = r.get("stall_sent") is not None
    print(f"| {r['server']} | {n(r['req_per_s'])} | {r['server_cpu_share']*100:.0f} % | **{n(r['req_per_server_core_s'])}** | {ratio(r)} "
          f"| {wrong(r)} | {r['lost']} | {us(r['p50_us'])} / {us(r['p99_us'])} "
          f"| {us(r['rate_p50_us'])} / {us(r['rate_p99_us'])} / {us(r['rate_p999_us'])} "
          f"| {'–' if r['write_visible_after_s'] is None else str(r['write_visible_after_s']) + ' s'} "
          f"| {(str(r['stall_lost']) + ' / ' + str(r['stall_sent'])) if st else '–'} | {us(r['stall_max_us']) if st else '–'} "
          f"| {(str(r['stall_durable_after_s']) + ' s') if st else '–'} |")
print()
for mine in ("shingled", "shingled-dpdk"):
    m = by.get(mine)
    if not m or not m["req_per_server_core_s"]: continue
    parts = []
    for other, goal in (("rspamd-sqlite", 20), ("rspamd-redis", 20), ("responder", 0.85)):
        o = by.get(other)
        if not o or not o["req_per_server_core_s"]: continue
        q = m["req_per_server_core_s"] / o["req_per_server_core_s"]
        verdict = "met" if q >= goal else "not met"
        if other == "responder" and mine == "shingled-dpdk":
            parts.append(f"{q*100:.0f} % of the responder (which measures the kernel's UDP path; DPDK bypasses it, so not the 85 % comparison)")
        elif other == "responder":
            parts.append(f"{q*100:.0f} % of the responder (target 85 %: {verdict})")
        else:
            parts.append(f"{q:.1f}× {other} (target 20×: {verdict})")
    print(f"- {mine}, requests per server-core-second: " + "; ".join(parts) + ".")
print()
print("Servers: " + "; ".join(f"{r['server']}: {r['desc']}" for r in rows) + ".")
print("\"wrong\" adds the capacity, fixed-rate and stall runs; \"lost\" is the capacity run's.")
with open(sys.argv[2], "w") as f:
    for r in rows:
        f.write(f"\"{r['server']}\" {r['req_per_server_core_s'] or 0}\n")
PY

gnuplot <<EOF
set terminal pngcairo size 900,520 noenhanced font "sans,11"
set output "$TMP/chart.png"
set title "CHECK requests per server-core-second ($STORED stored, $INFLIGHT in flight, $(date -u +%Y-%m-%d))"
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set ylabel "requests per server-core-second"
set format y "%.0f"
set grid ytics
unset key
plot "$TMP/chart.dat" using 0:2:xtic(1) with boxes lc rgb "#3a6ea5", \
     "" using 0:2:(sprintf("%.0f", \$2)) with labels offset 0,0.8
EOF
mkdir -p "$(dirname "$PNG")"
cp "$TMP/chart.png" "$PNG"

cat "$TMP/report.md"
echo
echo "Chart: $PNG"
echo
cat "$TMP/results.jsonl"
if [ "$RECORD" = 1 ]; then
  rel=$(python3 -c "import os,sys; print(os.path.relpath(sys.argv[1], 'bench'))" "$PNG")
  { echo; cat "$TMP/report.md"; echo; echo "![requests per server-core-second]($rel)"; echo;
    echo '```'; cat "$TMP/results.jsonl"; echo '```'; } >>bench/RESULTS.md
  log "appended to bench/RESULTS.md"
fi
