#!/usr/bin/env bash
# rspamd's per-network limit of the fuzzy storage (ratelimit_*), end to end,
# from sources that are not loopback (loopback is never limited). Runs in a
# network namespace of its own, where 192.0.2.1 (the server's address),
# 203.0.113.9 and .200 (one limited /24), 198.51.100.1 (whitelisted) sit on
# the namespace's `lo`. Needs root.
#
#  A. exact figures, with raw requests: the 7th CHECK of a network with
#     burst 6 (rate 0) is the first answered 403 with flag 0, its neighbour in
#     the /24 is refused too, PING and STAT get silence, the whitelist and
#     127.0.0.1 are never limited; the ban is logged and counted, survives a
#     restart (the buckets are saved at each sync and at SIGTERM), and ends
#     once the bucket's ttl has passed. Two workers: the network's owner
#     decides whichever core the requests arrive on.
#  B. a real rspamd (Debian's 3.4 in CI; RSPAMD_PREFIX for another) whose
#     fuzzy rule points at 192.0.2.1: its scans hit the learned mail, then
#     show the refusal (3.4: FUZZY_BLOCKED; 3.10+: FUZZY_RATELIMITED) once
#     its network is over the burst, and hit again after the ttl. Its learn
#     (a WRITE) is never limited.
#
# Usage: rspamd_fuzzy_limit_test.sh --build BUILD_DIR
set -u
if [ -z "${SHINGLED_IN_NETNS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: needs root (a network namespace with non-loopback addresses)" >&2
        echo "0 passed, 1 failed"; exit 2
    fi
    ns="shingled-limit-$$"
    ip netns add "$ns" || { echo "error: ip netns add failed"; echo "0 passed, 1 failed"; exit 2; }
    SHINGLED_IN_NETNS=1 ip netns exec "$ns" "$0" "$@"
    rc=$?
    ip netns del "$ns"
    exit $rc
fi
ip link set lo up
for a in 192.0.2.1 203.0.113.9 203.0.113.200 198.51.100.1; do ip addr add "$a/32" dev lo; done

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"
MODE=shingled; SHINGLED=""; SHINGLECTL=""; SHINGLED_CONF_EXTRA=""
SYNC=1; WRITE_WAIT=0; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=20; RT=5; TRACE=0; KEEP=0; FUZZY_TIMEOUT=2s
while [ $# -gt 0 ]; do
    case "$1" in
        --build) SHINGLED="${2:?}/src/daemon/shingled"; SHINGLECTL="$2/tools/shinglectl"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown argument: $1" ;;
    esac
done
[ -n "$SHINGLED" ] || die "usage: rspamd_fuzzy_limit_test.sh --build BUILD_DIR"
SHINGLECTL=$(realpath "$SHINGLECTL")
lib_check_env
lib_setup rspamd-fuzzy-limit-test
UDP="$SCRIPT_DIR/fuzzy_udp.py"
read -r P_NORMAL P_CTRL P_LIMITED <<<"$(free_ports 3)"
lib_make_mails

TTL=8
LIMITED_CONF="bind_socket = \"192.0.2.1:$P_LIMITED\";
ratelimit_rate = 0;
ratelimit_burst = 6;
ratelimit_bucket_ttl = ${TTL}s;
ratelimit_whitelist = \"198.51.100.1\";"
start_server limited "$P_LIMITED" 192.0.2.1 "$LIMITED_CONF"
wait_server limited "$P_LIMITED" || finish

ask() {  # ask FROM CMD COUNT -> one line per request ("VALUE FLAG" or "silent")
    "$PYTHON" "$UDP" --to "192.0.2.1:$P_LIMITED" --from "$1" --cmd "$2" --count "$3" --timeout 0.5
}
field() {  # totals.<name> of the limited server
    "$SHINGLECTL" --socket "$TMP/srv-limited/ctl.sock" stats --json |
        "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['totals']['$1'])"
}

# ---------------------------------------------------------------- A. exact figures
echo "== A. raw requests"
got=$(ask 203.0.113.9 check 8 | tr '\n' ',')
if [ "$got" = "0 0,0 0,0 0,0 0,0 0,0 0,403 0,403 0," ]; then
    pass A_seventh_check_is_refused "6 misses, then 403 with flag 0: $got"
else
    fail A_seventh_check_is_refused "expected 6 x '0 0' then '403 0' twice, got: $got"
fi
got=$(ask 203.0.113.200 check 1)
[ "$got" = "403 0" ] && pass A_the_whole_24_is_banned "203.0.113.200: $got" ||
    fail A_the_whole_24_is_banned "203.0.113.200 got: $got"
got=$(ask 203.0.113.9 ping 1),$(ask 203.0.113.9 stat 1)
[ "$got" = "silent,silent" ] && pass A_ping_and_stat_get_silence "$got" ||
    fail A_ping_and_stat_get_silence "got: $got"
got=$(ask 198.51.100.1 check 20 | sort | uniq -c | tr -s ' ' | tr '\n' ',')
[ "$got" = " 20 0 0," ] && pass A_whitelist_is_never_limited "20 CHECKs:$got" ||
    fail A_whitelist_is_never_limited "got:$got"
got=$("$PYTHON" "$UDP" --to "127.0.0.1:$P_LIMITED" --count 20 --timeout 0.5 | sort | uniq -c | tr -s ' ' | tr '\n' ',')
[ "$got" = " 20 0 0," ] && pass A_loopback_is_never_limited "20 CHECKs:$got" ||
    fail A_loopback_is_never_limited "got:$got"
if grep -q "ratelimit: banning 203.0.113.0/24 (203.0.113.9:" "$TMP/srv-limited/stdout.log"; then
    pass A_the_ban_is_logged "$(grep -o 'ratelimit: banning.*' "$TMP/srv-limited/stdout.log" | head -1)"
else
    fail A_the_ban_is_logged "no line in the log"
fi
bans=$(field fuzzy_ratelimit_bans) refused=$(field fuzzy_ratelimit_refused) silent=$(field fuzzy_ratelimited)
[ "$bans/$refused/$silent" = "1/3/2" ] && pass A_counted "bans/refused/silenced = $bans/$refused/$silent" ||
    fail A_counted "bans/refused/silenced = $bans/$refused/$silent, expected 1/3/2"
kill -TERM "$SERVER_PID_limited"; wait "$SERVER_PID_limited" 2>/dev/null
start_server limited "$P_LIMITED" 192.0.2.1 "$LIMITED_CONF"
wait_server limited "$P_LIMITED" || finish
got=$(ask 203.0.113.9 check 1)
[ "$got" = "403 0" ] && pass A_the_ban_survives_a_restart "$got; $(grep -o 'loaded [0-9]* per-network limit buckets' "$TMP/srv-limited/stdout.log" | tail -1)" ||
    fail A_the_ban_survives_a_restart "after the restart: $got"
sleep $((TTL + 1))
got=$(ask 203.0.113.9 check 1)
[ "$got" = "0 0" ] && pass A_released_after_the_ttl "after ${TTL}s + 1: $got" ||
    fail A_released_after_the_ttl "after the ttl: $got"

# ---------------------------------------------------------------- B. rspamd
echo "== B. rspamd $RSPAMD_CLIENT_VERSION as the client, from 192.0.2.1"
BLOCK_SYM=FUZZY_BLOCKED; client_at_least 3.10 && BLOCK_SYM=FUZZY_RATELIMITED
RSPAMD_SYMBOLS='    FUZZY_DENIED_TEST { weight = 10.0; description = "fuzzy flag 1"; }'
RSPAMD_RULES=$(plain_fuzzy_rule test "192.0.2.1:$P_LIMITED" FUZZY_DENIED_TEST:1)
start_rspamd
check_alive
fuzzy_op B_learn_is_not_limited fuzzy_add 1 10 msg1.eml
expect_sym B_first_scan_hits msg1.eml FUZZY_DENIED_TEST present
refused_at=0
for n in $(seq 2 12); do
    scan msg1.eml
    if [ -n "$(sym_line "$BLOCK_SYM")" ]; then refused_at=$n; break; fi
    [ -n "$(sym_line FUZZY_DENIED_TEST)" ] || { fail B_scans_hit_until_the_burst "scan $n: $(seen)"; break; }
done
if [ "$refused_at" -gt 1 ]; then
    pass B_scans_show_the_refusal "scan $refused_at: $(seen)"
else
    fail B_scans_show_the_refusal "no $BLOCK_SYM within 12 scans; last: $(seen)"
fi
expect_sym B_banned_while_the_bucket_lives msg1.eml "$BLOCK_SYM" present
sleep $((TTL + 1))
expect_sym B_hits_again_after_the_ttl msg1.eml FUZZY_DENIED_TEST present
check_alive
finish
