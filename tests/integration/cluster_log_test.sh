#!/usr/bin/env bash
# The cluster's replicated log (src/cluster/jetstream_log, docs/cluster.md)
# against a real three-server NATS JetStream cluster started here on
# private loopback ports, data in a temp dir, driven by
# build/tests/cluster_log_probe:
#  - an R3 stream is created; records published asynchronously are all
#    stored, once each, and read back in stream order from any sequence,
#    every one exactly as published;
#  - publishing the same message ids again stores nothing new (dedup);
#  - kill -9 of the stream's leader during a paced publish: every record is
#    still stored exactly once (retried under the same id across the
#    election), nothing lost;
#  - two of three servers down: a publish is refused with a clear error
#    once its retry window ends;
#  - the servers restarted on their data: publishing works again and the
#    whole log reads back complete;
#  - the replicator (src/cluster/replicator) on its own stream: four worker
#    lanes' 20,000 updates all stored and applied once, in stream order,
#    each as proposed, each outcome naming the sequence the apply saw; a
#    node restarted at sequence 10,001 applies exactly the rest; one
#    reading the 21,000 with the log's queue cut to 64 records (overflowed
#    hundreds of times, read again each time) applies each once, in order;
#    a lane whose outcomes are not taken refuses its ninth update at once;
#  - counter records (src/cluster/counter_record) through the replicator:
#    3,000 proposed from three lanes, each call handed to its owner's lane
#    once and in order, a repeat under the same id stored once;
#  - a key-value record's compare-and-set (src/cluster/kv_record): a second
#    create and a stale update lose without an error, a current one wins.
# Usage: cluster_log_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
probe=$(realpath "$build/tests/cluster_log_probe")
# A read waits this long for its next record: after a server restarts, an
# ordered consumer may stall until the client recreates it (a missed
# heartbeat, seconds), which is recovery, not loss.
read_wait_ms=30000
command -v nats-server >/dev/null || { echo "nats-server not found (scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d)
declare -a nats_pid=("" "" "")
cleanup() {
  for p in "${nats_pid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
read -r -a ports <<<"$(python3 "$here/free_ports.py" 6)"
client_port() { echo "${ports[$1]}"; }
route_port() { echo "${ports[$(($1 + 3))]}"; }
routes="nats-route://127.0.0.1:$(route_port 0),nats-route://127.0.0.1:$(route_port 1),nats-route://127.0.0.1:$(route_port 2)"
servers="nats://127.0.0.1:$(client_port 0),nats://127.0.0.1:$(client_port 1),nats://127.0.0.1:$(client_port 2)"

start_nats() {  # index: its own name, ports and JetStream directory
  local i=$1
  mkdir -p "$tmp/n$i"
  nats-server -n "n$i" -a 127.0.0.1 -p "$(client_port "$i")" -js -sd "$tmp/n$i" \
    --cluster_name shingled-test --cluster "nats://127.0.0.1:$(route_port "$i")" --routes "$routes" \
    -l "$tmp/n$i.log" &
  nats_pid[$i]=$!
}
kill_nats() {  # index: kill -9, as a crash
  local i=$1
  kill -9 "${nats_pid[$i]}" 2>/dev/null
  wait "${nats_pid[$i]}" 2>/dev/null
  nats_pid[$i]=""
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2" 2>/dev/null; }
# until_stream_ready: the cluster has elected its leaders and the probe can
# create the stream (a few hundred ms on a fresh cluster, seconds after a crash)
until_stream_ready() {
  local out
  for _ in $(seq 100); do
    out=$("$probe" --servers "$servers" state 2>&1)
    [ -n "$(field "$out" leader)" ] && { echo "$out"; return 0; }
    sleep 0.2
  done
  echo "$out"
  return 1
}

for i in 0 1 2; do start_nats "$i"; done
if out=$(until_stream_ready); then
  pass "stream_created_r3 ($out)"
else
  fail stream_created_r3 "no stream leader within 20 s: $out; $(tail -3 "$tmp/n0.log" | tr '\n' ' ')"
  finish; exit
fi

# ------------------------------------------------------------------ publish, read, dedup
out=$("$probe" --servers "$servers" publish 1 2000); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" stored)" = 2000 ] && [ "$(field "$out" duplicates)" = 0 ] &&
  [ "$(field "$out" last_seq)" = 2000 ] &&
  pass "publish_2000_stored_once ($out)" || fail publish_2000_stored_once "rc=$rc $out"
out=$("$probe" --servers "$servers" --timeout-ms "$read_wait_ms" read 1 2000); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" lowest)" = 1 ] && [ "$(field "$out" highest)" = 2000 ] &&
  pass "read_from_1_in_order_every_record_right ($out)" || fail read_from_1_in_order_every_record_right "rc=$rc $out"
out=$("$probe" --servers "$servers" --timeout-ms "$read_wait_ms" read 1500 501); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" first_seq)" = 1500 ] && [ "$(field "$out" last_seq)" = 2000 ] &&
  pass "read_from_a_middle_sequence ($out)" || fail read_from_a_middle_sequence "rc=$rc $out"
