#!/usr/bin/env bash
# End-to-end test of the ENCRYPTED fuzzy protocol (spec sections 10-11) with a
# REAL rspamd 3.4 as the client: server keypairs from `rspamadm keypair -u` and
# `shinglectl keypair`, fuzzy_check rules with `encryption_key`, an
# `encrypted_only` server, logging relays that prove what was on the wire, and
# `shingled --check-config` refusing a keypair whose halves do not match.
# See tests/integration/README.md.
#
# Exit status: 0 if every check passed, 1 if a check failed, 2 on usage or
# set-up errors. The last line of output is always "N passed, M failed".

set -u
# shared helpers (temp dir, python helper, mails, servers, rspamd start-up, checks)
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"

usage() {
    cat <<'EOF'
Usage:
  rspamd_encrypted_test.sh --shingled PATH    [options]   test shingled (PATH --config FILE)
  rspamd_encrypted_test.sh --build BUILD_DIR  [options]   same with PATH = BUILD_DIR/src/daemon/shingled
  rspamd_encrypted_test.sh --rspamd-fuzzy     [options]   test rspamd 3.4's own fuzzy storage (sqlite)

Server selection (exactly one):
  --shingled PATH        The script writes a UCL config per server instance (with
                         `keypair { ... }` blocks and `encrypted_only`) and runs
                         `PATH --config DIR/shingled.conf` in the foreground.
  --build BUILD_DIR      Shorthand for --shingled BUILD_DIR/src/daemon/shingled and
                         --shinglectl BUILD_DIR/tools/shinglectl (what scripts/test.sh passes).
  --rspamd-fuzzy         rspamd's fuzzy storage worker, sqlite backend (reference run).
                         The `shinglectl keypair` part runs only if --shinglectl is given
                         (then rspamd's storage is loaded with shinglectl's keypair); the
                         `--check-config` part is skipped.

Options:
  --shinglectl PATH      shinglectl binary (default with --shingled PATH: the tools/shinglectl
                         next to PATH's build dir, if present).
  --shingled-conf TEXT   Extra UCL appended to every generated shingled config.
  --sync SEC             rspamd-fuzzy mode: storage `sync` interval (default 1).
  --write-wait SEC       Sleep after each batch of writes/deletes before checking
                         (default: 0; rspamd-fuzzy: sync + 1.5).
  --vectors DIR          Spec vectors dir holding mail/msg{1,2,3}.eml (default:
                         $SHINGLED_VECTORS, else <repo>/../shared/spec/vectors).
  --start-timeout SEC    Max wait for each server / rspamd to come up (default 20).
  --rspamc-timeout SEC   rspamc -t value (default 5); every call is also killed by
                         timeout(1) a few seconds later.
  --fuzzy-timeout T      fuzzy_check `timeout` (UCL time, default 2s).
  --trace                Print every relayed datagram at the end (the relays run always).
  --keep                 Keep the temp dir (configs, keys, logs) and print its path.
  -h, --help             This text.
EOF
}

# ---------------------------------------------------------------- arguments
MODE=""; SHINGLED=""; SHINGLECTL=""; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=""; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=20; RT=5; TRACE=0; KEEP=0; FUZZY_TIMEOUT=2s

while [ $# -gt 0 ]; do
    case "$1" in
        --shingled) MODE=shingled; SHINGLED="${2:?--shingled needs a path}"; shift 2 ;;
        --build) MODE=shingled; SHINGLED="${2:?--build needs a dir}/src/daemon/shingled"
                 [ -n "$SHINGLECTL" ] || SHINGLECTL="$2/tools/shinglectl"; shift 2 ;;
        --shinglectl) SHINGLECTL="${2:?--shinglectl needs a path}"; shift 2 ;;
        --shingled-conf) SHINGLED_CONF_EXTRA="${2?}"; shift 2 ;;
        --rspamd-fuzzy) MODE=rspamd; shift ;;
        --sync) SYNC="${2:?}"; shift 2 ;;
        --write-wait) WRITE_WAIT="${2:?}"; shift 2 ;;
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
[ -n "$MODE" ] || { usage >&2; die "choose --shingled PATH, --build DIR or --rspamd-fuzzy"; }

lib_check_env rspamadm
if [ "$MODE" = shingled ] && [ -z "$SHINGLECTL" ]; then
    c="$(dirname "$SHINGLED")/../../tools/shinglectl"
    [ -x "$c" ] && SHINGLECTL=$c
fi
if [ -n "$SHINGLECTL" ]; then
    [ -x "$SHINGLECTL" ] || die "shinglectl '$SHINGLECTL' is not an executable file"
    SHINGLECTL="$(cd "$(dirname "$SHINGLECTL")" && pwd)/$(basename "$SHINGLECTL")"
