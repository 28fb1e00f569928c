#!/usr/bin/env bash
# Issue 27: what the counters plugin costs a scan, and what the counter
# service does under the plugin's request shape. Two parts, one run:
#
#  1. Scan time. Two rspamd (Debian's, or RSPAMD_PREFIX's) with the same
#     self-contained config, one of them with
#     contrib/rspamd/shingled_counters.lua talking to a private shingled
#     (counters on, workers = 1); both on CPU 0 with shingled, the driver on
#     CPU 1. The driver scans the same varied messages (distinct senders,
#     subjects, links) through both, alternating A, B, A, B... so noise hits
#     both alike, one scan at a time over HTTP keep-alive (/checkv2), and
#     reports the median and p99 of each and their difference: the time the
#     plugin adds to a scan (its two datagrams included).
#  2. Counter entries per server core-second: shingle-load's
#     increment-read with 56 entries a request (14 feature values x 4
#     counters, the plugin's scan request) on 1M keys, Zipf 1.1, then its
#     increment with 14 entries (the verdict request), against shingled
#     (workers = 1 on CPU 0, shingle-load on CPU 1).
#
# Usage: flock /tmp/shingled-build.lock scripts/bench-counters-plugin.sh [MESSAGES] [SECONDS]
# MESSAGES per rspamd (default 2000), SECONDS per shingle-load run (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${1:-2000}
seconds=${2:-5}
if [ -n "${RSPAMD_PREFIX:-}" ]; then export PATH="$RSPAMD_PREFIX/bin:$PATH"; fi
ninja -C build src/daemon/shingled tools/shinglectl tools/shingle-load >/dev/null
# shellcheck source=tests/integration/lib_rspamd_conf.sh
. tests/integration/lib_rspamd_conf.sh

TMP=$(mktemp -d)
PIDS=()
# `|| true`: under set -e a failed kill (a server already stopped) would end
# the trap and leave the others running.
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
read -r p_fuzzy p_ct p_a p_b <<<"$(python3 -S tests/integration/free_ports.py 4)"
printf 'com\norg\nnet\nexample\n' >"$TMP/tld.dat"
ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)

start_shingled() {
  mkdir -p "$TMP/s"
  rm -rf "$TMP/s/db"
  cat >"$TMP/s/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$p_fuzzy";
counters_bind_socket = "127.0.0.1:$p_ct";
ratelimit_bind_socket = [];
max_hashes = 10000;
counters_max = 4m;
workers = 1;
hashfile = "$TMP/s/db";
control_socket = "$TMP/s/ctl.sock";
sync = 1h;
EOF
  taskset -c 0 build/src/daemon/shingled --config "$TMP/s/shingled.conf" >>"$TMP/s/log" 2>&1 &
  shingled_pid=$!
  PIDS+=("$shingled_pid")
  for _ in $(seq 100); do build/tools/shinglectl --socket "$TMP/s/ctl.sock" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "shingled did not start" >&2; exit 1
}
stop_shingled() { kill "$shingled_pid"; wait "$shingled_pid" 2>/dev/null || true; }

start_rspamd() {  # NAME PORT WITH-PLUGIN(0|1)
  local d="$TMP/rspamd-$1"
  mkdir -p "$d/db" "$d/run" "$d/plugins.d"
  cp contrib/rspamd/shingled_counters.lua "$d/plugins.d/"
  {
    rspamd_conf_head "$d" "" "$2"
    echo "modules { path = \"$d/plugins.d/\"; }"
    echo 'actions { reject = 15; add_header = 6; }'
    if [ "$3" = 1 ]; then
      echo "shingled_counters { servers = \"127.0.0.1:$p_ct\"; prefix = \"bench\"; allow_local = true; }"
    fi
  } >"$d/rspamd.conf"
  taskset -c 0 rspamd -f "${ROOT_OPTS[@]}" -c "$d/rspamd.conf" --var DBDIR="$d/db" --var RUNDIR="$d/run" \
    --var LOGDIR="$d" >"$d/stdout.log" 2>&1 &
  PIDS+=("$!")
}

