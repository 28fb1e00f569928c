#!/usr/bin/env bash
# Bootstrapping a wiped node from a cluster snapshot plus the stream
# (docs/cluster.md, "Bootstrap"), on a three-server NATS JetStream cluster
# started here on private loopback ports:
#  - node a takes 3,000 WRITEs and syncs; `shinglectl cluster snapshot`
#    stores its database in the cluster (beside the running daemon) and
#    says from which stream sequence a node started from it must read;
#  - node a takes 1,000 more, and the stream's records before that sequence
#    are purged: only the snapshot holds them now;
#  - node b, wiped and started again, bootstraps from the snapshot, reads
#    the stream from there, answers every CHECK of the 4,000 right, and its
#    synced dump is identical to node a's;
#  - a second snapshot replaces the first (the stream keeps one);
#  - periodic snapshots (snapshot_period = 10s): at each period one node of
#    the two claims it and takes one, the other leaves it; the update
#    stream is then purged below the previous snapshot's first needed
#    sequence; node b wiped again bootstraps from a periodic snapshot and
#    converges;
#  - `shinglectl cluster layout`: none at first; a first layout of three
#    members, read back; a fourth member moves only its own share of the
#    partition copies, and the running nodes read it within seconds; a
#    change of the partition count is refused.
# Usage: cluster_snapshot_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
. "$here/lib_cluster.sh"
NODE_EXPIRE=1h
cluster_init a b
for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass "nats_cluster_ready ($ready)" || { fail nats_cluster_ready "$ready"; finish; exit; }
for n in a b; do
  start_node "$n" >"$tmp/start.out" && pass "node_${n}_started" || { fail "node_${n}_started" "$(cat "$tmp/start.out")"; finish; exit; }
done
write_to_a() {  # count first
  local out wrong lost answered
  out=$("$load" write "$1" --first "$2" --server "127.0.0.1:${udp_port[a]}" --json -q 2>/dev/null)
  read -r wrong lost answered <<<"$(verdict "$out")"
  [ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = "$1" ]
}
write_to_a 3000 0 && until_applied b 3000 && pass "writes_to_a (3000, applied on b)" || fail writes_to_a "applied on b: $(applied b)"
"$ctl" --socket "$tmp/a/ctl.sock" sync >/dev/null
snap=$("$ctl" --config "$tmp/a/shingled.conf" cluster snapshot --json 2>&1)
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2" 2>/dev/null; }
first_needed=$(field "$snap" first_needed)
records=$(field "$snap" records)
# 3,000 fuzzy records, 64 shard positions and the placement seed
[ "$records" = 3065 ] && [ "$first_needed" -gt 1 ] 2>/dev/null && [ "$first_needed" -le 3001 ] &&
  pass "snapshot_taken_beside_the_daemon ($snap)" || fail snapshot_taken_beside_the_daemon "$snap"

write_to_a 1000 3000 && until_applied b 4000 && pass "more_writes_after_the_snapshot (1000)" ||
  fail more_writes_after_the_snapshot "applied on b: $(applied b)"
purged=$("$probe" --servers "$servers" --stream SHINGLED_FUZZY --existing purge-below "$first_needed" 2>&1)
[[ $purged == *purged_below* ]] && pass "stream_purged_below_the_snapshot (sequence $first_needed)" ||
  fail stream_purged_below_the_snapshot "$purged"

kill "${node_pid[b]}" && wait "${node_pid[b]}" 2>/dev/null
rm -rf "$tmp/b/db"
start_node b >"$tmp/start.out"
line=$(grep -o 'bootstrapped from snapshot .*' "$tmp/b/daemon.log" | tail -1)
[ -n "$line" ] && pass "wiped_node_b_bootstraps_from_the_snapshot ($line)" ||
  fail wiped_node_b_bootstraps_from_the_snapshot "$(cat "$tmp/start.out"; tail -3 "$tmp/b/daemon.log")"
