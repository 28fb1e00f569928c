#!/usr/bin/env bash
# What the access controls cost a CHECK (issue 18): the same shingled twice
# in one run, A bare, B with every control on the path of a CHECK from a
# non-loopback source (loopback is never limited): the per-network limit
# (a bucket charged per request; rate and burst high enough to refuse
# nothing), a blocked map and a ratelimit_whitelist map of 10,000 networks
# each (none matching), `delay` with a delay_whitelist of the same 10,000
# and the load's own address (so every hit is looked up in it and answered),
# a skip_hashes map of 10,000 digests, forbidden_ids, and per-key stats
# (always on). Runs in a network
# namespace of its own where the server listens on 192.0.2.1 (on its `lo`),
# so shingle-load's requests come from 192.0.2.1, a limited source. Needs root.
#
#   scripts/bench-access.sh [SHINGLED]   env: as scripts/bench-ab.sh (RUNS, DURATION, STORED)
set -euo pipefail
BIN=$(realpath "${1:-build/src/daemon/shingled}")
if [ -z "${SHINGLED_IN_NETNS:-}" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "bench-access: needs root (a network namespace)" >&2; exit 2; }
  ns="shingled-bench-$$"
  ip netns add "$ns"
  trap 'ip netns del "$ns"' EXIT
  SHINGLED_IN_NETNS=1 ip netns exec "$ns" "$0" "$@"
  exit $?
fi
ip link set lo up
ip addr add 192.0.2.1/32 dev lo
MAPS=$(mktemp -d /tmp/bench-access.XXXXXX)
trap 'rm -rf "$MAPS"' EXIT
python3 - "$MAPS" <<'EOF'
import hashlib, sys
d = sys.argv[1]
with open(d + "/blocked.map", "w") as f:
    for i in range(10000):
        f.write("10.%d.%d.0/24\n" % (i // 256, i % 256))
with open(d + "/white.map", "w") as f:
    for i in range(10000):
        f.write("172.%d.%d.0/24\n" % (16 + i // 256, i % 256))
with open(d + "/skip.map", "w") as f:
    for i in range(10000):
        f.write(hashlib.sha512(b"skip %d" % i).hexdigest() + "\n")
EOF
HOST=192.0.2.1 CONF_B="ratelimit_rate = 1000000000;
ratelimit_burst = 1000000000;
ratelimit_max_buckets = 10000;
blocked = \"$MAPS/blocked.map\";
ratelimit_whitelist = \"$MAPS/white.map\";
delay_whitelist = [\"$MAPS/white.map\", \"192.0.2.1\"];
delay = 1h;
skip_hashes = \"$MAPS/skip.map\";
forbidden_ids = [99, 98];" "$(dirname "$0")/bench-ab.sh" "$BIN" "$BIN"
