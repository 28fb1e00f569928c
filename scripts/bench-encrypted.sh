#!/usr/bin/env bash
# End-to-end plain versus encrypted CHECK throughput of shingled over UDP on
# loopback: the server on CPU 0 (one worker), the driver on CPU 1. Writes
# 100k hashes, then alternates plain and encrypted CHECK runs (rspamd-like
# mix) and reports requests per second and per server-core-second, and the
# encrypted/plain ratio of the medians. Usage: scripts/bench-encrypted.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build src/daemon/shingled tools/shinglectl bench/udp_check_driver >/dev/null

tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
build/tools/shinglectl keypair >"$tmp/keypair.conf"
pubkey=$(sed -n 's/.*pubkey = "\(.*\)";/\1/p' "$tmp/keypair.conf")
cat >"$tmp/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 1;
max_hashes = 200k;
control_socket = "$tmp/ctl.sock";
hashfile = "$tmp/db";
.include_placeholder
CONF
sed -i '/.include_placeholder/d' "$tmp/shingled.conf"
cat "$tmp/keypair.conf" >>"$tmp/shingled.conf"
taskset -c 0 build/src/daemon/shingled --config "$tmp/shingled.conf" --log-level warning &
pid=$!
for _ in $(seq 50); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done

driver() { taskset -c 1 build/bench/udp_check_driver --port "$port" --server-pid "$pid" "$@"; }
driver --mode write --stored 100000 >/dev/null
results="$tmp/results"
for r in $(seq "$rounds"); do
  driver --mode plain --seconds "$seconds" | tee -a "$results"
  driver --mode encrypted --pubkey "$pubkey" --seconds "$seconds" | tee -a "$results"
done
python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(mode, key): return statistics.median(r[key] for r in runs if r["mode"] == mode)
for key in ("req_per_s", "req_per_server_core_s"):
    p, e = med("plain", key), med("encrypted", key)
    print(f"median {key}: plain {p:,.0f}  encrypted {e:,.0f}  ratio {e / p:.2f}")
PY
