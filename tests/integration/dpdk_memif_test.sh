#!/usr/bin/env bash
# The NIC-free DPDK benchmark path works and tells the truth: shingled with
# io = dpdk owns the server end of a net_memif port, bench/dpdk_memif_driver
# the client end (the pair scripts/bench-dpdk.sh and scripts/bench-peers.sh
# measure with). The driver fills the store, runs a short CHECK mix and
# prints shingle-load's JSON line; every answer must be verified right, none
# lost, with exact and shingle hits among them, and the server's CPU read.
# Needs root and a build with DPDK; where either is missing the run FAILS
# and says why. The last line is "N passed, M failed".
#
#   tests/integration/dpdk_memif_test.sh --build BUILD_DIR
set -uo pipefail
source "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
BUILD=$build
cannot_run() { fail dpdk_memif_prerequisites "$1"; finish; exit 1; }

SHINGLED="$BUILD/src/daemon/shingled"
DRIVER="$BUILD/bench/dpdk_memif_driver"
[ "$(id -u)" -eq 0 ] || cannot_run "must run as root (DPDK)"
for b in "$SHINGLED" "$DRIVER"; do [ -x "$b" ] || cannot_run "$b is not built (a DPDK build?)"; done

id=$$
PREFIX="shingled-memif-test-$id"
NET=10.196.$((id % 200))
PORT=11335
TMP=$(mktemp -d /tmp/dpdk-memif-test.XXXXXX)
SOCK="$TMP/memif.sock"
EAL="--no-huge -m 256 --no-pci --no-telemetry"
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  rm -rf "/var/run/dpdk/$PREFIX-s" "/var/run/dpdk/$PREFIX-c" "$TMP"
}
trap cleanup EXIT

cat >"$TMP/shingled.conf" <<EOF
io = dpdk;
bind_socket = "0.0.0.0:$PORT";
counters_bind_socket = [];
ratelimit_bind_socket = [];
allow_update = ["$NET.1"];
workers = 1;
max_hashes = 100k;
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
dpdk_addresses = "$NET.2/24";
dpdk_eal_args = "$EAL --file-prefix $PREFIX-s --vdev=net_memif0,role=server,id=0,socket=$SOCK,socket-abstract=no";
EOF
"$SHINGLED" --config "$TMP/shingled.conf" >"$TMP/shingled.log" 2>&1 &
PID=$!
for _ in $(seq 200); do grep -q "worker(s) on" "$TMP/shingled.log" && break; sleep 0.1; done
grep -q "worker(s) on" "$TMP/shingled.log" ||
  { fail shingled_starts_on_memif "$(tail -3 "$TMP/shingled.log" | tr '\n' ' ')"; finish; exit 1; }
pass shingled_starts_on_memif

rc=0
out=$(timeout 120 "$DRIVER" $EAL --file-prefix "$PREFIX-c" \
  "--vdev=net_memif0,role=client,id=0,socket=$SOCK,socket-abstract=no" -- \
  --client-ip "$NET.1/24" --fill 2000 --server "$NET.2:$PORT" --json \
  check --stored 2000 --count 20000 --inflight 32 --server-pid "$PID" 2>"$TMP/driver.err") || rc=$?
if [ $rc -eq 0 ]; then
  pass driver_exits_0
else
  fail driver_exits_0 "exit $rc: $(grep -v '^EAL' "$TMP/driver.err" | tail -3 | tr '\n' ' ')"
fi
grep -q "fill: 2000 written, 2000 acknowledged, 0 lost, 0 wrong" "$TMP/driver.err" &&
  pass fill_acknowledged ||
  fail fill_acknowledged "$(grep fill "$TMP/driver.err")"
verdict() { python3 -c 'import json,sys
try:
    d = json.loads(sys.argv[1].strip().splitlines()[-1])
except Exception as e:
    print("no JSON line: %s" % e); sys.exit(1)
ok = eval(sys.argv[2])
print("answered %s, exact %s, near %s, misses %s, wrong %s, lost %s, server %s s CPU" % (d.get("answered"), d.get("exact_hits"), d.get("shingle_hits"), d.get("misses"), d.get("wrong"), d.get("lost"), d.get("server_cpu_s")))
sys.exit(0 if ok else 1)' "$out" "$1"; }
if why=$(verdict "d['answered'] == 20000 and d['wrong'] == 0 and d['lost'] == 0 and d['exact_hits'] > 0 and d['shingle_hits'] > 0 and d['misses'] > 0"); then
  echo "  $why"; pass check_mix_all_right
else
  fail check_mix_all_right "$why"
fi
if why=$(verdict "d['tool'] == 'dpdk_memif_driver' and (d['server_cpu_s'] or 0) > 0 and (d['req_per_server_core_s'] or 0) > 0"); then
  pass server_cpu_measured
else
  fail server_cpu_measured "$why"
fi
finish
