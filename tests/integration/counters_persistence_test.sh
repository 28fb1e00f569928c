#!/usr/bin/env bash
# Shingle counters through restarts, over the real UDP path with
# `shinglectl counters`:
#  1. plain and unique counters, a sync, kill -9, restart: every sum back,
#     unique counters still know their pairs (a pair seen before the crash
#     is not counted again), the series shows the same periods;
#  2. increments after the last sync, kill -9: each counter is as synced or
#     as incremented, never anything else (the documented loss window);
#  3. SIGTERM syncs first: nothing acknowledged is lost.
# Usage: counters_persistence_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")

setup_tmp
port=$((20000 + RANDOM % 20000))
cat >"$tmp/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = "127.0.0.1:$((port + 1))";
ratelimit_bind_socket = [];
workers = 2;
max_hashes = 10k;
counters_max = 100k;
hashfile = "$tmp/db";
sync = 1h;
control_socket = "$tmp/ctl.sock";
CONF
C=(--server "127.0.0.1:$((port + 1))" --prefix mass_in)

plain=()   # 14:1 .. 14:300 and 8:1 .. 8:300 (subject)
for i in $(seq 300); do plain+=("14:$i" "8:$i"); done
pairs=()   # sender 7 wrote to 40 recipients; sender 9 to 3
for r in $(seq 40); do pairs+=("20:7:$((7000 + r))"); done
for r in 1 2 3; do pairs+=("20:9:$((9000 + r))"); done

# "today" of every counter given, one per line.
todays() { "$ctl" counters get --json "${C[@]}" "$@" | sed -n 's/.*"today":\([0-9]*\),.*/\1/p'; }
all_equal() {  # all_equal VALUE LINES
  local want=$1 lines=$2
  [ -n "$lines" ] && [ -z "$(grep -v -x "$want" <<<"$lines")" ]
}

start_daemon "$tmp" || exit 1
check "increments of 600 counters acknowledged" "$ctl" counters add "${C[@]}" --delta 5 "${plain[@]}"
check "pairs acknowledged" "$ctl" counters add "${C[@]}" "${pairs[@]}"
check "a repeated pair acknowledged" "$ctl" counters add "${C[@]}" 20:7:7001 20:9:9001
before=$(todays "${plain[@]}")
if all_equal 5 "$before" && [ "$(wc -l <<<"$before")" = 600 ]; then
  pass "every counter reads 5 before the crash"
else
  fail "every counter reads 5 before the crash" "$(sort <<<"$before" | uniq -c | head)"
fi
uniques=$(todays 20:7:1 20:9:1 | tr '\n' ' ')
[ "$uniques" = "40 3 " ] && pass "unique counters count distinct pairs (40, 3)" ||
  fail "unique counters count distinct pairs (40, 3)" "$uniques"
series_before=$("$ctl" counters series "${C[@]}" 14:1)
check "sync" "$ctl" --socket "$tmp/ctl.sock" sync
crash_daemon

start_daemon "$tmp" || exit 1
after=$(todays "${plain[@]}")
[ "$after" = "$before" ] && pass "kill -9 after a sync: all 600 sums back" ||
  fail "kill -9 after a sync: all 600 sums back" "$(sort <<<"$after" | uniq -c | head)"
uniques=$(todays 20:7:1 20:9:1 | tr '\n' ' ')
[ "$uniques" = "40 3 " ] && pass "unique counters back" || fail "unique counters back" "$uniques"
"$ctl" counters add "${C[@]}" 20:7:7001 20:7:7002 20:7:7999 >/dev/null
uniques=$(todays 20:7:1 | tr '\n' ' ')
[ "$uniques" = "41 " ] && pass "known pairs are not counted again after the restart, a new one is" ||
  fail "known pairs are not counted again after the restart, a new one is" "$uniques"
series_after=$("$ctl" counters series "${C[@]}" 14:1)
[ -n "$series_after" ] && [ "$series_after" = "$series_before" ] &&
  pass "series of a counter unchanged by the restart" ||
  fail "series of a counter unchanged by the restart" "$series_before // $series_after"

# 2. Acknowledged but not yet synced (sync = 1h), then kill -9.
check "sync" "$ctl" --socket "$tmp/ctl.sock" sync
check "increments after the last sync acknowledged" "$ctl" counters add "${C[@]}" "${plain[@]}"
crash_daemon
start_daemon "$tmp" || exit 1
after=$(todays "${plain[@]}")
if [ "$(wc -l <<<"$after")" = 600 ] && [ -z "$(grep -v -x -E '5|6' <<<"$after")" ]; then
  pass "kill -9 before a sync: each counter as synced (5) or as incremented (6), never else"
else
  fail "kill -9 before a sync: each counter as synced (5) or as incremented (6), never else" \
    "$(sort <<<"$after" | uniq -c | head)"
fi

# 3. SIGTERM: everything acknowledged is on disk at exit.
base=$(todays 14:1)
check "increments before SIGTERM acknowledged" "$ctl" counters add "${C[@]}" --delta 2 "${plain[@]}"
now=$(todays "${plain[@]}")
kill -TERM "$pid"
if wait "$pid"; then pass "SIGTERM exits 0"; else fail "SIGTERM exits 0" "exit $?"; fi
pid=""
start_daemon "$tmp" || exit 1
after=$(todays "${plain[@]}")
[ "$after" = "$now" ] && [ "$(head -1 <<<"$after")" = "$((base + 2))" ] &&
  pass "SIGTERM loses nothing" || fail "SIGTERM loses nothing" "$(sort <<<"$after" | uniq -c | head)"
grep -q "loaded 646 counters" "$tmp/daemon.log" && pass "the log counts the counters loaded" ||
  fail "the log counts the counters loaded" "$(grep counters "$tmp/daemon.log" | tail -3)"
kill -TERM "$pid"
wait "$pid"
pid=""
finish