start_shingled
start_rspamd with "$p_a" 1
start_rspamd without "$p_b" 0
echo "== scan time: rspamd $(rspamd --version | grep -o 'version [0-9.]*' | head -1), with the plugin (:$p_a) and without (:$p_b); $messages messages each, alternating"
taskset -c 1 python3 - "$p_a" "$p_b" "$messages" <<'PY'
import http.client, random, statistics, sys, time
pa, pb, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(27)
def message(i):
    s = rng.randrange(5000)
    body = "Hello,\r\nsee https://shop%d.example/offer?id=%d and https://news.example/a/%d\r\n" % (
        rng.randrange(300), i, rng.randrange(50))
    return ("From: Sender %d <s%d@sender%d.example>\r\nTo: r%d@rcpt.example\r\nSubject: Offer %d for you\r\n"
            "Message-ID: <%d.%d@sender.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n%s"
            % (s, s, s % 97, i, rng.randrange(40), i, s, body)).encode()
def conn(port):
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/ping"); c.getresponse().read(); return c
        except Exception:
            time.sleep(0.1)
    sys.exit("rspamd on %d did not answer" % port)
ca, cb = conn(pa), conn(pb)
def scan(c, body, i):
    hdrs = {"IP": "198.51.100.%d" % (i % 250 + 1), "From": "s%d@sender.example" % i,
            "Rcpt": "r%d@rcpt.example" % i, "Helo": "mx%d.example" % (i % 20)}
    t = time.perf_counter()
    c.request("POST", "/checkv2", body, hdrs)
    r = c.getresponse(); data = r.read()
    dt = time.perf_counter() - t
    if r.status != 200: sys.exit("scan failed: %d %s" % (r.status, data[:200]))
    return dt, data
for i in range(50):  # warm-up
    m = message(i); scan(ca, m, i); scan(cb, m, i)
wa, wb, hits = [], [], 0
for i in range(n):
    m = message(1000 + i)
    first, second = (ca, cb) if i % 2 == 0 else (cb, ca)
    d1, r1 = scan(first, m, i)
    d2, r2 = scan(second, m, i)
    (wa if first is ca else wb).append(d1); (wb if first is ca else wa).append(d2)
    rwith = r1 if first is ca else r2
    hits += b"SHINGLED_" in rwith
def q(v, p): v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
for name, w in (("with the plugin", wa), ("without", wb)):
    print("  %-16s median %.2f ms, p99 %.2f ms (%d scans)" % (name, 1000 * statistics.median(w), 1000 * q(w, 0.99), len(w)))
print("  added by the plugin: median %+.2f ms, p99 %+.2f ms; %d of %d scans carried a SHINGLED_ symbol" % (
    1000 * (statistics.median(wa) - statistics.median(wb)), 1000 * (q(wa, 0.99) - q(wb, 0.99)), hits, n))
PY
build/tools/shinglectl --socket "$TMP/s/ctl.sock" stats --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d.get("totals", d)
print("  shingled: %s counter requests, %s counters read, %s updates" % (t.get("counter_requests"), t.get("counter_reads"), t.get("counter_updates")))' || true
stop_shingled

echo "== counter entries per shingled core-second, the plugin's request shapes (workers = 1 on CPU 0, shingle-load on CPU 1)"
for shape in "increment-read 56" "increment 14"; do
  read -r op entries <<<"$shape"
  start_shingled
  taskset -c 1 build/tools/shingle-load counters "$op" --server "127.0.0.1:$p_ct" --entries "$entries" \
    --keys 1m --zipf 1.1 --duration "$seconds" --prefix bench --server-pid "$shingled_pid" 2>&1 |
    grep -E "^ +(throughput|server|final check)" | sed 's/^/  /' || true
  stop_shingled
done