fi
lib_setup rspamd-enc-test

# ---------------------------------------------------------------- ports
read -r P_NORMAL P_CTRL P_ENC P_ENCONLY P_SHKEY \
        P_R_ENC P_R_ENCPLAIN P_R_ENCONLY P_R_ENCONLYPLAIN P_R_SHKEY P_ENCNOW P_R_ENCNOWPLAIN <<<"$(free_ports 12)"
[ -n "$P_R_ENCNOWPLAIN" ] || die "could not pick free ports"

# the `shinglectl keypair` server runs when shinglectl is known (always with --build)
SHKEY=0; [ -n "$SHINGLECTL" ] && SHKEY=1
note() { echo "NOTE $*"; }   # a skipped part: counted neither as passed nor as failed

echo "mode=$MODE write_wait=${WRITE_WAIT}s tmp=$TMP"
echo "ports: normal=$P_NORMAL controller=$P_CTRL enc=$P_ENC enconly=$P_ENCONLY$( [ $SHKEY = 1 ] && echo " shkey=$P_SHKEY")" \
     "relays=$P_R_ENC,$P_R_ENCPLAIN,$P_R_ENCONLY,$P_R_ENCONLYPLAIN$( [ $SHKEY = 1 ] && echo ",$P_R_SHKEY")"

# ---------------------------------------------------------------- test mails
# msg1 (long), msg2 (msg1 with 3 words changed), msg3 (short text, digest only) from the
# spec vectors; msg4 (long German text), msg5 (msg4 with 3 words changed), msg6 (long,
# never added) generated; msg7 (long, only for the shinglectl-keypair server).
lib_make_mails
{
    mail_header 'Ivy Example <ivy@example.org>' 'Jack Example <jack@example.com>' \
        'Community garden rota and compost rules' 'fuzzy-enc-0007@example.org'
    cat <<'EOF'
Dear neighbours,

the community garden committee met on Tuesday to settle the watering rota for
the summer. Each household takes one evening per fortnight, and the list is
pinned inside the tool shed next to the rain barrels. Please close the gate
behind you, because rabbits found the lettuce beds twice last month. Compost
goes into the left bay only: vegetable peelings, coffee grounds, shredded
cardboard and grass clippings are welcome, while cooked food, meat and glossy
paper are not. The shared wheelbarrow has a new tyre, and the hose reel was
repaired by the volunteers from the bicycle workshop. Seed swapping continues
on the first Saturday of each month under the walnut tree, with tea provided
by the allotment society. Remember to label your tomato plants, since three
identical varieties caused some confusion at the harvest table last autumn.

Best regards,
Ivy
EOF
} >"$TMP/mail/msg7.eml"

# ---------------------------------------------------------------- keypairs
KEYS="$TMP/keys"; mkdir -p "$KEYS"
# keypair_info NAME FILE -> sets <NAME>_PUB (encoded pubkey) and <NAME>_KID (key id, hex)
keypair_info() {
    local out pub kid st
    if ! out=$(py kpinfo "$2"); then
        fail "keypair_$1_format" "$out; file:"; indent <"$2"; return 1
    fi
    read -r pub kid st <<<"$out"
    printf -v "${1}_PUB" '%s' "$pub"; printf -v "${1}_KID" '%s' "$kid"
    if [ "$st" = id_ok ]; then
        pass "keypair_$1_format" "keypair block, 32-byte keys, id = base32(BLAKE2b-512(pubkey)), key id $kid"
    else
        fail "keypair_$1_format" "id line: $st (expected base32(BLAKE2b-512(pubkey)))"
    fi
}
echo "== keypairs"
timeout 10 rspamadm keypair -u >"$KEYS/enc.kp" 2>"$KEYS/enc.err" || die "rspamadm keypair -u failed: $(cat "$KEYS/enc.err")"
for k in enconly decoy_first decoy_last; do
    timeout 10 rspamadm keypair -u >"$KEYS/$k.kp" 2>"$KEYS/$k.err" || die "rspamadm keypair -u failed"
done
keypair_info K_ENC "$KEYS/enc.kp" || finish
keypair_info K_ENCONLY "$KEYS/enconly.kp" || finish
if [ $SHKEY = 1 ]; then
    if timeout 10 "$SHINGLECTL" keypair >"$KEYS/shkey.kp" 2>"$KEYS/shkey.err"; then
        pass shinglectl_keypair_runs "$SHINGLECTL keypair: exit 0"
        keypair_info K_SHKEY "$KEYS/shkey.kp" || SHKEY=0
    else
        fail shinglectl_keypair_runs "$SHINGLECTL keypair failed: $(head -c 300 "$KEYS/shkey.err" | tr '\n' ' ')"
        SHKEY=0
    fi