for _ in $(seq 200); do caught_up b 4000 && break; sleep 0.05; done
caught_up b 4000 && pass "node_b_reads_the_stream_from_the_snapshot_on (to $(cluster_figure b last_applied); applied $(cluster_figure b applied))" ||
  fail node_b_reads_the_stream_from_the_snapshot_on "applied $(cluster_figure b last_applied) of $(cluster_figure b stream_last_sequence)"
expect_right node_b_answers_all_4000_right b 0 4000 8000
records=$(same_dumps a b) && [ "$records" = 4000 ] && pass "dumps_identical ($records records on a and b)" ||
  fail dumps_identical "$records"

# A second snapshot replaces the first: one manifest, one set of chunks.
snap2=$("$ctl" --config "$tmp/b/shingled.conf" cluster snapshot --json 2>&1)
[ "$(field "$snap2" records)" = 4065 ] && [ "$(field "$snap2" id)" != "$(field "$snap" id)" ] &&
  pass "a_second_snapshot_replaces_the_first (from node b: $(field "$snap2" records) records)" ||
  fail a_second_snapshot_replaces_the_first "$snap2"

# Periodic snapshots, taken by the daemons themselves.
status_of() {  # node key [sub-key]
  "$ctl" --socket "$tmp/$1/ctl.sock" cluster status --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin)[sys.argv[1]]; print(d[sys.argv[2]] if len(sys.argv) > 2 else d)' "$2" ${3:+"$3"}
}
taken_in_all() {  # key: the snapshots section's key summed over a and b
  echo $(( $(status_of a snapshots "$1") + $(status_of b snapshots "$1") ))
}
for n in a b; do
  "$ctl" --socket "$tmp/$n/ctl.sock" sync >/dev/null
  kill "${node_pid[$n]}" && wait "${node_pid[$n]}" 2>/dev/null
done
NODE_SNAPSHOT_PERIOD=10s
for n in a b; do start_node "$n" >"$tmp/start.out" || fail "node_${n}_restarted" "$(cat "$tmp/start.out")"; done
[ "$(status_of a snapshots period_seconds)" = 10 ] && pass "the_period_is_in_cluster_status" ||
  fail the_period_is_in_cluster_status "$("$ctl" --socket "$tmp/a/ctl.sock" cluster status)"
# Two periods, each claimed by one node: wait until two were taken.
for _ in $(seq 300); do [ "$(taken_in_all taken_here)" -ge 2 ] && break; sleep 0.1; done
taken=$(taken_in_all taken_here) elsewhere=$(taken_in_all taken_elsewhere) failed=$(taken_in_all failed)
[ "$taken" -ge 2 ] && [ "$failed" = 0 ] && pass "one_node_takes_each_period (taken $taken, left to the other $elsewhere, failed $failed)" ||
  fail one_node_takes_each_period "taken $taken, elsewhere $elsewhere, failed $failed; $(grep -h 'snapshot' "$tmp"/[ab]/daemon.log | tail -4)"
# The claim is a compare-and-set: no period is taken by both, so every
# period one node took is one the other left (or had not looked at yet).
[ "$elsewhere" -le "$taken" ] && [ "$elsewhere" -ge $((taken - 2)) ] &&
  pass "no_period_taken_twice (taken $taken, left $elsewhere)" || fail no_period_taken_twice "taken $taken, left $elsewhere"
purged=$(( $(status_of a snapshots stream_purged_below) + $(status_of b snapshots stream_purged_below) ))
for _ in $(seq 40); do first=$(status_of a stream_first_sequence); [ "$first" -gt 1 ] && break; sleep 0.1; done
[ "$purged" -gt 1 ] && [ "$first" -ge "$(field "$snap2" first_needed)" ] &&
  pass "the_stream_is_purged_below_the_previous_snapshot (first kept sequence $first)" ||
  fail the_stream_is_purged_below_the_previous_snapshot "purged below $purged, stream first $first, snap2 $(field "$snap2" first_needed)"
