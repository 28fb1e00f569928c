#!/usr/bin/env bash
# A shingled node cut off from its cluster by a network partition, and back
# (docs/cluster.md, "Failures"). Root only: two network namespaces of the
# test's own joined by a veth pair. The three NATS servers and nodes a and b
# run in one; node c, and the clients that ask it, in the other:
#  - before the cut, node c applies what node a is written, across the link;
#  - link down (c's end): node a takes 2,000 more WRITEs, all acknowledged;
#    node c goes on answering CHECKs of what it had, and refuses WRITEs
#    (500, none lost, none acknowledged);
#  - link up: node c reconnects, reads the stream from where it stopped,
#    answers every CHECK of the 2,000 right, takes writes again, and the
#    three nodes' synced dumps are identical.
# Usage: cluster_partition_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
[ "$(id -u)" = 0 ] || { fail needs_root "network namespaces need root (CI runs as root)"; finish; exit; }

id=$$
NS_M="cp${id}m"   # the NATS servers, nodes a and b
NS_C="cp${id}c"   # node c and its clients
IF_M="cp${id}v0"
IF_C="cp${id}v1"
NET=10.198.$((id % 200))
NATS_HOST=$NET.1
CLUSTER_NETNS=$NS_M
. "$here/lib_cluster.sh"
NODE_EXPIRE=1h
cluster_init a b c
node_netns[c]=$NS_C
netns_cleanup() {
  cluster_cleanup
  ip netns del "$NS_M" 2>/dev/null
  ip netns del "$NS_C" 2>/dev/null
}
trap netns_cleanup EXIT

ip netns add "$NS_M" && ip netns add "$NS_C" &&
  ip link add "$IF_M" netns "$NS_M" type veth peer name "$IF_C" netns "$NS_C" &&
  ip -n "$NS_M" addr add "$NET.1/24" dev "$IF_M" && ip -n "$NS_C" addr add "$NET.2/24" dev "$IF_C" &&
  ip -n "$NS_M" link set lo up && ip -n "$NS_C" link set lo up &&
  ip -n "$NS_M" link set "$IF_M" up && ip -n "$NS_C" link set "$IF_C" up ||
  { fail network_set_up "could not create the namespaces and veth pair"; finish; exit; }

for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass "nats_cluster_ready ($ready)" || { fail nats_cluster_ready "$ready"; finish; exit; }
for n in a b c; do
  start_node "$n" >"$tmp/start.out" && pass "node_${n}_started" || { fail "node_${n}_started" "$(cat "$tmp/start.out")"; finish; exit; }
done
write_to() {  # node count first [timeout]: shingle-load's JSON report
  in_netns "$(ns_of "$1")" "$load" write "$2" --first "$3" --timeout "${4:-5}" --server "127.0.0.1:${udp_port[$1]}" --json -q 2>/dev/null
}

out=$(write_to a 1000 0)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = 1000 ] && pass "writes_before_the_cut (1000)" ||
  fail writes_before_the_cut "${out:0:300}"
until_applied c 1000 && expect_right node_c_applies_across_the_link c 0 1000 2000 ||
  fail node_c_applies_across_the_link "applied $(applied c)"

# ---------------------------------------------------------------- the cut
ip -n "$NS_C" link set "$IF_C" down
out=$(write_to a 2000 1000)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = 2000 ] && pass "node_a_takes_writes_while_c_is_cut_off (2000)" ||
  fail node_a_takes_writes_while_c_is_cut_off "${out:0:300}"
expect_right node_c_answers_what_it_had_while_cut_off c 0 1000 2000
out=$(write_to c 50 5000 15)
read -r wrong lost answered <<<"$(verdict "$out")"
refused=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["wrong_by"]["refused"])' "$out" 2>/dev/null)
[ "$lost" = 0 ] && [ "$answered" = 50 ] && [ "$refused" = 50 ] &&
  pass "node_c_refuses_writes_while_cut_off (50 of 50 refused with 500, none lost)" ||
  fail node_c_refuses_writes_while_cut_off "refused ${refused:-?}: ${out:0:300}"

# ---------------------------------------------------------------- the link back
ip -n "$NS_C" link set "$IF_C" up
last=3000  # at least: the 3,000 acknowledged (and any of the 50 refused that went out)
for _ in $(seq 600); do caught_up c "$last" && break; sleep 0.1; done
caught_up c "$last" &&
  pass "node_c_reads_the_stream_again (to sequence $(cluster_figure c last_applied); restarted reads $(cluster_figure c read_errors))" ||
  fail node_c_reads_the_stream_again "applied $(cluster_figure c last_applied) of $last; $(tail -2 "$tmp/c/daemon.log")"
expect_right node_c_answers_the_writes_it_missed c 1000 2000 4000
for _ in $(seq 100); do [ "$(cluster_figure c writable)" = 1 ] && break; sleep 0.1; done
out=$(write_to c 100 6000)
read -r wrong lost answered <<<"$(verdict "$out")"
[ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = 100 ] && pass "node_c_takes_writes_again (100)" ||
  fail node_c_takes_writes_again "${out:0:300}"
for _ in $(seq 100); do caught_up a 3100 && caught_up b 3100 && caught_up c 3100 && break; sleep 0.1; done
# The 50 WRITEs refused while cut off may still be stored: the client
# library may have held them and sent them once connected again, under
# the same ids (docs/cluster.md, "Failures").
records=$(same_dumps a b c)
[ $? = 0 ] && [ "$records" -ge 3100 ] && [ "$records" -le 3150 ] &&
  pass "dumps_identical ($records records on a, b and c)" || fail dumps_identical "$records"
finish
