#!/usr/bin/env bash
# Rate-limit buckets in a cluster (docs/cluster.md, the buckets' build):
# three nodes, each serving rate limits, on a three-server NATS JetStream
# cluster started here on private loopback ports.
#  - two clients limited by one bucket through two different nodes, at
#    once, are admitted exactly `burst` times between them (every replica
#    applies the same calls in the same stream order, and each answer is
#    the one the accepting node's own apply computed);
#  - the same for rspamd-shaped messages (kind 3: reserve, then commit or
#    release as a second record), and for the envelope rules' buckets
#    (kind 1), whose keys pass 255 bytes, and for messages to 16
#    recipients, whose 64 buckets make records past a ring slot's 16 KB;
#  - every node then reads the same levels;
#  - a node killed with -9 after a sync, while the others go on deciding,
#    reads exactly the replicated levels after its restart: nothing applied
#    twice (the bucket shards' stored stream positions), nothing missed;
#  - a node wiped and started again bootstraps from another's snapshot
#    (the buckets and the secret their ids are keyed by) and reads every
#    bucket's level;
#  - with no stream leader a change is answered at once as not stored (the
#    message passes), and peeks go on;
#  - dynamic factors are applied as the record carries them, so a node
#    whose registry of kept sets is full reads what the others do;
#  - a NATS server whose max_payload cannot carry the largest record is
#    refused at start.
# Usage: cluster_ratelimit_test.sh --build BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_check.sh"
parse_build_arg "$@"
. "$here/lib_cluster.sh"
rl="$here/ratelimit_udp.py"
export NODE_RATELIMIT=1
# The envelope rules (kind 1): 10 messages a day to each recipient, and
# from one sender at one IP to it three buckets more (10, 11 and 12 a
# day); each of a message's first 16 recipients forms its own four, so a
# message to 16 forms 64 buckets (the most there are) with keys of up to
# ~340 bytes.
rules='ratelimit { compat = "per_recipient"; max_rcpts = 16;
  rates { to = "10 / 1d"; to_ip_from = { bucket = [ "10 / 1d", "11 / 1d", "12 / 1d" ]; } } }'

cluster_init a b c
for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass "nats_cluster_ready ($ready)" || { fail nats_cluster_ready "$ready"; finish; exit; }
for n in a b c; do
  start_node "$n" "" "$rules" >"$tmp/start.out" && pass "node_${n}_started" || fail "node_${n}_started" "$(cat "$tmp/start.out")"
done

# expect_level NAME KEY BURST WANT [NODES]: every node's peek reads WANT
# within 10 s.
expect_level() {
  local name=$1 key=$2 burst=$3 want=$4 nodes=${5:-a b c} n got=""
  for n in $nodes; do
    for _ in $(seq 100); do
      got=$(python3 "$rl" peek "${rl_port[$n]}" "$key" "$burst" 0)
      [ "$got" = "$want" ] && break
      sleep 0.1
    done
    [ "$got" = "$want" ] || { fail "$name" "node $n reads level '$got', want '$want'"; return; }
  done
  pass "$name"
}
# at_once WHAT KEY BURST COUNT NODE NODE: COUNT calls of ratelimit_udp.py's
# WHAT through each of the two nodes at the same time; prints the sums of
# the two clients' tallies: "allowed limited other" (other: not stored or
# unanswered), then each client's own.
at_once() {
  local what=$1 key=$2 burst=$3 count=$4 p1 p2
  python3 "$rl" "$what" "${rl_port[$5]}" "$key" "$burst" 0 "$count" >"$tmp/1.out" &
  p1=$!
  python3 "$rl" "$what" "${rl_port[$6]}" "$key" "$burst" 0 "$count" >"$tmp/2.out" &
  p2=$!
  wait "$p1"
  wait "$p2"
  cat "$tmp/1.out" "$tmp/2.out" | awk '{a += $1; l += $2; o += $3 + $4} END {printf "%d %d %d", a, l, o}'
  echo " ($5: $(cat "$tmp/1.out"), $6: $(cat "$tmp/2.out"))"
}