write_to_a 500 4000 && until_applied b 500 && pass "writes_between_periodic_snapshots (500, applied on b)" || fail writes_between_periodic_snapshots "applied on b: $(applied b)"
for n in a b; do "$ctl" --socket "$tmp/$n/ctl.sock" sync >/dev/null; done
before=$(taken_in_all taken_here)
for _ in $(seq 150); do [ "$(taken_in_all taken_here)" -gt "$before" ] && break; sleep 0.1; done
kill "${node_pid[b]}" && wait "${node_pid[b]}" 2>/dev/null
rm -rf "$tmp/b/db"
start_node b >"$tmp/start.out"
line=$(grep -o 'bootstrapped from snapshot .*' "$tmp/b/daemon.log" | tail -1)
id=$(grep -o 'snapshot [^ ]* taken' "$tmp"/[ab]/daemon.log | tail -1 | cut -d' ' -f2)
[ -n "$id" ] && [[ $line == *"$id"* ]] && pass "a_wiped_node_bootstraps_from_a_periodic_snapshot ($line)" ||
  fail a_wiped_node_bootstraps_from_a_periodic_snapshot "latest taken: $id; $line; $(tail -3 "$tmp/b/daemon.log")"
for _ in $(seq 200); do caught_up b 4500 && break; sleep 0.05; done
records=$(same_dumps a b) && [ "$records" = 4500 ] && pass "dumps_identical_after_it ($records records)" ||
  fail dumps_identical_after_it "$records"

# The partition layout of counters and buckets, in the cluster's bucket.
layout() { "$ctl" --config "$tmp/a/shingled.conf" cluster layout "$@"; }
out=$(layout 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == *"no partition layout is set yet"* ]] && pass "no_layout_at_first ($out)" ||
  fail no_layout_at_first "rc=$rc $out"
out=$(layout --members c,a,b --partitions 64 --json 2>&1); rc=$?
[ $rc = 0 ] && [ "$(field "$out" partitions)" = 64 ] && [ "$(field "$out" moved_slots)" = 192 ] &&
  pass "a_first_layout_is_stored ($out)" || fail a_first_layout_is_stored "rc=$rc $out"
out=$(layout 2>&1); rc=$?
[ $rc = 0 ] && [[ $out == *"64 partitions, 3 replicas each, 3 members"* ]] &&
  [ "$(grep -c 'replica of 64 partitions' <<<"$out")" = 3 ] && pass "the_layout_reads_back" ||
  fail the_layout_reads_back "rc=$rc $out"
# A fourth member takes about a quarter of the 192 copies; nothing else moves.
out=$(layout --members a,b,c,d --json 2>&1); rc=$?
moved=$(field "$out" moved_slots)
[ $rc = 0 ] && [ "$moved" -ge 28 ] && [ "$moved" -le 68 ] 2>/dev/null &&
  pass "a_fourth_member_moves_only_its_share ($moved of 192 copies)" || fail a_fourth_member_moves_only_its_share "rc=$rc $out"
# Running nodes read the layout within a few seconds, and show their share.
revision=$(field "$out" revision)
held=$(python3 -c 'import json,sys; print([m["replica_of"] for m in json.loads(sys.argv[1])["members"] if m["name"] == "a"][0])' "$out" 2>/dev/null)
for _ in $(seq 100); do [ "$(status_of a partitions revision 2>/dev/null)" = "$revision" ] && break; sleep 0.1; done
[ "$(status_of a partitions revision 2>/dev/null)" = "$revision" ] && [ "$(status_of a partitions held_here)" = "$held" ] &&
  pass "a_running_node_reads_the_new_layout (revision $revision, holds $held of 64)" ||
  fail a_running_node_reads_the_new_layout "want revision $revision holding $held: $(status_of a partitions)"
out=$(layout --members a,b,c,d --partitions 128 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == *"has 64 partitions, fixed"* ]] && pass "the_partition_count_is_fixed ($out)" ||
  fail the_partition_count_is_fixed "rc=$rc $out"
finish
