#!/usr/bin/env bash
# A REAL rspamd 3.4 with three shingled nodes (a, b, c) of one cluster
# (docs/cluster.md) on a three-server NATS JetStream, all on private loopback
# ports. rspamd's fuzzy_check rule "cluster" lists the three nodes, as a site
# would: rspamd sends every learn to each server of the rule and spreads
# checks round-robin. Three read-only rules, one per node, ask each node on
# its own, so every scan shows what each node answers:
#  - before any learn nothing matches anywhere;
#  - `rspamc fuzzy_add` of msg1, msg4 (flag 1) and msg3 (flag 2) reaches
#    all three nodes, and the stream stores each learn once (its message id
#    is made of what rspamd sent): the value is added once. Every node then
#    finds them: exact hits (prob 1) and the near-duplicates msg2 and msg5
#    by shingles, with the same digest, prob and score on each node;
#  - `rspamc fuzzy_del` of msg1 takes msg1 and msg2 off every node;
#  - after a sync, the three nodes' `shinglectl dump` are identical.
# Usage: rspamd_cluster_test.sh --build BUILD_DIR [--keep]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib_rspamd.sh"

build=build
MODE=shingled; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""; SYNC=1; WRITE_WAIT=0
VECTORS="${SHINGLED_VECTORS:-}"; START_TIMEOUT=20; RT=5; TRACE=0; KEEP=0; FUZZY_TIMEOUT=2s
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build="${2:?--build needs a dir}"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown argument: $1 (usage: rspamd_cluster_test.sh --build BUILD_DIR [--keep])" ;;
    esac
done
SHINGLED="$build/src/daemon/shingled"
lib_check_env nats-server
lib_setup rspamd-cluster-test
. "$here/lib_cluster.sh"
NODE_EXPIRE=1h
cluster_init a b c
trap 'cluster_cleanup; cleanup' EXIT
read -r P_NORMAL P_CTRL <<<"$(free_ports 2)"
lib_make_mails

for i in 0 1 2; do start_nats "$i"; done
ready=$(nats_ready) && pass nats_cluster_ready "$ready" || { fail nats_cluster_ready "$ready"; finish; }
for n in a b c; do
    start_node "$n" >"$TMP/start.out" && pass "node_${n}_started" || { fail "node_${n}_started" "$(cat "$TMP/start.out")"; finish; }
done

node() { echo "127.0.0.1:${udp_port[$1]}"; }
RSPAMD_SYMBOLS='    FUZZY_DENIED_CLUSTER { weight = 10.0; description = "flag 1, the cluster rule"; }
    FUZZY_WHITE_CLUSTER { weight = -5.0; description = "flag 2, the cluster rule"; }'
