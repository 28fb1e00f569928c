#!/usr/bin/env bash
# Issue 20: shingled's rate-limit decisions equal current rspamd's Redis
# scripts for the same call sequence (ratelimit_differential.py has the
# sequence and the comparison). Live when an installed current rspamd has
# its scripts (RSPAMD_PREFIX/share/rspamd/lualib/redis_scripts, or
# /usr/share/rspamd/lualib/redis_scripts): a private redis-server runs them
# with EVAL, read at run time from the package, beside a private shingled,
# and the run is also written to a temporary record. Without them (Debian's
# 3.4 inlines its older scripts in the plugin), the calls of a recorded live
# run against rspamd 4.1.5's scripts (tests/integration/vectors/
# ratelimit_rspamd_4.1.5.jsonl, made with --record) are replayed on shingled
# and compared with the answers Redis gave then.
#
# Usage: ratelimit_differential_test.sh [--build DIR] [--record FILE]
# Prints PASS/FAIL lines; the last line is "N passed, M failed".
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/integration/lib_check.sh
. "$SCRIPT_DIR/lib_check.sh"
build=build; record=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --record) record=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
shingled="$build/src/daemon/shingled"
ctl="$build/tools/shinglectl"
VECTORS="$SCRIPT_DIR/vectors/ratelimit_rspamd_4.1.5.jsonl"
abort() { fail "$1" "$2"; finish; exit 1; }
[ -x "$shingled" ] || abort requirements "no shingled at $shingled"
command -v python3 >/dev/null || abort requirements "python3 not found"

scripts=""
for d in ${RSPAMD_PREFIX:+"$RSPAMD_PREFIX/share/rspamd/lualib/redis_scripts"} /usr/share/rspamd/lualib/redis_scripts; do
    if [ -r "$d/ratelimit_check.lua" ] && [ -r "$d/ratelimit_update.lua" ] && [ -r "$d/ratelimit_cleanup_pending.lua" ]; then
        scripts=$d; break
    fi
done
[ -n "$scripts" ] || [ -r "$VECTORS" ] || abort requirements "neither current rspamd's scripts nor $VECTORS"
if [ -n "$scripts" ]; then command -v redis-server >/dev/null || abort requirements "redis-server not found"; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-diff.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
read -r p_fuzzy p_rl p_redis <<<"$(python3 -S "$SCRIPT_DIR/free_ports.py" 3)"
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$p_fuzzy";
counters_bind_socket = [];
ratelimit_bind_socket = "127.0.0.1:$p_rl";
ratelimit_service_max_buckets = 10000;
max_hashes = 10000;
workers = 2;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
EOF
"$shingled" --config "$tmp/shingled.conf" >"$tmp/daemon.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do "$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 || abort shingled_ready "shingled did not start: $(tail -3 "$tmp/daemon.log")"

if [ -n "$scripts" ]; then
    redis-server --port "$p_redis" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
    pids+=("$!")
    for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $p_redis))" 2>/dev/null && break; sleep 0.1; done
    out=$(cd "$SCRIPT_DIR" && python3 ratelimit_differential.py live "$p_redis" "$p_rl" "$scripts" "${record:-$tmp/record.jsonl}" 2>&1)
    rc=$?
    what="rspamd's scripts from $scripts on redis-server $(redis-server --version | grep -o 'v=[0-9.]*')"
else
    out=$(cd "$SCRIPT_DIR" && python3 ratelimit_differential.py replay "$p_rl" "$VECTORS" 2>&1)
    rc=$?
    what="the answers of rspamd 4.1.5's scripts recorded in $(basename "$VECTORS")"
fi
echo "$out" | head -25
if [ $rc = 0 ]; then
    pass "decisions_and_levels_equal_rspamds_scripts (${out##*$'\n'}; against $what)"
else
    fail decisions_and_levels_equal_rspamds_scripts "${out##*$'\n'} (against $what)"
fi
finish
