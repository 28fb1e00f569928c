#!/usr/bin/env bash
# The Prometheus endpoint (issue 22): GET /metrics on metrics_bind passes
# `promtool check metrics` (Debian's prometheus package), carries every
# figure `shinglectl stats --json` reports (each total as its metric, the
# store, counter, rate-limit and persistence figures), its counters move
# when requests are sent, anything but GET /metrics is refused, and the
# Grafana dashboard (contrib/grafana/shingled.json) queries only metrics
# that exist.
# Usage: metrics_test.sh --build BUILD_DIR
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"
. "$SCRIPT_DIR/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
for t in promtool curl python3; do
  command -v "$t" >/dev/null || { fail requirements "$t not found (apt-get install prometheus curl python3)"; finish; exit 1; }
done
read -r p_fuzzy p_ct p_rl p_m <<<"$(python3 -S "$SCRIPT_DIR/free_ports.py" 4)"
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$p_fuzzy";
counters_bind_socket = "127.0.0.1:$p_ct";
ratelimit_bind_socket = "127.0.0.1:$p_rl";
metrics_bind = "127.0.0.1:$p_m";
max_hashes = 10000;
workers = 2;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
EOF
"$shingled" --config "$tmp/shingled.conf" >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do "$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
scrape() { curl -s --max-time 5 "http://127.0.0.1:$p_m/metrics" >"$1"; }
scrape "$tmp/m1.txt"
if [ -s "$tmp/m1.txt" ] && out=$(promtool check metrics <"$tmp/m1.txt" 2>&1) && [ -z "$out" ]; then
  pass "promtool_check_metrics ($(grep -c '^# TYPE' "$tmp/m1.txt") metric families, no complaint)"
else
  fail promtool_check_metrics "$(head -c 600 <<<"${out:-empty scrape}")"
fi
"$ctl" --socket "$tmp/ctl.sock" stats --json >"$tmp/stats.json"
missing=$(python3 - "$tmp/stats.json" "$tmp/m1.txt" <<'PY'
import json, re, sys
stats = json.load(open(sys.argv[1]))
names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", open(sys.argv[2]).read(), re.M))
def metric(n):
    n = n[:-3] + "_seconds" if n.endswith("_ns") else n  # nanoseconds kept, seconds shown
    n = "counters_" + n[8:] if n.startswith("counter_") else n
    return n
want = []
for k in stats["totals"]:
    want.append("shingled_" + metric(k) + ("" if k == "tcp_open" else "_total"))
want += ["shingled_fuzzy_hashes", "shingled_fuzzy_memory_bytes", "shingled_fuzzy_key_checks_total",
         "shingled_counters_live", "shingled_ratelimit_buckets", "shingled_ratelimit_limited_family_total",
         "shingled_ratelimit_malformed_reason_total", "shingled_counters_malformed_reason_total",
         "shingled_persistence_syncs_total", "shingled_persistence_last_sync_duration_seconds",
         "shingled_persistence_pending_changes", "shingled_persistence_database_bytes"]
for k in stats.get("persistence", {}):
    pass  # each persistence row has its own name: checked through the list above
print(" ".join(w for w in want if w not in names))
PY
)
if [ -z "$missing" ]; then pass "every_stats_figure_is_a_metric ($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['totals']))" "$tmp/stats.json") totals and the store, service and persistence figures)"
else fail every_stats_figure_is_a_metric "missing: $missing"; fi
# contrib/grafana/shingled.json: every metric its panels query exists.
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
unknown=$(python3 - "$REPO_DIR/contrib/grafana/shingled.json" "$tmp/m1.txt" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
want = {m for p in d["panels"] for t in p["targets"] for m in re.findall(r"shingled_[a-z0-9_]+", t["expr"])}
have = set(re.findall(r"^# TYPE (\S+)", open(sys.argv[2]).read(), re.M))
print(" ".join(sorted(want - have)))
PY
)
if [ -z "$unknown" ]; then pass "grafana_dashboard_queries_existing_metrics"
else fail grafana_dashboard_queries_existing_metrics "unknown: $unknown"; fi
sum_metric() { awk -v m="$1" '$1 ~ "^"m"(\\{|$)" {s += $2} END {printf "%d", s}' "$2"; }
before=$(sum_metric shingled_check_total "$tmp/m1.txt")
python3 "$SCRIPT_DIR/fuzzy_udp.py" --to "127.0.0.1:$p_fuzzy" --cmd check --count 25 >/dev/null 2>&1
scrape "$tmp/m2.txt"
after=$(sum_metric shingled_check_total "$tmp/m2.txt")
if [ "$after" -ge $((before + 25)) ]; then pass "counters_move (shingled_check_total $before -> $after after 25 CHECKs)"
else fail counters_move "shingled_check_total $before -> $after after 25 CHECKs"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$p_m/")
post=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "http://127.0.0.1:$p_m/metrics")
if [ "$code" = 404 ] && [ "$post" = 405 ]; then pass "only_get_metrics_is_served (/ -> 404, POST -> 405)"
else fail only_get_metrics_is_served "/ -> $code, POST /metrics -> $post"; fi
if "$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1; then pass "daemon_alive"; else fail daemon_alive "no answer"; fi
finish