RSPAMD_RULES="$(plain_fuzzy_rule cluster "$(node a),$(node b),$(node c)" "FUZZY_DENIED_CLUSTER:1 FUZZY_WHITE_CLUSTER:2")"
for n in a b c; do
    N=${n^^}
    RSPAMD_SYMBOLS+="
    FUZZY_DENIED_$N { weight = 10.0; description = \"flag 1, node $n alone\"; }
    FUZZY_WHITE_$N { weight = -5.0; description = \"flag 2, node $n alone\"; }"
    # read_only: learns go through the cluster rule only.
    RSPAMD_RULES+="
$(plain_fuzzy_rule "node_$n" "$(node "$n")" "FUZZY_DENIED_$N:1 FUZZY_WHITE_$N:2" | sed 's/read_only = false/read_only = true/')"
done
start_rspamd

echo "== before any learn"
for m in msg1 msg2 msg3 msg4 msg5 msg6; do expect_none "no_symbol_before_add_$m" "$m.eml"; done

echo "== learns through the cluster rule"
fuzzy_op add_msg1 fuzzy_add 1 10 msg1.eml; H1=$HASHES
fuzzy_op add_msg4 fuzzy_add 1 10 msg4.eml; H4=$HASHES
fuzzy_op add_msg3 fuzzy_add 2 10 msg3.eml; H3=$HASHES
# rspamd sends every learn to each server of the rule (its fuzzy storage
# does not replicate), so each node gets all three: the message id made of
# what rspamd sent lets JetStream store each learn once.
proposed=$(for n in a b c; do cluster_figure "$n" proposed; done | tr '\n' ' ')
for _ in $(seq 40); do [ "$(cluster_figure a stream_last_sequence)" = 3 ] && break; sleep 0.1; done
records=$(cluster_figure a stream_last_sequence)
[ "$proposed" = "3 3 3 " ] && [ "$records" = 3 ] &&
    pass each_learn_stored_once "rspamd sent each learn to every node (proposed by a, b, c: $proposed); the stream holds $records records" ||
    fail each_learn_stored_once "proposed by a, b, c: $proposed (expected 3 3 3); stream records $records (expected 3)"
for n in a b c; do until_applied "$n" 3 || fail "node_${n}_applied_the_learns" "applied $(applied "$n")"; done

# expect_on_every_node NAME MAIL SYMBOL_STEM DIGEST: each node's own rule
# answers the mail with DIGEST, and all three with the same option and score.
expect_on_every_node() {
    local name=$1 mail=$2 stem=$3 digest=$4 n N want="" got
    scan "$mail" || { fail "$name" "scan of $mail failed: $SCAN"; return; }
    for n in a b c; do
        N=${n^^}
        got=$(sym_line "${stem}_$N" | awk '{print $2, $3}')
        parse_opt "${stem}_$N"
        if [ -z "$got" ] || [ "$OPT_DIGEST" != "${digest:0:10}" ]; then
            fail "$name" "node $n: expected ${stem}_$N with digest ${digest:0:10}, seen: $(seen)"
            return
        fi
        [ -z "$want" ] && want=$got
        if [ "$got" != "$want" ]; then
            fail "$name" "node $n answers '$got', node a '$want'"
            return
        fi
    done
    [ -n "$(sym_line "${stem}_CLUSTER")" ] || { fail "$name" "no ${stem}_CLUSTER from the cluster rule: $(seen)"; return; }
    pass "$name" "$mail on a, b and c: $want"
}
echo "== every node finds them"
expect_on_every_node exact_msg1_on_every_node msg1.eml FUZZY_DENIED "$H1"
parse_opt FUZZY_DENIED_C
exp=$(py score 10 10 1)
py cmp "$SCORE" eq "$exp" 0.02 && pass value_added_once "score $SCORE: the value 10 of one learn" ||
    fail value_added_once "score $SCORE, expected $exp (value 10, prob 1): the learn was applied more than once"
expect_on_every_node exact_msg4_on_every_node msg4.eml FUZZY_DENIED "$H4"
expect_on_every_node exact_msg3_on_every_node msg3.eml FUZZY_WHITE "$H3"
expect_on_every_node near_msg2_by_shingles_on_every_node msg2.eml FUZZY_DENIED "$H1"
parse_opt FUZZY_DENIED_B
py cmp "$OPT_PROB" gt 0.5 && py cmp "$OPT_PROB" lt 1.0 && pass near_hit_prob_is_a_shingle_vote "msg2: prob $OPT_PROB on node b" ||
    fail near_hit_prob_is_a_shingle_vote "msg2: prob $OPT_PROB on node b"
expect_on_every_node near_msg5_by_shingles_on_every_node msg5.eml FUZZY_DENIED "$H4"
expect_none unknown_msg6_nowhere msg6.eml

echo "== a delete through the cluster rule"
fuzzy_op del_msg1 fuzzy_del 1 "" msg1.eml
for n in a b c; do until_applied "$n" 4 || fail "node_${n}_applied_the_delete" "applied $(applied "$n")"; done
for m in msg1 msg2; do
    if scan "$m.eml" && [ -z "$(echo "$SCAN" | grep '^FUZZY_DENIED')" ]; then
        pass "${m}_gone_from_every_node" "$(seen)"
    else
        fail "${m}_gone_from_every_node" "$(seen)"
    fi
done
expect_on_every_node msg4_kept_on_every_node msg4.eml FUZZY_DENIED "$H4"

if records=$(same_dumps a b c) && [ "$records" = 2 ]; then
    pass dumps_identical "2 records on a, b and c"
else
    fail dumps_identical "$records (expected 2 records, identical)"
fi
finish
