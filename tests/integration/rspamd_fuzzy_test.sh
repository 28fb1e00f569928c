#!/usr/bin/env bash
# End-to-end test of a fuzzy storage server with a REAL rspamd 3.4 as the client.
#
# rspamd (normal worker + controller, fuzzy_check module) is started with a
# private configuration; its fuzzy_check rules point at the server under test.
# Mails are added/deleted with `rspamc fuzzy_add/fuzzy_del/fuzzy_delhash` and
# scanned with `rspamc symbols`; the symbols rspamd inserts show what the
# server answered. See tests/integration/README.md.
#
# Exit status: 0 if every check passed, 1 if a check failed, 2 on usage or
# set-up errors. The last line of output is always "N passed, M failed".

set -u
# shared helpers (temp dir, python helper, mails, servers, rspamd start-up, checks)
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"

usage() {
    cat <<'EOF'
Usage:
  rspamd_fuzzy_test.sh --shingled PATH      [options]   test shingled (PATH --config FILE)
  rspamd_fuzzy_test.sh --build BUILD_DIR    [options]   same with PATH = BUILD_DIR/src/daemon/shingled
  rspamd_fuzzy_test.sh --rspamd-fuzzy       [options]   test rspamd 3.4's own fuzzy storage (sqlite)
  rspamd_fuzzy_test.sh --server-cmd 'CMD'   [options]   test any server started by CMD

Server selection (exactly one):
  --shingled PATH        The script writes a UCL config per server instance and runs
                         `PATH --config DIR/shingled.conf` in the foreground.
  --build BUILD_DIR      Shorthand for --shingled BUILD_DIR/src/daemon/shingled (the
                         interface scripts/test.sh uses for every integration test).
  --shingled-conf TEXT   Extra UCL appended to every generated shingled config.
  --rspamd-fuzzy         rspamd's fuzzy storage worker, sqlite backend (reference run).
  --sync SEC             rspamd-fuzzy mode: storage `sync` interval (default 1).
  --server-cmd 'CMD'     Command run with `bash -c "exec CMD"`, in the foreground. The
                         placeholders {PORT} (UDP port to listen on 127.0.0.1), {ALLOW}
                         (the one address allowed to write), {DIR} (private empty dir)
                         and {NAME} are substituted. Two instances are started:
                         "main" (ALLOW=127.0.0.1) and "refuse" (ALLOW=127.0.0.2).

Options:
  --write-wait SEC       Sleep after each batch of writes/deletes before checking
                         (default: 0; rspamd-fuzzy: sync + 1.5, since rspamd applies
                         writes only at its next sync).
  --refusal-code N       Value expected in replies to refused writes (default: 503 for
                         shingled, whose reply codes are current rspamd's; 403 for
                         --rspamd-fuzzy, Debian's rspamd 3.4, and for any storage with 3.4's
                         codes, such as shingled with reply_codes = "legacy").
  --vectors DIR          Spec vectors dir holding mail/msg{1,2,3}.eml (default:
                         $SHINGLED_VECTORS, else <repo>/../shared/spec/vectors).
  --start-timeout SEC    Max wait for each server / rspamd to come up (default 20).
  --rspamc-timeout SEC   rspamc -t value (default 5); every call is also killed by
                         timeout(1) a few seconds later.
  --fuzzy-timeout T      fuzzy_check `timeout` (UCL time, default 2s as stock rspamd; with
                         1 retransmit, a server that never answers costs ~2*T per call).
  --trace                Put a logging UDP relay between rspamd and each server and
                         print every datagram (decoded header) at the end.
  --keep                 Keep the temp dir (configs, logs) and print its path.
  -h, --help             This text.
EOF
}


# ---------------------------------------------------------------- arguments
MODE=""; SHINGLED=""; SHINGLECTL=""; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=""; REFUSAL_CODE=""; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=20; RT=5; TRACE=0; KEEP=0; FUZZY_TIMEOUT=2s

