#!/usr/bin/env bash
# Shingled nodes (a, b, then c and d) replicating the fuzzy store through a
# three-server NATS JetStream cluster (docs/cluster.md), all started here on
# private loopback ports:
#  - 2,000 WRITEs to node a are all acknowledged (after JetStream's ack);
#  - node b, which was written nothing, answers every CHECK of them right:
#    exact hits, near-duplicates by shingles, misses (shingle-load's
#    verifier, 0 wrong, 0 lost), and so does node a;
#  - 500 DELs sent to node b take the records off node a as well;
#  - a node started later with an empty database reads the whole stream and
#    answers right too;
#  - `shinglectl stats` shows what a node proposed, JetStream stored, and
#    each node applied from the stream;
#  - a node stopped while others take writes, and one killed with -9 after
#    a sync, each apply exactly what they missed at restart (from their
#    stored per-shard stream positions): nothing twice, nothing lost;
#  - a strong hit on one node refreshes the record on the others;
#  - a node killed with -9 while another takes writes catches up at restart,
#    and every node's synced `shinglectl dump` is then identical;
#  - the same WRITE sent to two nodes, and retransmitted to one, adds its
#    value once;
#  - a node whose max_hashes differs from the cluster's is refused at start,
#    and so is a node whose next records were purged from the stream.
# Usage: cluster_nodes_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
. "$here/lib_cluster.sh"

cluster_init a b c d
for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass "nats_cluster_ready ($ready)" || { fail nats_cluster_ready "$ready"; finish; exit; }

for n in a b; do
  start_node "$n" >"$tmp/start.out" && pass "node_${n}_started" || fail "node_${n}_started" "$(cat "$tmp/start.out")"
done

out=$("$load" write 2000 --server "127.0.0.1:${udp_port[a]}" --json -q 2>&1)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = 2000 ] &&
  pass "writes_to_node_a_all_acknowledged (2000)" || fail writes_to_node_a_all_acknowledged "${out:0:400}"

until_applied b 2000 && until_applied a 2000
for n in b a; do
  expect_right "node_${n}_answers_every_check_right" "$n" 0 2000 6000
done

figures=$(node_stats a |
  python3 -c 'import json,sys; c=json.load(sys.stdin)["cluster"]; print(c["proposed"], c["stored"], c["given_up"], c["applied"], c["last_applied"])')
[ "$figures" = "2000 2000 0 2000 2000" ] &&
  pass "node_a_stats_proposed_stored_applied (proposed stored given_up applied last_applied: $figures)" ||
  fail node_a_stats_proposed_stored_applied "$figures"

sleep 1.2  # the stream's state is looked up once a second
figures=$(node_stats b |
  python3 -c 'import json,sys; c=json.load(sys.stdin)["cluster"]; print(c["stream_last_sequence"], c["lag"], c["stream_leader"])')
[ "$figures" = "2000 0 1" ] && pass "node_b_stats_stream_and_lag (last sequence, lag, leader: $figures)" ||
  fail node_b_stats_stream_and_lag "$figures"

out=$("$load" delete 500 --server "127.0.0.1:${udp_port[b]}" --json -q 2>&1)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && pass "deletes_to_node_b_acknowledged (500)" ||
  fail deletes_to_node_b_acknowledged "${out:0:400}"
until_applied a 2500
expect_right node_a_answers_as_if_deleted_there a 500 1500 4000

start_node c >"$tmp/start.out" && pass "node_c_started_empty" || fail node_c_started_empty "$(cat "$tmp/start.out")"
until_applied c 2500
expect_right a_new_empty_node_reads_the_whole_stream c 500 1500 4000