# One bucket, burst 50 (never drains), 40 calls through node a and 40
# through node b at once.
got=$(at_once bucket shared 50 40 a b)
[ "${got%% (*}" = "50 30 0" ] &&
  pass "one bucket through two nodes at once admits exactly its burst (50 of 80)" ||
  fail "one bucket through two nodes at once admits exactly its burst (50 of 80)" "allowed, limited, other: $got"
expect_level "every node reads the shared bucket's level (50)" shared 50 50

# rspamd-shaped messages: a reservation, then its commit as a second record.
got=$(at_once message msgs 20 15 b c)
[ "${got%% (*}" = "20 10 0" ] &&
  pass "messages through two nodes at once: exactly the bucket's burst accepted (20 of 30)" ||
  fail "messages through two nodes at once: exactly the bucket's burst accepted (20 of 30)" "accepted, limited, other: $got"
expect_level "every node reads the messages' bucket committed (20, no reservation left)" msgs 20 20

# The rules' buckets: two recipients whose addresses (255 bytes, the
# protocol's longest) differ only in their last character, 12 messages each
# through a different node at once. Their keys (the address after the
# rule's prefix) pass 255 bytes, and differ past it: each is its own bucket
# of 10, on every node.
long=$(printf 'r%.0s' $(seq 243))@example.ne
python3 "$rl" envelope "${rl_port[a]}" "${long}t" 12 >"$tmp/e1.out" &
p1=$!
python3 "$rl" envelope "${rl_port[b]}" "${long}u" 12 >"$tmp/e2.out" &
p2=$!
wait "$p1"
wait "$p2"
[ "$(cat "$tmp/e1.out")" = "10 2 0 0" ] && [ "$(cat "$tmp/e2.out")" = "10 2 0 0" ] &&
  pass "rule buckets with keys past 255 bytes stay apart through the stream (10 of 12 each)" ||
  fail "rule buckets with keys past 255 bytes stay apart through the stream (10 of 12 each)" \
    "node a: $(cat "$tmp/e1.out"), node b: $(cat "$tmp/e2.out")"
got=$(python3 "$rl" envelope "${rl_port[c]}" "${long}t" 1)
[ "$got" = "0 1 0 0" ] && pass "node c limits the first recipient too (its rule bucket replicated)" ||
  fail "node c limits the first recipient too (its rule bucket replicated)" "got '$got'"

proposed=$(total_figure a ratelimit_cluster_proposed)
[ "$proposed" = 52 ] && pass "node a proposed its 52 requests to the stream" ||
  fail "node a proposed its 52 requests to the stream" "ratelimit_cluster_proposed = $proposed"

# A message to 16 recipients forms 64 buckets, a stream record of ~21 KB:
# larger than a ring slot (16 KB), so it goes through the large slots,
# and it is limited exactly like a small one. 12 messages through node a
# and 12 through node b at once: exactly 10 accepted between them, none
# let through unlimited as "not stored" (which every one of them was
# while a record could hold only 16 KB).
python3 "$rl" envelope-many "${rl_port[a]}" 16 12 >"$tmp/m1.out" &
p1=$!
python3 "$rl" envelope-many "${rl_port[b]}" 16 12 >"$tmp/m2.out" &
p2=$!
wait "$p1"
wait "$p2"
got=$(paste -d' ' "$tmp/m1.out" "$tmp/m2.out" | awk '{ print $1 + $5, $2 + $6, $3 + $7, $4 + $8 }')
[ "$got" = "10 14 0 0" ] &&
  pass "messages to 16 recipients (64 buckets, ~21 KB records) through two nodes: exactly 10 of 24 accepted" ||
  fail "messages to 16 recipients (64 buckets, ~21 KB records) through two nodes: exactly 10 of 24 accepted" \
    "accepted, limited, not stored, unanswered: $got (node a: $(cat "$tmp/m1.out"), node b: $(cat "$tmp/m2.out"))"