while [ $# -gt 0 ]; do
    case "$1" in
        --shingled) MODE=shingled; SHINGLED="${2:?--shingled needs a path}"; shift 2 ;;
        --build) MODE=shingled; SHINGLED="${2:?--build needs a dir}/src/daemon/shingled"
                 SHINGLECTL="$2/tools/shinglectl"; shift 2 ;;
        --shingled-conf) SHINGLED_CONF_EXTRA="${2?}"; shift 2 ;;
        --rspamd-fuzzy) MODE=rspamd; shift ;;
        --server-cmd) MODE=cmd; SERVER_CMD="${2:?--server-cmd needs a command}"; shift 2 ;;
        --sync) SYNC="${2:?}"; shift 2 ;;
        --write-wait) WRITE_WAIT="${2:?}"; shift 2 ;;
        --refusal-code) REFUSAL_CODE="${2:?}"; shift 2 ;;
        --vectors) VECTORS="${2:?}"; shift 2 ;;
        --start-timeout) START_TIMEOUT="${2:?}"; shift 2 ;;
        --rspamc-timeout) RT="${2:?}"; shift 2 ;;
        --fuzzy-timeout) FUZZY_TIMEOUT="${2:?}"; shift 2 ;;
        --trace) TRACE=1; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
[ -n "$MODE" ] || { usage >&2; die "choose --shingled PATH, --rspamd-fuzzy or --server-cmd CMD"; }
if [ -z "$REFUSAL_CODE" ]; then
    REFUSAL_CODE=403
    # rspamd's own storage answers as its version does (docs/rspamd-versions.md)
    [ "$MODE" = rspamd ] && client_at_least 3.10 && REFUSAL_CODE=503
    # shingled's default codes are current rspamd's, unless the extra config asks for 3.4's
    [ "$MODE" = shingled ] && ! [[ "$SHINGLED_CONF_EXTRA" =~ reply_codes\ *=\ *\"legacy\" ]] && REFUSAL_CODE=503
fi

lib_check_env
lib_setup rspamd-fuzzy-test

# ---------------------------------------------------------------- ports
read -r P_NORMAL P_CTRL P_FUZZY P_REFUSE P_RELAY1 P_RELAY2 <<<"$(free_ports 6)"
[ -n "$P_RELAY2" ] || die "could not pick free ports"

echo "mode=$MODE write_wait=${WRITE_WAIT}s tmp=$TMP"
echo "ports: normal=$P_NORMAL controller=$P_CTRL fuzzy=$P_FUZZY fuzzy_refuse=$P_REFUSE$( [ $TRACE = 1 ] && echo " relays=$P_RELAY1,$P_RELAY2")"

# ---------------------------------------------------------------- test mails
# msg1..3 from the spec vectors; msg4 (long German text), msg5 (msg4 with 3 words changed),
# msg6 (long, never added) generated. msg2's vote is split 30 (msg1) : 1 (msg4), see msg2_vote.
lib_make_mails

# ---------------------------------------------------------------- servers
SERVER_PID_main=""; SERVER_PID_refuse=""
start_server main "$P_FUZZY" 127.0.0.1
start_server refuse "$P_REFUSE" 127.0.0.2
wait_server main "$P_FUZZY" || finish
wait_server refuse "$P_REFUSE" || finish

RULE_PORT_MAIN=$P_FUZZY; RULE_PORT_REFUSE=$P_REFUSE
if [ "$TRACE" = 1 ]; then
    start_relay "$P_RELAY1" "$P_FUZZY" main
    start_relay "$P_RELAY2" "$P_REFUSE" refuse
    RULE_PORT_MAIN=$P_RELAY1; RULE_PORT_REFUSE=$P_RELAY2
fi

# ---------------------------------------------------------------- rspamd (client side)
# FUZZY_TCP=1 (a client of 3.14 or later) makes both rules talk TCP to the servers, as
# rspamd's `tcp = true` does (through the relays with --trace, which pass TCP on too).
RULE_TCP=""
if [ "${FUZZY_TCP:-0}" = 1 ]; then
    client_at_least 3.14 || die "FUZZY_TCP needs an rspamd client of 3.14 or later (RSPAMD_PREFIX)"
    RULE_TCP="tcp = true;"
fi
RSPAMD_SYMBOLS='    FUZZY_DENIED_TEST { weight = 10.0; description = "fuzzy flag 1 (server under test)"; }
    FUZZY_WHITE_TEST { weight = -5.0; description = "fuzzy flag 2 (server under test)"; }
    FUZZY_REFUSE_TEST { weight = 1.0; description = "fuzzy flag 3 (server refusing writes)"; }'
# writes with -f 3 go only to "refuse": that server allows updates from 127.0.0.2 only
RSPAMD_RULES="$(plain_fuzzy_rule test "127.0.0.1:$RULE_PORT_MAIN" "FUZZY_DENIED_TEST:1 FUZZY_WHITE_TEST:2" "$RULE_TCP")
$(plain_fuzzy_rule refuse "127.0.0.1:$RULE_PORT_REFUSE" FUZZY_REFUSE_TEST:3 "$RULE_TCP")"
start_rspamd

# ---------------------------------------------------------------- 1. nothing stored yet
echo "== before any write"; check_alive
expect_stat stat_empty_main test 0
expect_stat stat_empty_refuse refuse 0
for m in msg1 msg2 msg3 msg4 msg5 msg6; do
    expect_none "no_symbol_before_add_$m" "$m.eml"
done

# ---------------------------------------------------------------- 2. writes
echo "== writes"; check_alive
fuzzy_op add_msg1 fuzzy_add 1 10 msg1.eml; H1=$HASHES
fuzzy_op add_msg4 fuzzy_add 1 10 msg4.eml; H4=$HASHES
fuzzy_op add_msg3 fuzzy_add 2 10 msg3.eml; H3=$HASHES

# writes that the 'refuse' server (allow_update = 127.0.0.2) must refuse
f="$TMP/op-refused.out"
rc "$f" -h "127.0.0.1:$P_CTRL" -f 3 -w 10 fuzzy_add "$TMP/mail/msg1.eml"; code=$?
if [ $code != 0 ] && ! grep -q 'success = true' "$f"; then
    pass rspamc_add_refused "rspamc fuzzy_add -f 3 exit $code: $(grep -v '^Results for\|^$' "$f" | tr '\n' ' ')"
else
    fail rspamc_add_refused "expected rspamc fuzzy_add -f 3 to fail against the refusing server; rc=$code, output: $(tr '\n' ' ' <"$f")"
fi
for op in 1:WRITE 2:DEL; do
    out=$(py raw "$P_REFUSE" "${op%%:*}" 1 10)
    if echo "$out" | grep -q "^len=96 value=$REFUSAL_CODE flag=1 tag_ok=1 prob=0$"; then
        pass "raw_${op#*:}_refused" "$out"
    else
        fail "raw_${op#*:}_refused" "raw ${op#*:} from 127.0.0.1 to a server allowing only 127.0.0.2: expected len=96 value=$REFUSAL_CODE flag=1 tag_ok=1 prob=0, got: $out"
    fi
    # shingled listens on TCP too (rspamd 3.14+; Debian's 3.4 storage does not)
    [ "$MODE" = shingled ] || continue
    out=$(py rawtcp "$P_REFUSE" "${op%%:*}" 1 10)
    if echo "$out" | grep -q "^len=96 value=$REFUSAL_CODE flag=1 tag_ok=1 prob=0$"; then
        pass "raw_${op#*:}_refused_over_tcp" "$out"
    else
        fail "raw_${op#*:}_refused_over_tcp" "the same ${op#*:} over TCP: expected len=96 value=$REFUSAL_CODE flag=1 tag_ok=1 prob=0, got: $out"
    fi
done
settle

# ---------------------------------------------------------------- 3. lookups
echo "== lookups after the writes"; check_alive
expect_sym hit_exact_msg1 msg1.eml FUZZY_DENIED_TEST present && {
    parse_opt FUZZY_DENIED_TEST; S1=$SCORE
    if [ "$OPT_FLAG" = 1 ] && [ "$OPT_DIGEST" = "${H1:0:10}" ] && [ "$OPT_PROB" = 1.00 ]; then
        pass hit_exact_msg1_option "flag 1, digest ${H1:0:10}, prob 1.00"
    else
        fail hit_exact_msg1_option "expected option 1:${H1:0:10}:1.00:txt, seen: $(seen)"
    fi
    exp=$(py score 10 10 1)
    if py cmp "$S1" eq "$exp" 0.02; then
        pass score_weight_10 "score $S1 = 10*tanh(e*10/100)"
    else
        fail score_weight_10 "expected score $exp (stored value 10, prob 1), seen $S1"
    fi
}
# msg2's 32 shingles: 30 equal msg1's, and one equals a shingle of msg4 (msg2's "Kind regards"
# and msg4's German "Kinder" both stem to "kind"). A correct vote picks the majority entry
# (msg1). rspamd's sqlite backend picks the row id that FOLLOWS the longest run in its sorted
# vote list (msg4, stored after msg1) and returns that row's digest/value/flag/ts with msg1's
# count as prob.
msg2_vote() {  # checkname stored-value-of-msg1
    local name=$1 v1=$2
    parse_opt FUZZY_DENIED_TEST
    if [ "$OPT_DIGEST" = "${H1:0:10}" ] && py cmp "$OPT_PROB" gt 0.5 && py cmp "$OPT_PROB" lt 1.0 &&
       py scoreok "$SCORE" 10 "$v1" "$OPT_PROB"; then
        pass "$name" "reply carries msg1's digest $OPT_DIGEST, prob $OPT_PROB, score $SCORE fits msg1's value $v1"
    elif [ "$MODE" = rspamd ] && [ "$OPT_DIGEST" = "${H4:0:10}" ] && py cmp "$OPT_PROB" gt 0.5 &&
         py scoreok "$SCORE" 10 10 "$OPT_PROB"; then
        deviation "$name" "reply carries msg4's digest/value (minority candidate) with msg1's count, prob $OPT_PROB, score $SCORE"
    else
        fail "$name" "expected option 1:${H1:0:10}:<0.5<p<1>:txt and a score fitting msg1's value $v1 (the majority candidate), seen: $(seen)"
    fi
}
expect_sym hit_shingles_msg2 msg2.eml FUZZY_DENIED_TEST present && msg2_vote hit_shingles_msg2_majority 10
expect_sym hit_shingles_msg5 msg5.eml FUZZY_DENIED_TEST present && {
    parse_opt FUZZY_DENIED_TEST
    if [ "$OPT_DIGEST" = "${H4:0:10}" ] && py cmp "$OPT_PROB" gt 0.5; then
        pass hit_shingles_msg5_option "matched msg4's digest ${OPT_DIGEST} with prob $OPT_PROB"
    else
        fail hit_shingles_msg5_option "expected option 1:${H4:0:10}:<p>0.5>:txt, seen: $(seen)"
    fi
}
expect_sym hit_exact_msg4 msg4.eml FUZZY_DENIED_TEST present
expect_sym hit_short_text_msg3 msg3.eml FUZZY_WHITE_TEST present && {
    parse_opt FUZZY_WHITE_TEST
    # rspamd labels short-text digests "bin" in the option, not "txt"
    if [ "$OPT_FLAG" = 2 ] && [ "$OPT_DIGEST" = "${H3:0:10}" ] && [ "$OPT_PROB" = 1.00 ]; then
        pass hit_short_text_msg3_option "flag 2, digest ${H3:0:10}, prob 1.00, type $OPT_TYPE"
    else
        fail hit_short_text_msg3_option "expected option 2:${H3:0:10}:1.00:*, seen: $(seen)"
    fi
}
expect_sym msg3_not_denied msg3.eml FUZZY_DENIED_TEST absent
expect_sym msg1_not_white msg1.eml FUZZY_WHITE_TEST absent
expect_none miss_unrelated_msg6 msg6.eml
expect_sym refused_write_not_stored msg1.eml FUZZY_REFUSE_TEST absent
expect_stat stat_after_adds test 3
expect_stat stat_refuse_still_empty refuse 0

# ---------------------------------------------------------------- 3b. shingled's live figures
# `shinglectl lookup` of what rspamd stored, and the per-key, per-flag and per-network stats
# (rspamd's fuzzyhash and fuzzystat control commands are the model).
if [ -n "$SHINGLECTL" ] && [ -n "${H1:-}" ] && [ -n "${H3:-}" ]; then
    echo "== shinglectl lookup and stats"
    ctl_main=(--socket "$TMP/srv-main/ctl.sock")
    out=$("$SHINGLECTL" "${ctl_main[@]}" lookup "$H1" 2>&1); code=$?
    if [ $code = 0 ] && echo "$out" | grep -q '^flags  *1:10 ' && echo "$out" | grep -q '^shingles  *yes'; then
        pass lookup_msg1 "$(echo "$out" | sed -n '2p;6p' | tr -s ' ' | tr '\n' ';')"
    else
        fail lookup_msg1 "expected exit 0, flags 1:10 and shingles yes for $H1; exit $code: $out"
    fi
    out=$("$SHINGLECTL" "${ctl_main[@]}" lookup --json "$H3" 2>&1); code=$?
    if [ $code = 0 ] && python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["found"] and d["flags"][0]=={"flag":2,"value":10} and d["created"]>0 and d["expires"]-d["last_write"]==90*86400 and d["shingles"] is False' "$out" 2>/dev/null; then
        pass lookup_msg3_json "$out"
    else
        fail lookup_msg3_json "expected found, flag 2 value 10, 90 days to expiry, no shingles (short text) for $H3; exit $code: $out"
    fi
    out=$("$SHINGLECTL" "${ctl_main[@]}" lookup "$(printf '0%.0s' $(seq 128))" 2>&1); code=$?
    if [ $code = 1 ] && echo "$out" | grep -q '^not found'; then pass lookup_unknown_exits_1 "$out"
    else fail lookup_unknown_exits_1 "expected exit 1 and 'not found'; exit $code: $out"; fi
    out=$("$SHINGLECTL" "${ctl_main[@]}" lookup 12ab 2>&1); code=$?
    if [ $code != 0 ] && echo "$out" | grep -q '128 hex digits'; then pass lookup_bad_digest_refused "$out"
    else fail lookup_bad_digest_refused "expected an error naming 128 hex digits; exit $code: $out"; fi
    main_json=$("$SHINGLECTL" "${ctl_main[@]}" stats --json 2>&1)
    if python3 - "$main_json" <<'PY' 2>/dev/null
import json, sys
d = json.loads(sys.argv[1])
flags = {f["flag"]: f for f in d["flags"]}
u = d["unkeyed"]
assert flags[1]["writes"] == 2 and flags[2]["writes"] == 1, flags
assert flags[1]["hits"] >= 3 and flags[2]["hits"] >= 1, flags      # msg1, msg2, msg5, msg4; msg3
assert u["writes"] == 3 and u["checks"] >= 8 and u["hits"] >= 5 and u["errors"] == 0, u
assert u["checks_last_hour"] == u["checks"] and u["hits_last_hour"] == u["hits"], u
nets = [n["network"] for n in d["top_networks"]["by_requests"]]
assert nets and nets[0] == "127.0.0.0/24", nets
PY
    then
        pass stats_per_flag_key_network "flags $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["flags"])' "$main_json"); unkeyed $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["unkeyed"])' "$main_json")"
    else
        fail stats_per_flag_key_network "expected flag 1: 2 writes, >= 3 hits; flag 2: 1 write; unkeyed: 3 writes, no errors; 127.0.0.0/24 on top: $(echo "$main_json" | head -c 1500)"
    fi
    if [ "${FUZZY_TCP:-0}" = 1 ]; then
        frames=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["totals"]["tcp_frames"])' "$main_json" 2>/dev/null)
        if [ "${frames:-0}" -gt 0 ]; then pass rules_talk_tcp "$frames frames received over TCP"
        else fail rules_talk_tcp "FUZZY_TCP=1 but the server received no TCP frame"; fi
    fi
    refuse_json=$("$SHINGLECTL" --socket "$TMP/srv-refuse/ctl.sock" stats --json 2>&1)
    if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["unkeyed"]["errors"] >= 3 and d["top_networks"]["by_errors"][0]["network"] == "127.0.0.0/24"' "$refuse_json" 2>/dev/null; then
        pass stats_errors_by_network "refused writes counted: $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["unkeyed"]["errors"], d["top_networks"]["by_errors"])' "$refuse_json")"
    else
        fail stats_errors_by_network "expected the refusing server to count >= 3 errors from 127.0.0.0/24: $(echo "$refuse_json" | head -c 1500)"
    fi
fi

# ---------------------------------------------------------------- 4. repeated add raises the weight
echo "== repeated add"; check_alive
fuzzy_op add_msg1_again fuzzy_add 1 10 msg1.eml
settle
if expect_sym hit_after_second_add msg1.eml FUZZY_DENIED_TEST present; then
    parse_opt FUZZY_DENIED_TEST; S2=$SCORE
    exp=$(py score 10 20 1)
    if [ -n "${S1:-}" ] && py cmp "$S2" gt "$S1" && py cmp "$S2" eq "$exp" 0.02; then
        pass score_rises "score $S1 -> $S2 = 10*tanh(e*20/100) (stored value 10 + 10)"
    else
        fail score_rises "expected score ${S1:-?} -> $exp (stored value 20), seen $S2"
    fi
fi
expect_sym hit_shingles_msg2_after_second_add msg2.eml FUZZY_DENIED_TEST present &&
    msg2_vote hit_shingles_msg2_majority_value 20
expect_stat stat_after_readd test 3

# ---------------------------------------------------------------- 5. deletes
echo "== deletes"; check_alive
fuzzy_op del_msg1 fuzzy_del 1 "" msg1.eml
settle
expect_sym gone_after_del_msg1 msg1.eml FUZZY_DENIED_TEST absent
expect_sym gone_after_del_msg2 msg2.eml FUZZY_DENIED_TEST absent
expect_sym other_entry_kept_msg4 msg4.eml FUZZY_DENIED_TEST present
expect_sym other_entry_kept_msg3 msg3.eml FUZZY_WHITE_TEST present
expect_stat stat_after_del test 2

# fuzzy_delhash: DEL carrying only the digest (no shingles) must drop the shingles too
if [ -n "${H4:-}" ]; then
    f="$TMP/op-delhash.json"
    rc "$f" -h "127.0.0.1:$P_CTRL" --json -f 1 fuzzy_delhash "$H4"; code=$?
    res=$(py addres "$f")
    if [ $code = 0 ] && [ "${res%% *}" = ok ]; then
        pass delhash_msg4 "rspamc fuzzy_delhash -f 1 ${H4:0:16}..."
    else
        fail delhash_msg4 "expected success, rc=$code, got: $res"
    fi
    settle
    expect_sym gone_after_delhash_msg4 msg4.eml FUZZY_DENIED_TEST absent
    expect_sym gone_after_delhash_msg5 msg5.eml FUZZY_DENIED_TEST absent
    expect_stat stat_after_delhash test 1
fi

check_alive
finish