else
    note "skipped: the shinglectl keypair server (no shinglectl in --rspamd-fuzzy mode; pass --shinglectl PATH to load its key into rspamd's storage)"
fi
K_SHKEY_PUB=${K_SHKEY_PUB:-}

# ---------------------------------------------------------------- servers
# enc:      keypair from rspamadm, plain requests allowed too
# enconly:  three rspamadm keypairs, encrypted_only = true. The rule uses the middle one, which
#           is the default neither for shingled (first) nor for rspamd's storage (last): the
#           server must pick the keypair by the key id in the request header (spec 11.4).
# shkey:    keypair from `shinglectl keypair`
# enconly_now (shingled only): encrypted_only with the default, current reply codes, which
#           answer a plain request 415; enconly keeps rspamd 3.4's 403 (reply_codes = "legacy")
#           so that it answers as the reference storage, Debian's rspamd 3.4, does.
SERVER_PID_enc=""; SERVER_PID_enconly=""; SERVER_PID_shkey=""; SERVER_PID_enconly_now=""
NOW=0; [ "$MODE" = shingled ] && NOW=1
LEGACY_CODES=""; [ $NOW = 1 ] && LEGACY_CODES='reply_codes = "legacy";'
start_server enc "$P_ENC" 127.0.0.1 "$(cat "$KEYS/enc.kp")"
start_server enconly "$P_ENCONLY" 127.0.0.1 "$(cat "$KEYS/decoy_first.kp" "$KEYS/enconly.kp" "$KEYS/decoy_last.kp")
encrypted_only = true;
$LEGACY_CODES"
[ $SHKEY = 1 ] && start_server shkey "$P_SHKEY" 127.0.0.1 "$(cat "$KEYS/shkey.kp")"
[ $NOW = 1 ] && start_server enconly_now "$P_ENCNOW" 127.0.0.1 "$(cat "$KEYS/enconly.kp")
encrypted_only = true;"
wait_server enc "$P_ENC" || finish
wait_server enconly "$P_ENCONLY" || finish
if [ $SHKEY = 1 ]; then wait_server shkey "$P_SHKEY" || finish; fi
if [ $NOW = 1 ]; then wait_server enconly_now "$P_ENCNOW" || finish; fi

# one logging relay per rule, so each rule's traffic can be inspected separately
# FUZZY_TCP=1 (a client of 3.14 or later, shingled only): every rule talks TCP (`tcp = true`)
# straight to its server; the relays are UDP only, so the wire checks are left out.
RULE_TCP=""
if [ "${FUZZY_TCP:-0}" = 1 ]; then
    client_at_least 3.14 || die "FUZZY_TCP needs an rspamd client of 3.14 or later (RSPAMD_PREFIX)"
    [ "$MODE" = shingled ] || die "FUZZY_TCP: rspamd's own storage is run on UDP only here"
    RULE_TCP="tcp = true;"
    P_R_ENC=$P_ENC; P_R_ENCPLAIN=$P_ENC; P_R_ENCONLY=$P_ENCONLY; P_R_ENCONLYPLAIN=$P_ENCONLY
    P_R_SHKEY=$P_SHKEY; P_R_ENCNOWPLAIN=$P_ENCNOW
else
    start_relay "$P_R_ENC" "$P_ENC" enc
    start_relay "$P_R_ENCPLAIN" "$P_ENC" enc_plain
    start_relay "$P_R_ENCONLY" "$P_ENCONLY" enconly
    start_relay "$P_R_ENCONLYPLAIN" "$P_ENCONLY" enconly_plain
    [ $SHKEY = 1 ] && start_relay "$P_R_SHKEY" "$P_SHKEY" shkey
    [ $NOW = 1 ] && start_relay "$P_R_ENCNOWPLAIN" "$P_ENCNOW" enconly_now_plain
fi

# ---------------------------------------------------------------- rspamd (client side)
RSPAMD_SYMBOLS='    FUZZY_ENC { weight = 10.0; description = "flag 1: encrypted rule -> enc"; }
    FUZZY_ENC_PLAIN { weight = 1.0; description = "flag 1 seen by the plain read-only rule -> enc"; }
    FUZZY_ENCONLY { weight = 10.0; description = "flag 2: encrypted rule -> enconly"; }
    FUZZY_ENCONLY_PLAIN { weight = 1.0; description = "flag 3: plain rule -> enconly (refused)"; }
    FUZZY_SHKEY { weight = 10.0; description = "flag 4: encrypted rule -> shkey"; }
    FUZZY_ENCONLY_NOW_PLAIN { weight = 1.0; description = "flag 5: plain rule -> enconly_now (refused, 415)"; }'