# Many such requests at once on one node, each its own recipients: every
# one is limited by its own buckets (5 of 5 accepted), none refused for
# want of a slot for its large record.
clients=()
for k in $(seq 8); do
  python3 "$rl" envelope-many "${rl_port[a]}" 16 5 "p$k-" >"$tmp/par$k.out" &
  clients+=($!)
done
wait "${clients[@]}"
got=$(cat "$tmp"/par*.out | awk '{ a += $1; l += $2; n += $3; u += $4 } END { print a, l, n, u }')
[ "$got" = "40 0 0 0" ] && pass "8 clients at once through node a, 5 such messages each: all 40 accepted, none refused" ||
  fail "8 clients at once through node a, 5 such messages each: all 40 accepted, none refused" \
    "accepted, limited, not stored, unanswered: $got"
rcpt15="rcpt15-$(printf 'r%.0s' $(seq 84))@example.net"
got=$(python3 "$rl" envelope "${rl_port[c]}" "$rcpt15" 1)
[ "$got" = "0 1 0 0" ] && pass "node c limits the 16th recipient of those messages (its bucket replicated)" ||
  fail "node c limits the 16th recipient of those messages (its bucket replicated)" "got '$got'"

# Catch-up: 10 through a, a sync on a, 5 through b, kill -9 of a, 5 through
# c, a restarted: 20 on every node, none applied twice or missed.
check "10 calls through node a" test "$(python3 "$rl" bucket "${rl_port[a]}" replay 100 0 10)" = "10 0 0 0"
expect_level "every node reads 10" replay 100 10
check "node a synced" "$ctl" --socket "$tmp/a/ctl.sock" sync
check "5 calls through node b" test "$(python3 "$rl" bucket "${rl_port[b]}" replay 100 0 5)" = "5 0 0 0"
expect_level "node a reads 15 before its kill" replay 100 15 a
kill -9 "${node_pid[a]}" && wait "${node_pid[a]}" 2>/dev/null
expect_level "with node a killed, node c serves the replicated level (15)" replay 100 15 c
check "5 calls through node c while node a is down" test "$(python3 "$rl" bucket "${rl_port[c]}" replay 100 0 5)" = "5 0 0 0"
start_node a "" "$rules" >"$tmp/start.out" && pass "node a restarted after kill -9" || fail "node a restarted after kill -9" "$(cat "$tmp/start.out")"
expect_level "node a, restarted, reads exactly 20 (its synced 10, 10 replayed once)" replay 100 20
expect_level "and still the shared bucket's 50" shared 50 50 a

# Bootstrap: node a synced and snapshotted, node c wiped and started again:
# it takes the snapshot (buckets with the secret their ids are keyed by),
# then the stream, and reads every bucket's level.
check "node a synced for its snapshot" "$ctl" --socket "$tmp/a/ctl.sock" sync
snap=$("$ctl" --config "$tmp/a/shingled.conf" cluster snapshot --json 2>&1)
[[ $snap == *records* ]] && pass "node a's snapshot taken (buckets and their positions in it)" ||
  fail "node a's snapshot taken (buckets and their positions in it)" "$snap"
kill "${node_pid[c]}" && wait "${node_pid[c]}" 2>/dev/null
rm -rf "$tmp/c/db"
start_node c "" "$rules" >"$tmp/start.out" && grep -q "bootstrapped from snapshot" "$tmp/c/daemon.log" &&
  pass "node c, wiped, bootstraps from the snapshot" ||
  fail "node c, wiped, bootstraps from the snapshot" "$(cat "$tmp/start.out"; tail -3 "$tmp/c/daemon.log")"
expect_level "node c reads the replayed bucket (20)" replay 100 20 c
expect_level "node c reads the shared bucket (50)" shared 50 50 c
expect_level "node c reads the messages' bucket (20)" msgs 20 20 c