# ------------------------------------------------------------------ restarts
# b stops (SIGTERM: its records and stream positions synced) while a takes
# 1,000 more; b started again applies exactly those: a record applied twice
# would answer a doubled value, one missed a miss.
kill "${node_pid[b]}" && wait "${node_pid[b]}" 2>/dev/null
out=$("$load" write 1000 --first 2000 --server "127.0.0.1:${udp_port[a]}" --json -q 2>&1)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && pass "writes_while_node_b_is_down (1000)" || fail writes_while_node_b_is_down "${out:0:400}"
start_node b >"$tmp/start.out" && pass "node_b_restarted_on_its_data ($(grep -o 'applying from sequence [0-9]*' "$tmp/b/daemon.log" | tail -1))" ||
  fail node_b_restarted_on_its_data "$(cat "$tmp/start.out")"
until_applied b 1000
expect_right node_b_caught_up_exactly b 500 2500 6000   # applied: since its restart

# a syncs, takes 500 more through b, and is killed with -9 before its next
# sync: at restart its positions say where its disk stopped, and the stream
# gives it the rest, each once.
"$ctl" --socket "$tmp/a/ctl.sock" sync >/dev/null
out=$("$load" write 500 --first 3000 --server "127.0.0.1:${udp_port[b]}" --json -q 2>&1)
until_applied a 4000
kill -9 "${node_pid[a]}" && wait "${node_pid[a]}" 2>/dev/null
start_node a >"$tmp/start.out" && pass "node_a_restarted_after_kill_9 ($(grep -o 'applying from sequence [0-9]*' "$tmp/a/daemon.log" | tail -1))" ||
  fail node_a_restarted_after_kill_9 "$(cat "$tmp/start.out")"
until_applied a 500
expect_right node_a_replayed_exactly_after_kill_9 a 500 3000 6000

# A strong hit refreshes a record's life on every node: node c, which
# accepted no write, proposes refreshes for hits on records older than
# expire / 10 (9 s here), and node a applies them from the stream.
out=$("$load" write 100 --first 5000 --server "127.0.0.1:${udp_port[a]}" --json -q 2>&1)
until_applied c 2600
sleep 9.5
refreshes() { total_figure "$1" refreshes; }  # records refreshed there, all workers
before=$(refreshes a)
expect_right hits_on_node_c_after_the_refresh_period c 5000 100 300
for _ in $(seq 100); do [ "$(refreshes a)" -gt "$before" ] && break; sleep 0.05; done
proposed_c=$(cluster_figure c proposed)
[ "$(refreshes a)" -gt "$before" ] && [ "$proposed_c" -gt 0 ] &&
  pass "refreshes_of_hits_on_c_applied_on_a (a refreshed $before -> $(refreshes a); c proposed $proposed_c)" ||
  fail refreshes_of_hits_on_c_applied_on_a "a refreshed $before -> $(refreshes a); c proposed $proposed_c"

# Node a killed with -9 while node b takes 3,000 WRITEs (1,000 a second)
# and restarted: b acknowledges them all, a catches up from its stored
# positions, and the three nodes' synced dumps are identical.
"$load" write 3000 --first 10000 --rate 1000 --server "127.0.0.1:${udp_port[b]}" --json -q >"$tmp/kill.json" 2>&1 &
load_pid=$!
sleep 1
kill -9 "${node_pid[a]}" && wait "${node_pid[a]}" 2>/dev/null
sleep 0.5
start_node a >"$tmp/start.out" || fail node_a_restarted_under_load "$(cat "$tmp/start.out")"
wait "$load_pid"
read -r wrong lost answered <<<"$(verdict "$(cat "$tmp/kill.json")")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = 3000 ] &&
  pass "writes_to_b_while_a_is_killed_all_acknowledged (3000)" || fail writes_to_b_while_a_is_killed_all_acknowledged "$(head -c 400 "$tmp/kill.json")"
sleep 1.2  # the stream's last sequence is looked up once a second: now it counts the 3,000
last=$(cluster_figure b stream_last_sequence)
for _ in $(seq 200); do caught_up a "$last" && caught_up c "$last" && break; sleep 0.05; done
expect_right node_a_has_every_write_it_missed a 10000 3000 3000
records=$(same_dumps a b c) && pass "dumps_identical_after_kill_9_under_load ($records records on a, b and c)" ||
  fail dumps_identical_after_kill_9_under_load "$records"