rule() {  # name port read_only encryption_key(or "") symbol flag
    echo "  rule \"$1\" {"
    echo "    servers = \"127.0.0.1:$2\";"
    echo "    read_only = $3;"
    [ -n "$RULE_TCP" ] && echo "    $RULE_TCP"
    [ -n "$4" ] && echo "    encryption_key = \"$4\";"
    echo "    max_score = 100.0;"
    echo "    mime_types = [\"*\"];"
    echo "    short_text_direct_hash = true;"
    echo "    min_length = 64;"
    echo "    fuzzy_map = { $5 { max_score = 100.0; flag = $6; } }"
    echo "  }"
}
RSPAMD_RULES="$(rule enc "$P_R_ENC" false "$K_ENC_PUB" FUZZY_ENC 1)
$(rule enc_plain "$P_R_ENCPLAIN" true "" FUZZY_ENC_PLAIN 1)
$(rule enconly "$P_R_ENCONLY" false "$K_ENCONLY_PUB" FUZZY_ENCONLY 2)
$(rule enconly_plain "$P_R_ENCONLYPLAIN" false "" FUZZY_ENCONLY_PLAIN 3)"
[ $SHKEY = 1 ] && RSPAMD_RULES="$RSPAMD_RULES
$(rule shkey "$P_R_SHKEY" false "$K_SHKEY_PUB" FUZZY_SHKEY 4)"
[ $NOW = 1 ] && RSPAMD_RULES="$RSPAMD_RULES
$(rule enconly_now_plain "$P_R_ENCNOWPLAIN" true "" FUZZY_ENCONLY_NOW_PLAIN 5)"
start_rspamd

