#!/usr/bin/env bash
# Shingle counters in a cluster (docs/cluster.md, "Counters and rate-limit
# buckets"): three nodes, each serving counters, on a three-server NATS
# JetStream cluster started here on private loopback ports.
#  - increments sent to one node are read back, exact, from every node
#    (each replica applies the stream's records, none is applied twice);
#  - increments to all three nodes at once add up on every node;
#  - a unique counter's pairs, learned on different nodes, count once each;
#  - an increment-and-read answers the sums from before its increment;
#  - the very same datagram from the same source sent to two nodes is one
#    request: counted once;
#  - a node stopped (SIGTERM) while the others count, and one killed with -9
#    after a sync while they count, each read exactly the others' sums after
#    restart: nothing applied twice (the counter shards' stored stream
#    positions), nothing missed;
#  - with no stream leader an increment is answered at once with status 1
#    (not done), and reads go on.
# Usage: cluster_counters_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
. "$here/lib_cluster.sh"
udp="$here/counters_udp.py"
export NODE_COUNTERS=1

cluster_init a b c
for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass "nats_cluster_ready ($ready)" || { fail nats_cluster_ready "$ready"; finish; exit; }
for n in a b c; do
  start_node "$n" >"$tmp/start.out" && pass "node_${n}_started" || fail "node_${n}_started" "$(cat "$tmp/start.out")"
done

C=(--prefix mass_in)
plain=()  # 200 counters, two types
for i in $(seq 100); do plain+=("14:$i" "8:$i"); done
add() {  # add NODE ARGS...: shinglectl counters add against NODE
  local n=$1
  shift
  "$ctl" counters add --server "127.0.0.1:${counter_port[$n]}" "${C[@]}" "$@" >/dev/null
}
# todays NODE COUNTER...: today's sum of each, one line, space-separated.
todays() {
  local n=$1
  shift
  "$ctl" counters get --json --server "127.0.0.1:${counter_port[$n]}" "${C[@]}" "$@" |
    sed -n 's/.*"today":\([0-9]*\),.*/\1/p' | tr '\n' ' '
}
# expect_sums NAME WANT COUNTER...: every node reads WANT (today's sums as
# todays prints them), within 10 s.
expect_sums() {
  local name=$1 want=$2 n got=""
  shift 2
  for n in a b c; do
    for _ in $(seq 100); do
      got=$(todays "$n" "$@")
      [ "$got" = "$want" ] && break
      sleep 0.1
    done
    [ "$got" = "$want" ] || { fail "$name" "node $n reads '${got:0:200}', want '${want:0:200}'"; return; }
  done
  pass "$name"
}
repeat() {  # repeat VALUE COUNT: "VALUE VALUE ... " as todays prints it
  local i out=""
  for i in $(seq "$2"); do out+="$1 "; done
  echo "$out"
}

check "increments of 200 counters to node a acknowledged" add a --delta 5 "${plain[@]}"
expect_sums "every node reads node a's increments (200 x 5)" "$(repeat 5 200)" "${plain[@]}"

adders=()
for n in a b c; do
  add "$n" --delta 2 "${plain[@]}" &
  adders+=($!)
done
for p in "${adders[@]}"; do wait "$p" || fail "increments to node a, b and c at once acknowledged" "an add failed"; done
expect_sums "increments to all three nodes at once add up on every node (200 x 11)" "$(repeat 11 200)" "${plain[@]}"

add a 20:7:7001 20:7:7002 20:7:7003
add b 20:7:7002 20:7:7004
add c 20:7:7001 20:7:7005
expect_sums "a unique counter's pairs learned on three nodes count once each (5)" "5 " 20:7:1

out=$(python3 "$udp" --servers "${counter_port[b]}" --op add-read "${C[@]}" --tag 101 --delta 3 14:1 14:2)
[ "$out" = '{"status": 0, "today": [11, 11]}' ] &&
  pass "an increment-and-read answers the sums from before its increment" ||
  fail "an increment-and-read answers the sums from before its increment" "$out"
expect_sums "and its increment reaches every node (14 14)" "14 14 " 14:1 14:2

out=$(python3 "$udp" --servers "${counter_port[a]},${counter_port[c]}" --op add "${C[@]}" --tag 102 --delta 10 14:3 |
  tr '\n' ' ')
[ "$out" = '{"status": 0, "today": []} {"status": 0, "today": []} ' ] &&
  pass "the same datagram to two nodes is acknowledged by both" ||
  fail "the same datagram to two nodes is acknowledged by both" "$out"
expect_sums "and counted once (11 + 10 = 21)" "21 " 14:3

# Node c stopped while a and b count; then restarted: it reads the stream
# from its stored positions.
kill "${node_pid[c]}" && wait "${node_pid[c]}" 2>/dev/null
check "increments to node a while node c is stopped acknowledged" add a --delta 100 "${plain[@]}"
start_node c >"$tmp/start.out" && pass "node_c_restarted ($(grep -o 'applying from sequence [0-9]*' "$tmp/c/daemon.log" | tail -1))" ||
  fail node_c_restarted "$(cat "$tmp/start.out")"
want=$(todays a "${plain[@]}")
expect_sums "node c restarted applied what it missed, nothing twice" "$want" "${plain[@]}"

# Node b syncs, takes more through a, and is killed with -9 before its next
# sync: at restart it applies from its synced positions.
check "node b syncs" "$ctl" --socket "$tmp/b/ctl.sock" sync
check "increments to node a after node b's sync acknowledged" add a --delta 1000 "${plain[@]}"
for _ in $(seq 100); do [ "$(todays b 14:1)" = "$(todays a 14:1)" ] && break; sleep 0.1; done
kill -9 "${node_pid[b]}" && wait "${node_pid[b]}" 2>/dev/null
check "increments to node c while node b is down acknowledged" add c --delta 7 "${plain[@]}"
start_node b >"$tmp/start.out" && pass "node_b_restarted_after_kill_9 ($(grep -o 'applying from sequence [0-9]*' "$tmp/b/daemon.log" | tail -1))" ||
  fail node_b_restarted_after_kill_9 "$(cat "$tmp/start.out")"
want=$(todays a "${plain[@]}")
expect_sums "node b after kill -9 reads what the others read (nothing twice, nothing lost)" "$want" "${plain[@]}"
expect_sums "unique counter still 5 on every node" "5 " 20:7:1

applied=$(total_figure a counter_cluster_applied)
proposed=$(total_figure a counter_cluster_proposed)
[ "$applied" -gt 0 ] 2>/dev/null && [ "$proposed" -gt 0 ] 2>/dev/null &&
  pass "stats count proposals and applies (node a: $proposed proposed, $applied applied)" ||
  fail "stats count proposals and applies" "proposed $proposed applied $applied"

# No NATS server left with a quorum: an increment is answered at once as
# not done, a read as ever.
stop_nats 1
stop_nats 2
# The node refuses once it has found no leader for longer than an election.
for _ in $(seq 150); do [ "$(cluster_figure a writable)" = 0 ] && break; sleep 0.1; done
before=$(todays a 14:1)
out=$(python3 "$udp" --servers "${counter_port[a]}" --op add-read "${C[@]}" --tag 103 --delta 1 14:1)
[ "$out" = "{\"status\": 1, \"today\": [${before% }]}" ] &&
  pass "without a stream leader an increment-and-read answers status 1 and the sums" ||
  fail "without a stream leader an increment-and-read answers status 1 and the sums" "$out (read $before)"
finish
