#!/usr/bin/env bash
# Rate-limit decisions, Redis running rspamd's own ratelimit scripts versus
# shingled, in one run on this machine (issue 6: target >= 10x Redis per
# server core).
#
#  1. Redis: a private redis-server (own port and dir, no persistence, one
#     I/O thread) on CPU 0 with the check and update scripts of the rspamd
#     this machine has (Debian's 3.4 keeps them inline in
#     /usr/share/rspamd/plugins/ratelimit.lua; they are read from there, not
#     copied), driven from CPU 1 by bench/redis_ratelimit_driver exactly as
#     rspamd's module calls them per message: EVALSHA check for each bucket,
#     then EVALSHA update for each bucket unless one limited the message.
#     Two client shapes: rspamd's (its Redis pool gives every call an idle
#     connection of its own, so a connection carries one command at a time:
#     the like-for-like figure), then pipelined (each connection writes all
#     the calls of its messages in flight at once: a bulk client, cheaper for
#     Redis than rspamd ever is; labelled as such).
#  2. shingled: workers = 1 pinned to CPU 0, only the rates of the mix,
#     driven from CPU 1 by bench/ratelimit_udp_driver as the rspamd plugin
#     (contrib/rspamd/shingled_ratelimit.lua) asks it per message: a check
#     request, then an update echoing the check's reservation mask unless
#     the verdict is limit; then the one-shot flow (one datagram a message),
#     labelled as such; then the ratio shingled / Redis per server-core-
#     second for each key distribution.
#
# What must be equal between the two halves, or the ratio means nothing:
#  - the mix: tools/shingle_load/ratelimit_mix.h (rates to 100/min, to_ip 30/min,
#    to_ip_from 20/min; message k = one recipient user<k>@rcpt.example from
#    alice@sender.example at 198.51.100.(k mod 256): 3 buckets a message),
#    KEYS recipients, uniform and Zipf (s = 1.1), keys drawn with
#    shingle_load's Rng / KeyDistribution, seed 0x5eed + connection;
#  - the flow: rspamd's two phases, check every bucket of a message, then
#    update them all unless one limited it. For shingled: a check request,
#    then an update echoing the check's reservation mask (the plugin's
#    two_phase flow). shingled's one-shot (one datagram a message) may be
#    reported too, labelled as such, never as the like-for-like figure;
#  - what is counted: bucket decisions = the buckets of every checked
#    message (3 a message), over the same measured window after the same
#    warm-up, per wall second and per second of the server's CPU
#    (user + system of all its threads, /proc/PID/stat);
#  - the server: one core, CPU 0, alone there (Redis: one process, one I/O
#    thread; shingled: workers = 1, its process pinned to CPU 0); the driver
#    on CPU 1; both servers fresh (no buckets) at the start of each run;
#  - the load: closed loop, the same messages in flight (connections x
#    depth), the same SECONDS, loopback only.
#
# Usage (through the shared lock; the script takes no lock itself):
#   flock /tmp/shingled-build.lock scripts/bench-ratelimit.sh [SECONDS] [KEYS]
# BUSY_POLL_US=N sets shingled's busy_poll_us (default 0: the worker sleeps
# when idle, as on the embedded defaults).
# SECONDS per measured run (default 5), KEYS recipients (default 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
keys=${2:-1000000}
connections=4
depth=32
warmup=1
rspamd_plugin=/usr/share/rspamd/plugins/ratelimit.lua

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || [ ! -r "$rspamd_plugin" ]; then
  scripts/install-deps.sh