# No leader: two of the three NATS servers gone.
stop_nats 1
stop_nats 2
for _ in $(seq 200); do
  [ "$(cluster_figure b writable)" = 0 ] && break
  sleep 0.1
done
start=$(date +%s%N)
got=$(python3 "$rl" bucket "${rl_port[b]}" leaderless 10 0 1)
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$got" = "0 0 1 0" ] && [ "$ms" -lt 900 ] &&
  pass "with no stream leader a change is answered at once as not stored (${ms} ms)" ||
  fail "with no stream leader a change is answered at once as not stored" "got '$got' in ${ms} ms"
check "peeks go on without a leader" test "$(python3 "$rl" peek "${rl_port[b]}" shared 50 0)" = 50

# Dynamic factors: a replica applies a call with the factors its record
# carries, never through its own registry of kept sets, whose 256 fill in
# each node's arrival order. Node b's fill here with requests that never
# reach the stream (no leader); then 3 spam messages through node a with
# a new set (spam burst factor 0.5) leave the same capacity on both nodes
# (b used its config's factors, 0.98, while its registry decided).
got=$(python3 "$rl" dynamic "${rl_port[b]}" fill 100 2 0 257 1)
sets_full=$(total_figure b ratelimit_factor_sets_full)
[ "${got% *}" = "0 0 257 0" ] && [ "$sets_full" = 1 ] &&
  pass "node b's 256 kept factor sets taken (the 257th dropped)" ||
  fail "node b's 256 kept factor sets taken (the 257th dropped)" "got '$got', factor_sets_full $sets_full"
start_nats 1
start_nats 2
for _ in $(seq 300); do
  [ "$(cluster_figure a writable)" = 1 ] && [ "$(cluster_figure b writable)" = 1 ] && break
  sleep 0.1
done
got=$(python3 "$rl" dynamic "${rl_port[a]}" dyn 100 1 2 3 0)
[ "${got% *}" = "3 0 0 0" ] && pass "3 spam messages with their own factors through node a, once a leader is back" ||
  fail "3 spam messages with their own factors through node a, once a leader is back" "got '$got'"
cap_a=$(python3 "$rl" dynamic "${rl_port[a]}" dyn 100 2 0 1 0)
cap_b=$(python3 "$rl" dynamic "${rl_port[b]}" dyn 100 2 0 1 0)
[ "${cap_a##* }" = "${cap_b##* }" ] && [ "${cap_a##* }" = 12.5 ] &&
  pass "node b reads the capacity node a does (12.5: the record's factors, not b's registry)" ||
  fail "node b reads the capacity node a does (12.5: the record's factors, not b's registry)" \
    "node a: '$cap_a', node b: '$cap_b'"

# A NATS server whose max_payload (256 KB) cannot carry the largest bucket
# record: a node with rate limits refuses to start and says why, rather
# than having every such record retried until it times out.
read -r small_port udp_port[d] counter_port[d] rl_port[d] <<<"$(python3 "$here/free_ports.py" 4)"
mkdir -p "$tmp/small"
printf 'max_payload: 262144\njetstream { store_dir: "%s" }\n' "$tmp/small" >"$tmp/small.conf"
nats-server -a 127.0.0.1 -p "$small_port" -c "$tmp/small.conf" -l "$tmp/small.log" &
nats_pid[3]=$!
for _ in $(seq 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$small_port" \
    2>/dev/null && break
  sleep 0.05
done
servers="nats://127.0.0.1:$small_port"
if start_node d >"$tmp/start.out" 2>&1; then
  fail "a node with rate limits refuses a NATS server whose max_payload is too small" "it started"
else
  grep -q "max_payload is 262144 bytes" "$tmp/d/daemon.log" &&
    pass "a node with rate limits refuses a NATS server whose max_payload is too small" ||
    fail "a node with rate limits refuses a NATS server whose max_payload is too small" "$(tail -3 "$tmp/d/daemon.log")"
fi

finish