# ---------------------------------------------------------------- check helpers
# Every scan also sends a plain CHECK to the encrypted_only server (rule enconly_plain), which
# must answer 403: rspamd 3.4 then inserts FUZZY_BLOCKED with the rule name as option. With
# shingled, a plain CHECK also goes to enconly_now (rule enconly_now_plain), which answers 415:
# rspamd 3.4 only logs it, so FUZZY_BLOCKED must name enconly_plain and nothing else.
# A client from 3.10 on (RSPAMD_PREFIX) shows a 403 as FUZZY_RATELIMITED and a 415 as
# FUZZY_ENCRYPTION_REQUIRED (docs/rspamd-versions.md): every scan must show the one for
# enconly_plain and, with shingled, the other for enconly_now_plain.
BLOCK_SYM=FUZZY_BLOCKED; client_at_least 3.10 && BLOCK_SYM=FUZZY_RATELIMITED
# The enconly server answers plain requests 403 (shingled: reply_codes = "legacy"; rspamd's own
# storage up to 3.9) or 415 (rspamd's own storage from 3.10), which shows as:
ENCONLY_CODE=403; ENCONLY_SYM=$BLOCK_SYM
if [ "$MODE" = rspamd ] && client_at_least 3.10; then ENCONLY_CODE=415; ENCONLY_SYM=FUZZY_ENCRYPTION_REQUIRED; fi
NBLOCKED_OK=0; NBLOCKED_BAD=0; BLOCKED_BAD=""
# hits_of_scan: the FUZZY_* symbols but the refusal ones, sorted, space separated
hits_of_scan() {
    echo "$SCAN" | awk '$1 != "" && $1 != "FUZZY_BLOCKED" && $1 != "FUZZY_RATELIMITED" &&
        $1 != "FUZZY_ENCRYPTION_REQUIRED" && $1 != "FUZZY_FORBIDDEN" {print $1}' | sort | tr '\n' ' ' | sed 's/ $//'
}
note_blocked() {  # mail
    local b e ok=1; b=$(sym_line "$ENCONLY_SYM" | awk '{print $3}')
    [ "$b" = enconly_plain ] || ok=0
    if [ $NOW = 1 ] && client_at_least 3.10; then
        e=$(sym_line FUZZY_ENCRYPTION_REQUIRED | awk '{print $3}')
        [ "$e" = enconly_now_plain ] || ok=0
        b="$b/${e:-none}"
    fi
    if [ $ok = 1 ]; then
        NBLOCKED_OK=$((NBLOCKED_OK + 1))
    else
        NBLOCKED_BAD=$((NBLOCKED_BAD + 1)); BLOCKED_BAD="$BLOCKED_BAD $1:${b:-none}"
    fi
}
# expect_hits CHECKNAME MAIL "SYMBOLS..." : exactly these FUZZY_* hits (FUZZY_BLOCKED aside)
expect_hits() {
    local name=$1 mail=$2 want got
    want=$(echo "$3" | tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//')
    if ! scan "$mail"; then fail "$name" "scan of $mail failed: $SCAN"; return 1; fi
    note_blocked "$mail"
    got=$(hits_of_scan)
    if [ "$got" = "$want" ]; then
        pass "$name" "$mail: ${want:-no hits}$( [ -n "$want" ] && echo " ($(seen))")"
        return 0
    fi
    fail "$name" "$mail: expected hits {${want}}, seen: $(seen)"
    return 1
}
# expect_option CHECKNAME SYMBOL FLAG DIGEST exact|near : option of SYMBOL in the last scan.
# exact: the mail's own digest, prob 1.00. near (a near-duplicate): the STORED mail's digest,
# which differs from the scanned mail's own, so the hit came from the shingles; prob > 0.5 (it
# may be 1.00: msg5 keeps all 32 of msg4's shingles; rspamd's sqlite reports (k-1)/32 = 0.96).
expect_option() {
    local name=$1 sym=$2 flag=$3 digest=$4 kind=$5
    parse_opt "$sym"
    if [ "$OPT_FLAG" = "$flag" ] && [ -n "$digest" ] && [ "$OPT_DIGEST" = "${digest:0:10}" ] &&
       { { [ "$kind" = exact ] && [ "$OPT_PROB" = 1.00 ]; } ||
         { [ "$kind" = near ] && py cmp "$OPT_PROB" gt 0.5; }; }; then
        pass "$name" "$sym option $flag:$OPT_DIGEST:$OPT_PROB:$OPT_TYPE ($kind)"
    else
        fail "$name" "expected $sym option $flag:${digest:0:10}:$( [ "$kind" = exact ] && echo 1.00 || echo '>0.5'):*, seen: $(seen)"
    fi
}
# expect_stored CHECKNAME SERVER N : shinglectl stats --json -> stored_hashes (shingled only)
expect_stored() {
    local name=$1 srv=$2 want=$3 f="$TMP/ctl-$1.json" got
    if [ "$MODE" != shingled ] || [ -z "$SHINGLECTL" ]; then
        [ "$MODE" = shingled ] && note "skipped $name: no shinglectl (use --shinglectl PATH)"
        return 0
    fi
    if ! timeout 10 "$SHINGLECTL" --socket "$TMP/srv-$srv/ctl.sock" stats --json >"$f" 2>&1; then
        fail "$name" "shinglectl stats --json failed: $(head -c 300 "$f")"; return 1
    fi
    got=$(py jsonget "$f" stored_hashes)
    if [ "$got" = "$want" ]; then
        pass "$name" "shinglectl stats: stored_hashes of '$srv' = $got"
    else
        fail "$name" "shinglectl stats: expected stored_hashes $want on '$srv', got $got"
    fi
}
# expect_trace CHECKNAME RELAY enc|plain [KEYID]
expect_trace() {
    local out
    if [ -n "$RULE_TCP" ]; then note "skipped: $1 (FUZZY_TCP: no relay on the way)"; return 0; fi
    if out=$(py traceck "$TMP/trace-$2.log" "$3" "${4:-}"); then
        pass "$1" "rule $2: $out"
    else
        fail "$1" "rule $2, expected $3 traffic${4:+ for key id $4}: $out"
    fi
}

# ---------------------------------------------------------------- 1. nothing stored yet
echo "== before any write"; check_alive
# Each encrypted rule must answer its STAT; if one does not (no encryption support, wrong key,
# undecryptable replies), every later rspamc call would wait 2 x fuzzy timeout: stop here.
unanswered=""
# rspamd's own storage from 3.10 on answers an empty STAT with prob 0, which its client does not
# show: there, "missing" says nothing about encryption.
EMPTY_STAT_SILENT=0; [ "$MODE" = rspamd ] && client_at_least 3.10 && EMPTY_STAT_SILENT=1
[ $EMPTY_STAT_SILENT = 1 ] && STAT_MISSING=none || STAT_MISSING=missing
expect_stat stat_empty_enc enc 0; [ "$STAT_GOT" = $STAT_MISSING ] && unanswered="$unanswered enc"
expect_stat stat_empty_enc_plain enc_plain 0
expect_stat stat_empty_enconly enconly 0; [ "$STAT_GOT" = $STAT_MISSING ] && unanswered="$unanswered enconly"
if [ $SHKEY = 1 ]; then
    expect_stat stat_empty_shkey shkey 0; [ "$STAT_GOT" = $STAT_MISSING ] && unanswered="$unanswered shkey"
fi
if [ -n "$unanswered" ]; then
    fail encrypted_rules_answer "no usable STAT reply for the encrypted rule(s)$unanswered; stopping early. rspamd log:"
    grep -i 'decrypt\|IO timeout' "$R/rspamd.log" | tail -n 6 | cut -c1-240 | indent
    finish
fi
for m in msg1 msg2 msg3 msg4 msg7; do
    expect_hits "no_hit_before_add_$m" "$m.eml" ""
done
# the plain rule to the encrypted_only server gets 403 on every CHECK (rspamd: FUZZY_BLOCKED)
if [ "$NBLOCKED_OK" -gt 0 ] && [ "$NBLOCKED_BAD" = 0 ]; then
    pass plain_rule_to_enconly_blocked "$ENCONLY_SYM with option enconly_plain on all $NBLOCKED_OK scans"
else
    fail plain_rule_to_enconly_blocked "expected $ENCONLY_SYM (option enconly_plain) on every scan; wrong on:$BLOCKED_BAD"
fi

# ---------------------------------------------------------------- 2. encrypted writes (enc)
echo "== encrypted writes through rule enc (rspamadm keypair)"; check_alive
fuzzy_op add_msg1_encrypted fuzzy_add 1 10 msg1.eml; H1=$HASHES
fuzzy_op add_msg3_encrypted fuzzy_add 1 10 msg3.eml; H3=$HASHES

# ---------------------------------------------------------------- 3. plain writes to encrypted_only
echo "== plain requests to the encrypted_only server"
f="$TMP/op-plain-enconly.out"
rc "$f" -h "127.0.0.1:$P_CTRL" -f 3 -w 10 fuzzy_add "$TMP/mail/msg4.eml"; code=$?
if [ $code != 0 ] && ! grep -q 'success = true' "$f"; then
    pass plain_add_to_enconly_fails "rspamc fuzzy_add -f 3 exit $code: $(grep -v '^Results for\|^$' "$f" | tr '\n' ' ')"
else
    fail plain_add_to_enconly_fails "expected rspamc fuzzy_add -f 3 (plain rule enconly_plain) to fail; rc=$code, output: $(tr '\n' ' ' <"$f")"
fi
for op in 0:CHECK:0 1:WRITE:1 2:DEL:1 3:STAT:0; do
    IFS=: read -r code_ cname flag_ <<<"$op"
    out=$(py raw "$P_ENCONLY" "$code_" "$flag_" 10)
    if echo "$out" | grep -q "^len=96 value=$ENCONLY_CODE flag=$flag_ tag_ok=1 prob=0$"; then
        pass "raw_plain_${cname}_to_enconly_$ENCONLY_CODE" "$out"
    else
        fail "raw_plain_${cname}_to_enconly_$ENCONLY_CODE" "plain $cname to the encrypted_only server: expected len=96 value=$ENCONLY_CODE flag=$flag_ tag_ok=1 prob=0 (a plain reply), got: $out"
    fi
    [ $NOW = 1 ] || continue
    out=$(py raw "$P_ENCNOW" "$code_" "$flag_" 10)
    if echo "$out" | grep -q "^len=96 value=415 flag=$flag_ tag_ok=1 prob=0$"; then
        pass "raw_plain_${cname}_to_enconly_now_415" "$out"
    else
        fail "raw_plain_${cname}_to_enconly_now_415" "plain $cname to the encrypted_only server with current reply codes: expected len=96 value=415 flag=$flag_ tag_ok=1 prob=0, got: $out"
    fi
    out=$(py rawtcp "$P_ENCNOW" "$code_" "$flag_" 10)
    if echo "$out" | grep -q "^len=96 value=415 flag=$flag_ tag_ok=1 prob=0$"; then
        pass "raw_plain_${cname}_over_tcp_to_enconly_now_415" "$out"
    else
        fail "raw_plain_${cname}_over_tcp_to_enconly_now_415" "the same over TCP: expected len=96 value=415 flag=$flag_ tag_ok=1 prob=0, got: $out"
    fi
done
# What rspamd 3.4 makes of a 415: a log line, no symbol (the scans above saw no FUZZY_BLOCKED
# for enconly_now_plain).
if [ $NOW = 1 ] && ! client_at_least 3.10; then
    if grep -q 'fuzzy check error for [0-9]*: unknown error (415)' "$TMP/rspamd/rspamd.log"; then
        pass rspamd34_logs_415_as_unknown_error "$(grep -m1 'unknown error (415)' "$TMP/rspamd/rspamd.log" | cut -c1-200)"
    else
        fail rspamd34_logs_415_as_unknown_error "expected rspamd 3.4 to log 'fuzzy check error for N: unknown error (415)' for the plain rule to enconly_now"
    fi
fi
settle

# ---------------------------------------------------------------- 4. lookups
echo "== lookups after the writes"; check_alive
# the plain read-only rule enc_plain asks the same server without encryption: same answers
expect_hits hit_exact_msg1 msg1.eml "FUZZY_ENC FUZZY_ENC_PLAIN" && {
    expect_option hit_exact_msg1_option FUZZY_ENC 1 "${H1:-}" exact
    expect_option hit_exact_msg1_plain_rule_option FUZZY_ENC_PLAIN 1 "${H1:-}" exact
}
expect_hits hit_near_duplicate_msg2 msg2.eml "FUZZY_ENC FUZZY_ENC_PLAIN" &&
    expect_option hit_near_duplicate_msg2_option FUZZY_ENC 1 "${H1:-}" near
expect_hits hit_short_text_msg3 msg3.eml "FUZZY_ENC FUZZY_ENC_PLAIN" &&
    expect_option hit_short_text_msg3_option FUZZY_ENC 1 "${H3:-}" exact
expect_hits miss_unrelated_msg6 msg6.eml ""
expect_hits plain_write_not_stored_msg4 msg4.eml ""
# rspamd 4.1.5+ appends extension records, sender facts (type 0x80) among them, to encrypted
# requests for mail from a non-local address without authentication: shingled must answer
# them as the same request without (storages up to 4.1.4 dropped them).
if client_at_least 4.1.5 && [ "$MODE" = shingled ] && [ -z "$RULE_TCP" ]; then
    before=$(grep -c 'encrypted' "$TMP/trace-enc.log" 2>/dev/null || echo 0)
    f="$TMP/scan-ext.json"
    rc "$f" -h "127.0.0.1:$P_NORMAL" --json --ip 192.0.2.10 --from sender@example.org symbols "$TMP/mail/msg1.eml"
    SCAN=$(py syms "$f" 2>/dev/null || true)
    lens=$(tail -n +"$((before + 1))" "$TMP/trace-enc.log" 2>/dev/null | grep -o 'encrypted [0-9]* bytes' | awk '{print $2}' | sort -u | tr '\n' ' ')
    longest=$(echo $lens | tr ' ' '\n' | sort -n | tail -1)
    if echo "$SCAN" | grep -q '^FUZZY_ENC ' && [ "${longest:-0}" -gt 416 ]; then
        pass sender_facts_extension_answered "hit with requests of ${lens}bytes (416 without extensions)"
    else
        fail sender_facts_extension_answered "expected FUZZY_ENC for msg1 sent from 192.0.2.10 with extension-bearing requests (> 416 bytes); requests: ${lens:-none}; scan: $(seen)"
    fi
fi
expect_stat stat_enc_after_adds enc 2
expect_stat stat_enc_plain_rule enc_plain 2
expect_stat stat_enconly_still_empty enconly 0
expect_stat stat_enconly_plain_rule_refused enconly_plain missing
expect_stored stored_enconly_after_plain_add enconly 0

# ---------------------------------------------------------------- 5. encrypted rule to encrypted_only
echo "== encrypted rule to the encrypted_only server"; check_alive
fuzzy_op add_msg4_enconly_encrypted fuzzy_add 2 10 msg4.eml; H4=$HASHES
settle
expect_hits hit_exact_msg4_enconly msg4.eml FUZZY_ENCONLY &&
    expect_option hit_exact_msg4_enconly_option FUZZY_ENCONLY 2 "${H4:-}" exact
expect_hits hit_near_duplicate_msg5_enconly msg5.eml FUZZY_ENCONLY &&
    expect_option hit_near_duplicate_msg5_enconly_option FUZZY_ENCONLY 2 "${H4:-}" near
expect_stat stat_enconly_after_add enconly 1
expect_stored stored_enconly_after_encrypted_add enconly 1

# ---------------------------------------------------------------- 6. what was on the wire
echo "== traffic seen by the relays"
expect_trace wire_enc_rule_encrypted enc enc "$K_ENC_KID"
expect_trace wire_enc_plain_rule_plain enc_plain plain
expect_trace wire_enconly_rule_encrypted enconly enc "$K_ENCONLY_KID"
expect_trace wire_enconly_plain_rule_plain enconly_plain plain
# a datagram that cannot pass the MAC check gets no reply (rspamd drops it), and the
# server keeps answering afterwards
out=$(py badmac "$P_ENC" "$K_ENC_KID" 1.0)
if [ "$out" = "no reply" ]; then
    pass bad_mac_dropped "encrypted datagram with a wrong MAC to enc: no reply within 1 s"
else
    fail bad_mac_dropped "encrypted datagram with a wrong MAC to enc: expected no reply, got $out"
fi
out=$(py probe "$P_ENC" 3)
if [ $? = 0 ]; then pass enc_answers_after_bad_mac "$out"; else fail enc_answers_after_bad_mac "no reply to a plain STAT: $out"; fi

# ---------------------------------------------------------------- 7. delete through the encrypted rule
echo "== encrypted delete"; check_alive
fuzzy_op del_msg1_encrypted fuzzy_del 1 "" msg1.eml
settle
expect_hits gone_after_del_msg1 msg1.eml ""
expect_hits gone_after_del_msg2 msg2.eml ""
expect_hits kept_after_del_msg3 msg3.eml "FUZZY_ENC FUZZY_ENC_PLAIN"
expect_stat stat_enc_after_del enc 1

# ---------------------------------------------------------------- 8. keypair from shinglectl
echo "== keypair made by shinglectl keypair"
if [ $SHKEY = 1 ]; then
    check_alive
    fuzzy_op add_msg7_shkey fuzzy_add 4 10 msg7.eml; H7=$HASHES
    settle
    expect_hits hit_exact_msg7_shkey msg7.eml FUZZY_SHKEY &&
        expect_option hit_exact_msg7_shkey_option FUZZY_SHKEY 4 "${H7:-}" exact
    expect_stat stat_shkey_after_add shkey 1
    expect_trace wire_shkey_rule_encrypted shkey enc "$K_SHKEY_KID"
else
    note "skipped: shinglectl keypair with rspamd (no shinglectl)"
fi

# ---------------------------------------------------------------- 9. --check-config and mismatched keys
echo "== shingled --check-config"
if [ "$MODE" = shingled ]; then
    out=$(timeout 10 "$SHINGLED" --check-config --config "$TMP/srv-enc/shingled.conf" 2>&1); code=$?
    if [ $code = 0 ]; then
        pass check_config_accepts_rspamadm_keypair "exit 0"
    else
        fail check_config_accepts_rspamadm_keypair "exit $code: $(echo "$out" | head -5 | tr '\n' ' ')"
    fi
    # privkey of enc with pubkey of enconly: both valid keys, but not one pair
    bad="$TMP/bad-keypair.conf"
    {
        echo "# keypair whose pubkey does not belong to its privkey"
        echo "bind_socket = \"127.0.0.1:$P_SHKEY\";"
        echo "counters_bind_socket = [];"
        echo "ratelimit_bind_socket = [];"
        echo "allow_update = [\"127.0.0.1\"];"
        echo "keypair {"
        grep -E '^\s*privkey\s*=' "$KEYS/enc.kp"
        grep -E '^\s*pubkey\s*=' "$KEYS/enconly.kp"
        echo "    encoding = \"base32\";"
        echo "}"
    } >"$bad"
    out=$(timeout 10 "$SHINGLED" --check-config --config "$bad" 2>&1); code=$?
    line=$(echo "$out" | grep -o "$(basename "$bad"):[0-9]*" | head -1 | cut -d: -f2)
    if [ $code != 0 ] && [ -n "$line" ] && [ "$line" -ge 4 ] && [ "$line" -le 8 ] &&
       echo "$out" | grep -qi 'pubkey\|privkey\|public\|secret'; then
        pass check_config_refuses_mismatched_keypair "exit $code: $(echo "$out" | head -2 | tr '\n' ' ' | cut -c1-240)"
    else
        fail check_config_refuses_mismatched_keypair "expected a non-zero exit and FILE:LINE (LINE 4..8, the keypair block) with a reason naming the key; exit $code, output: $(echo "$out" | head -5 | tr '\n' ' ')"
    fi
else
    note "skipped: shingled --check-config of a mismatched keypair (rspamd's storage does not check that pubkey belongs to privkey)"
fi

# every scan of the run: the plain rule to the encrypted_only server got 403 -> FUZZY_BLOCKED
if [ "$NBLOCKED_OK" -gt 0 ] && [ "$NBLOCKED_BAD" = 0 ]; then
    pass plain_rule_to_enconly_blocked_all_scans "$ENCONLY_SYM with option enconly_plain on all $NBLOCKED_OK scans"
else
    fail plain_rule_to_enconly_blocked_all_scans "expected $ENCONLY_SYM (option enconly_plain) on every scan; wrong on:$BLOCKED_BAD"
fi

check_alive

# FUZZY_TCP: the requests above did come over TCP, sealed and plain alike.
if [ -n "$RULE_TCP" ] && [ -n "$SHINGLECTL" ]; then
    for srv in enc enconly; do
        frames=$(timeout 10 "$SHINGLECTL" --socket "$TMP/srv-$srv/ctl.sock" stats --json 2>/dev/null |
                 python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["totals"]["tcp_frames"], d["totals"]["encrypted_requests"])' 2>/dev/null)
        if [ "${frames%% *}" -gt 0 ] 2>/dev/null; then pass "rules_talk_tcp_$srv" "frames, encrypted requests: $frames"
        else fail "rules_talk_tcp_$srv" "FUZZY_TCP=1 but '$srv' received no TCP frame ($frames)"; fi
    done
fi

finish