out=$("$probe" --servers "$servers" publish 1 2000); rc=$?
state=$("$probe" --servers "$servers" state)
[ $rc -eq 0 ] && [ "$(field "$out" duplicates)" = 2000 ] && [ "$(field "$state" last_seq)" = 2000 ] &&
  pass "the_same_ids_again_store_nothing ($out; $state)" || fail the_same_ids_again_store_nothing "rc=$rc $out; $state"

# ------------------------------------------------------------------ the leader crashes mid-publish
leader=$(field "$state" leader)
li=${leader#n}
"$probe" --servers "$servers" --rate 1000 publish 2001 3000 >"$tmp/pub.json" 2>&1 &
pub=$!
sleep 1
kill_nats "$li"
wait "$pub"; rc=$?
out=$(cat "$tmp/pub.json")
[ $rc -eq 0 ] && [ "$(field "$out" stored)" = 3000 ] && [ "$(field "$out" failed)" = 0 ] &&
  pass "leader_n${li}_killed_mid_publish_every_record_stored ($out)" ||
  fail leader_killed_mid_publish_every_record_stored "rc=$rc $out"
out=$("$probe" --servers "$servers" --timeout-ms "$read_wait_ms" read 1 5000); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" lowest)" = 1 ] && [ "$(field "$out" highest)" = 5000 ] &&
  pass "after_the_crash_5000_records_each_once_in_order ($out)" ||
  fail after_the_crash_5000_records_each_once_in_order "rc=$rc $out"

# ------------------------------------------------------------------ no quorum
# One more down: two of three. A publish is refused, clearly, once its retry
# window ends (the probe still connects: the log opens without a quorum).
second=$(( (li + 1) % 3 ))
kill_nats "$second"
start=$(date +%s%N)
out=$("$probe" --servers "$servers" --retry-ms 3000 publish 5001 10); rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [ $rc -eq 1 ] && [ "$(field "$out" failed)" = 10 ] && [ "$(field "$out" stored)" = 0 ] &&
   grep -q "not stored after 3000 ms: .*fewer than a quorum" <<<"$(field "$out" error)" && [ "$ms" -lt 15000 ]; then
  pass "two_of_three_down_publish_refused_clearly ($ms ms: $(field "$out" error))"
else
  fail two_of_three_down_publish_refused_clearly "rc=$rc after $ms ms: $out"
fi

# ------------------------------------------------------------------ back on their data
start_nats "$li"
start_nats "$second"
if out=$(until_stream_ready); then
  pass "servers_restarted_on_their_data ($out)"
else
  fail servers_restarted_on_their_data "$out"
fi
# The ten refused records may still have reached the surviving server's log
# and be stored once the quorum is back (a timeout is not a "no"): publishing
# them again under the same ids stores each exactly once either way.
out=$("$probe" --servers "$servers" publish 5001 10); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" stored)" = 10 ] && [ "$(field "$out" last_seq)" = 5010 ] &&
  pass "publishing_again_after_the_outage ($out)" || fail publishing_again_after_the_outage "rc=$rc $out"