fi
[ -f build/build.ninja ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build bench/redis_ratelimit_driver bench/ratelimit_udp_driver src/daemon/shingled tools/shinglectl >/dev/null

tmp=$(mktemp -d)
redis_pid=""
shingled_pid=""
# stop_server VAR: stops the server whose pid VAR holds (one this script
# started), waits for it and empties VAR.
stop_server() {
  local pid=${!1}
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; fi
  printf -v "$1" '%s' ""
  return 0
}
stop_redis() { stop_server redis_pid; }
stop_shingled() { stop_server shingled_pid; }
trap 'stop_redis; stop_shingled; rm -rf "$tmp"' EXIT

# rspamd's scripts, verbatim from the installed plugin.
python3 - "$rspamd_plugin" "$tmp" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
for name in ('bucket_check_script', 'bucket_update_script'):
    m = re.search(r'local %s = \[\[(.*?)\]\]' % name, src, re.S)
    if not m:
        sys.exit('%s not found in %s (not rspamd 3.4? see the header)' % (name, sys.argv[1]))
    open('%s/%s.lua' % (sys.argv[2], name), 'w').write(m.group(1))
PY
version=$(rspamd --version 2>/dev/null | grep -o 'version [0-9.]*' || echo "version ?")
# Current rspamd's scripts (lualib/redis_scripts, 3.6 and later: pending
# capacity, nine KEYS) when an installed current rspamd has them:
# RSPAMD_PREFIX's, else the system's. Read from there at run time.
current_scripts=""
for d in ${RSPAMD_PREFIX:+"$RSPAMD_PREFIX/share/rspamd/lualib/redis_scripts"} /usr/share/rspamd/lualib/redis_scripts; do
  if [ -r "$d/ratelimit_check.lua" ] && [ -r "$d/ratelimit_update.lua" ]; then current_scripts=$d; break; fi
done

start_redis() {  # [current]: load current rspamd's scripts instead of 3.4's
  local port check_file="$tmp/bucket_check_script.lua" update_file="$tmp/bucket_update_script.lua"
  if [ "${1:-}" = current ]; then
    check_file="$current_scripts/ratelimit_check.lua"; update_file="$current_scripts/ratelimit_update.lua"
  fi
  port=$((20000 + RANDOM % 20000))
  taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --io-threads 1 --daemonize no --logfile "$tmp/redis.log" &
  redis_pid=$!
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -0 "$redis_pid" 2>/dev/null || { echo "redis-server exited:" >&2; tail "$tmp/redis.log" >&2; exit 1; }
    sleep 0.05
  done
  redis_port=$port
  check_sha=$(redis-cli -p "$port" -x SCRIPT LOAD <"$check_file")
  update_sha=$(redis-cli -p "$port" -x SCRIPT LOAD <"$update_file")
  if [ ${#check_sha} != 40 ] || [ ${#update_sha} != 40 ]; then
    echo "SCRIPT LOAD failed: '$check_sha' '$update_sha'" >&2; exit 1
  fi
}

echo "== Redis $(redis-server --version | grep -o 'v=[0-9.]*') on CPU 0, rspamd $version ratelimit scripts; driver on CPU 1"
echo "   $keys recipients, $connections connections x $depth messages in flight, ${warmup}s warm-up, ${seconds}s measured"
declare -A redis_rate redis_pipelined_rate redis_current_rate
if [ -n "$current_scripts" ]; then
  echo "   current rspamd's scripts from $current_scripts (pool shape, as rspamd calls them)"
  for zipf in 0 1.1; do
    start_redis current
    out=$(taskset -c 1 build/bench/redis_ratelimit_driver --port "$redis_port" --current-scripts \
      --check-sha "$check_sha" --update-sha "$update_sha" --connections "$connections" \
      --depth "$depth" --keys "$keys" --zipf "$zipf" --seconds "$seconds" --warmup "$warmup" \
      --redis-pid "$redis_pid")
    echo "$out" | sed 's/^redis:/redis (current scripts):/'
    redis_current_rate[$zipf]=$(grep -o '[0-9]* decisions per redis-core-second' <<<"$out" | cut -d' ' -f1)
    stop_redis
  done
fi
echo "   rspamd $version's scripts (inline in its plugin)"
for shape in pool pipelined; do
  for zipf in 0 1.1; do
    start_redis
    flag=""; [ "$shape" = pool ] || flag=--pipelined
    out=$(taskset -c 1 build/bench/redis_ratelimit_driver --port "$redis_port" $flag \
      --check-sha "$check_sha" --update-sha "$update_sha" --connections "$connections" \
      --depth "$depth" --keys "$keys" --zipf "$zipf" --seconds "$seconds" --warmup "$warmup" \
      --redis-pid "$redis_pid")
    echo "$out"
    rate=$(grep -o '[0-9]* decisions per redis-core-second' <<<"$out" | cut -d' ' -f1)
    if [ "$shape" = pool ]; then redis_rate[$zipf]=$rate; else redis_pipelined_rate[$zipf]=$rate; fi
    echo "  redis keys after the run: $(redis-cli -p "$redis_port" dbsize)"
    stop_redis
  done
done

# ---------------------------------------------------------------- shingled
# shingled with workers = 1 pinned to CPU 0 (taskset; pin_workers puts the
# worker on the first allowed CPU), only the rate-limit service on a private
# port (fuzzy on another private port with a small table, counters off),
# rates exactly the mix's, room for every bucket the keys can form (3 a
# recipient); bench/ratelimit_udp_driver on CPU 1 sends the mix as the
# plugin's two-phase flow (check, then update with the echoed mask), the
# same connections x depth, keys, warm-up and window. A fresh daemon for each
# run (no buckets). Then the one-shot flow, labelled as such.
start_shingled() {
  local port
  port=$((20000 + RANDOM % 20000))
  rm -rf "$tmp/db" "$tmp/ctl.sock"
  cat >"$tmp/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = "127.0.0.1:$((port + 1))";
ratelimit_service_max_buckets = $((3 * keys + 1000));
ratelimit {
  rates {
    to = "100 / 1min";
    to_ip = "30 / 1min";
    to_ip_from = "20 / 1min";
  }
}
workers = 1;
max_hashes = 10k;
hashfile = "$tmp/db";
sync = 1h;
control_socket = "$tmp/ctl.sock";
busy_poll_us = ${BUSY_POLL_US:-0};
CONF
  taskset -c 0 build/src/daemon/shingled --config "$tmp/shingled.conf" >>"$tmp/shingled.log" 2>&1 &
  shingled_pid=$!
  for _ in $(seq 600); do
    build/tools/shinglectl --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && break
    kill -0 "$shingled_pid" 2>/dev/null || { echo "shingled exited:" >&2; tail "$tmp/shingled.log" >&2; exit 1; }
    sleep 0.1
  done
  shingled_port=$((port + 1))
}

echo "== shingled $(git rev-parse --short HEAD 2>/dev/null || echo ?): workers = 1 on CPU 0; driver on CPU 1"
echo "   same mix, $connections connections x $depth messages in flight, ${warmup}s warm-up, ${seconds}s measured"
declare -A shingled_rate shingled_keyed_rate
# Envelope requests (kind 1, rules = "shingled"), then what the plugin
# sends by default (kind 3, rules = "rspamd": the buckets formed and named
# on the client side).
for keyed in "" --keyed; do
  for zipf in 0 1.1; do
    start_shingled
    out=$(taskset -c 1 build/bench/ratelimit_udp_driver --port "$shingled_port" --connections "$connections" \
      --depth "$depth" --keys "$keys" --zipf "$zipf" --seconds "$seconds" --warmup "$warmup" \
      --server-pid "$shingled_pid" $keyed) || { echo "$out"; echo "ratelimit_udp_driver failed (wrong replies)" >&2; exit 1; }
    echo "$out"
    rate=$(grep -o '[0-9]* decisions per shingled-core-second' <<<"$out" | cut -d' ' -f1)
    if [ -z "$keyed" ]; then shingled_rate[$zipf]=$rate; else shingled_keyed_rate[$zipf]=$rate; fi
    echo "  live buckets after the run: $(build/tools/shinglectl --socket "$tmp/ctl.sock" stats --json |
      python3 -c "import json,sys; print(json.load(sys.stdin)['ratelimit']['live_buckets'])")"
    stop_shingled
  done
done
for zipf in 0 1.1; do
  start_shingled
  taskset -c 1 build/bench/ratelimit_udp_driver --port "$shingled_port" --connections "$connections" \
    --depth "$depth" --keys "$keys" --zipf "$zipf" --seconds "$seconds" --warmup "$warmup" \
    --server-pid "$shingled_pid" --one-shot
  stop_shingled
done

echo "== shingled / Redis, bucket decisions per server-core-second (two-phase; target >= 10x)"
echo "   like for like: both as rspamd talks to them (plugin: a datagram per phase; Redis: its pool)"
if [ -n "$current_scripts" ]; then
  echo "   current rspamd: the plugin's default requests (kind 3) against current rspamd's scripts"
  for zipf in 0 1.1; do
    label=uniform; [ "$zipf" = 0 ] || label="zipf $zipf"
    python3 - "$label" "${shingled_keyed_rate[$zipf]:-0}" "${redis_current_rate[$zipf]:-0}" <<'PY'
import sys
label, s, r = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
if r <= 0 or s <= 0:
    print("  %-8s no figure (shingled %.0f, redis %.0f)" % (label, s, r)); sys.exit(0)
print("  %-8s shingled %.0f / redis %.0f = %.1fx: target %s" % (label, s, r, s / r,
      "met" if s / r >= 10 else "NOT met (%.0f %% short)" % (100 * (1 - s / r / 10))))
PY
  done
fi
echo "   rspamd $version: envelope requests (kind 1) against its scripts; kind 3 in brackets"
for zipf in 0 1.1; do
  label=uniform; [ "$zipf" = 0 ] || label="zipf $zipf"
  python3 - "$label" "${shingled_rate[$zipf]:-0}" "${redis_rate[$zipf]:-0}" \
    "${redis_pipelined_rate[$zipf]:-0}" "${shingled_keyed_rate[$zipf]:-0}" <<'PY'
import sys
label, s, r, rp, k = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
if r <= 0 or s <= 0:
    print("  %-8s no figure (shingled %.0f, redis %.0f)" % (label, s, r)); sys.exit(0)
ratio = s / r
print("  %-8s shingled %.0f / redis %.0f = %.1fx: target %s" % (label, s, r, ratio,
      "met" if ratio >= 10 else "NOT met (%.0f %% short)" % (100 * (1 - ratio / 10))))
if rp > 0:
    print("  %-8s   (against pipelined Redis, %.0f: %.1fx; not how rspamd calls it)" % ("", rp, s / rp))
if k > 0:
    print("  %-8s   (kind 3, %.0f: %.1fx)" % ("", k, k / r))
PY
done