# The same WRITE (same tag) sent three times at once to node a and once to
# node b, as a retransmitting client or rspamd's learn to every server of
# its rule would: each is answered with success, and the value is added
# once (its stream message id is made of what the client sent).
same_write=$(python3 - "${udp_port[a]}" "${udp_port[b]}" "${udp_port[c]}" <<'PY'
import hashlib, socket, struct, sys, time
a, b, c = (int(p) for p in sys.argv[1:4])
digest = hashlib.sha512(b"the same write, four times").digest()
tag = 0x5EED0001
write = struct.pack("<BBBBiI", 4, 1, 0, 1, 5, tag) + digest   # WRITE flag 1 value 5
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(12)
for port in (a, a, a, b):
    s.sendto(write, ("127.0.0.1", port))
acks = 0
for _ in range(4):
    value, flag, _tag, prob = struct.unpack("<iIIf", s.recv(2048)[:16])
    acks += prob == 1.0 and value == 0
time.sleep(1)  # node c applies the record
s.sendto(struct.pack("<BBBBiI", 4, 0, 0, 0, 0, tag + 1) + digest, ("127.0.0.1", c))
value, flag, _tag, prob = struct.unpack("<iIIf", s.recv(2048)[:16])
print(acks, value, flag, prob)
PY
)
[ "$same_write" = "4 5 1 1.0" ] && pass "the_same_write_four_times_adds_once (4 acks; node c: value 5, flag 1, prob 1)" ||
  fail the_same_write_four_times_adds_once "acks, value, flag, prob on c: $same_write (expected 4 5 1 1.0)"

# A node whose capacity differs from the cluster's is refused at start, with
# both settings named: it would store updates the others refuse.
start_node d 2000000 >"$tmp/start.out"
wait "${node_pid[d]}" 2>/dev/null
if grep -q "differ from the cluster's" "$tmp/d/daemon.log" && ! kill -0 "${node_pid[d]}" 2>/dev/null; then
  pass "a_node_with_other_settings_is_refused ($(grep -o "this node's settings.*cluster's ([^)]*)" "$tmp/d/daemon.log" | head -1))"
else
  fail a_node_with_other_settings_is_refused "$(tail -3 "$tmp/d/daemon.log")"
fi
unset 'node_pid[d]'

# The stream's head purged (an operator's trim) while node c is stopped:
# c, which has not applied the records that are gone, refuses to start and
# says why, rather than skip them.
kill "${node_pid[c]}" && wait "${node_pid[c]}" 2>/dev/null
unset 'node_pid[c]'
out=$("$load" write 10 --first 20000 --server "127.0.0.1:${udp_port[a]}" --json -q 2>&1)
last=$(cluster_figure a stream_last_sequence)
for _ in $(seq 40); do [ "$(cluster_figure a stream_last_sequence)" -gt "$last" ] && break; sleep 0.1; done
last=$(cluster_figure a stream_last_sequence)
purged=$("$probe" --servers "$servers" --stream SHINGLED_FUZZY --existing purge-below "$last" 2>&1)
start_node c >"$tmp/start.out"
wait "${node_pid[c]}" 2>/dev/null
if grep -q "no longer holds sequences .* which this node has not applied" "$tmp/c/daemon.log" && ! kill -0 "${node_pid[c]}" 2>/dev/null; then
  pass "a_node_behind_a_purged_stream_is_refused ($(grep -o 'no longer holds sequences [0-9]* to [0-9]*' "$tmp/c/daemon.log" | tail -1))"
else
  fail a_node_behind_a_purged_stream_is_refused "$purged; $(tail -2 "$tmp/c/daemon.log")"
fi
unset 'node_pid[c]'

finish