out=$("$probe" --servers "$servers" --timeout-ms "$read_wait_ms" read 1 5010); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" highest)" = 5010 ] &&
  pass "the_whole_log_reads_back ($out)" || fail the_whole_log_reads_back "rc=$rc $out"

# ------------------------------------------------------------------ the replicator
# (src/cluster/replicator) on its own stream: worker threads propose through
# their lanes and take their outcomes; the apply sees the stream in order.
repl=(--servers "$servers" --stream SHINGLED_REPLICATOR --timeout-ms "$read_wait_ms")
out=$("$probe" "${repl[@]}" replicate 4 0 20000); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" stored)" = 20000 ] && [ "$(field "$out" applied)" = 20000 ] &&
  pass "replicator_4_lanes_every_update_stored_and_applied_in_order ($out)" ||
  fail replicator_4_lanes_every_update_stored_and_applied_in_order "rc=$rc $out"
# A node that stopped at sequence 10,000 applies from 10,001 on: the other
# node's 10,000 records after it, then its own 1,000, nothing twice.
out=$("$probe" "${repl[@]}" --read-from 10001 --expect-applied 11000 replicate 2 20000 1000); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" first_applied)" = 10001 ] && [ "$(field "$out" last_applied)" = 21000 ] &&
  pass "replicator_catches_up_from_its_next_sequence ($out)" ||
  fail replicator_catches_up_from_its_next_sequence "rc=$rc $out"
# The same from the start with the log's queue cut to 64 records: it
# overflows (the library delivers faster than the lanes are read), and the
# replicator reads again from its next record each time: still each of the
# 21,000 once, in order.
out=$("$probe" "${repl[@]}" --queue 64 --expect-applied 21000 replicate 1 40000 0); rc=$?
[ $rc -eq 0 ] && [ "$(field "$out" applied)" = 21000 ] && [ "$(field "$out" read_restarts)" -gt 0 ] &&
  pass "replicator_reads_again_when_the_log_queue_overflows ($out)" ||
  fail replicator_reads_again_when_the_log_queue_overflows "rc=$rc $out"
out=$("$probe" "${repl[@]}" fill-ring 8); rc=$?
[ $rc -eq 0 ] && pass "replicator_full_lane_refuses_at_once ($out)" || fail replicator_full_lane_refuses_at_once "rc=$rc $out"
# A node reading the 21,000 records from the start, slowly, with ready_lag
# 100: not ready (its CHECKs dropped) while further behind, ready once
# caught up.
out=$("$probe" "${repl[@]}" --timeout-ms 20000 catch-up 100); rc=$?
[ $rc -eq 0 ] && pass "replicator_ready_only_once_caught_up ($out)" || fail replicator_ready_only_once_caught_up "rc=$rc $out"
# Counter records through the same replicator: every call reaches the
# worker that owns its shard exactly once, in stream order, and a record
# proposed again under its id is stored once.
out=$("$probe" "${repl[@]}" --timeout-ms 20000 replicate-counters 3 3000); rc=$?
[ $rc -eq 0 ] && pass "replicator_hands_counter_calls_to_their_owners ($out)" ||
  fail replicator_hands_counter_calls_to_their_owners "rc=$rc $out"
# Bucket records the same way, with owners that take one share a
# millisecond and rings of 4 shares (--ring 256): records park again and
# again while an owner lags, and every call still reaches its owner once,
# in order, with its cost.
out=$("$probe" "${repl[@]}" --ring 256 --timeout-ms 30000 replicate-buckets 3 600); rc=$?
[ $rc -eq 0 ] && pass "replicator_parks_bucket_records_for_slow_owners ($out)" ||
  fail replicator_parks_bucket_records_for_slow_owners "rc=$rc $out"
# The compare-and-set the cluster's shared values use (the snapshot period
# claimed, the partition layout): one create wins, a stale update loses.
out=$("$probe" --servers "$servers" kv-cas PROBE_KV); rc=$?
[ $rc -eq 0 ] && pass "kv_compare_and_set ($out)" || fail kv_compare_and_set "rc=$rc $out"

finish
