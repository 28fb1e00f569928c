#!/usr/bin/env bash
# A hardened rspamd fuzzy worker block pasted into shingled, driven by a real
# rspamd (Debian's 3.4 in CI; RSPAMD_PREFIX for another): the stock block
# (count, backend = "redis", expire) plus the per-network limit with a
# whitelist map, a blocked map, two keypairs with different permissions
# ("scanners": read only, rspamd's default; "learners": read, write, delete,
# with a limit of its own), a dynamic_keys_map, forbidden_ids and weak_ids,
# and no allow_update: writes are allowed by key only, as rspamd decides.
#
#  1. the block loads (warnings for backend only) and the daemon serves it;
#  2. a learn through the learners key succeeds; through the scanners key it
#     is refused (503) and nothing is stored;
#  3. scans read through both keys;
#  4. a dynamic key that may write learns; the map edited while the daemon
#     runs replaces it with another, which learns within 2 s, while the
#     removed one is no longer answered;
#  5. shinglectl stats names the keys;
#  6. a key past its expire day is refused on CHECK (503): rspamd 3.10+
#     shows FUZZY_FORBIDDEN, 3.4 only logs the code; either way no hit.
#
# Usage: rspamd_fuzzy_keys_test.sh --build BUILD_DIR
set -u
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"
MODE=cmd; SHINGLED=""; SHINGLECTL=""; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=0; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=20; RT=8; TRACE=0; KEEP=0; FUZZY_TIMEOUT=1s
while [ $# -gt 0 ]; do
    case "$1" in
        --build) SHINGLED="${2:?}/src/daemon/shingled"; SHINGLECTL="$2/tools/shinglectl"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown argument: $1" ;;
    esac
done
[ -n "$SHINGLED" ] || die "usage: rspamd_fuzzy_keys_test.sh --build BUILD_DIR"
SHINGLED=$(realpath "$SHINGLED"); SHINGLECTL=$(realpath "$SHINGLECTL")
lib_check_env
lib_setup rspamd-fuzzy-keys-test
read -r P_NORMAL P_CTRL P_FUZZY <<<"$(free_ports 3)"
lib_make_mails

# ---------------------------------------------------------------- keys, maps, config
for k in scan learn dyn dyn2 old; do
    "$SHINGLECTL" keypair >"$TMP/$k.kp" || die "shinglectl keypair failed"
    printf -v "PUB_$k" '%s' "$(sed -n 's/^ *pubkey = "\(.*\)";/\1/p' "$TMP/$k.kp")"
done
block() {  # block KEYFILE EXTENSIONS: the keypair's block with extensions { EXTENSIONS }
    sed '$d' "$1"
    echo "    extensions { $2 }"
    echo "}"
}
dynamic_map() {  # dynamic_map KEYFILE NAME: a dynamic_keys_map file holding that key
    {
        echo "# partners' keys (written by the configuration manager)"
        echo "["
        block "$1" "name = \"$2\"; allowed_ops = [\"read\", \"write\"];" | sed 's/^keypair //'
        echo "]"
    } >"$TMP/dynamic.map.new" && mv "$TMP/dynamic.map.new" "$TMP/dynamic.map"
}
dynamic_map "$TMP/dyn.kp" partner
echo "192.0.2.66  # a scanner that abused us" >"$TMP/blocked.map"
echo "10.0.0.0/8" >"$TMP/rl_white.map"
cat >"$TMP/hardened.conf" <<EOF
worker "fuzzy" {
  bind_socket = "127.0.0.1:$P_FUZZY";
  count = -1;
  backend = "redis";
  expire = 90d;
  ratelimit_rate = 50;
  ratelimit_burst = 500;
  ratelimit_network_mask = 24;
  ratelimit_bucket_ttl = 1h;
  ratelimit_max_buckets = 10000;
  ratelimit_whitelist = "$TMP/rl_white.map";
  blocked = "file://$TMP/blocked.map";
$(block "$TMP/scan.kp" 'name = "scanners";')
$(block "$TMP/learn.kp" 'name = "learners"; allowed_ops = ["read", "write", "delete"]; ratelimit = "100000 / 1h";')
$(block "$TMP/old.kp" 'name = "retired"; expire = "01-01-2020";')
  dynamic_keys_map = "$TMP/dynamic.map";
  forbidden_ids = [99];
  weak_ids = [98];
}
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
counters_bind_socket = [];
ratelimit_service_bind_socket = [];
workers = 2;
EOF

echo "== 1. the hardened block"
out=$("$SHINGLED" --config "$TMP/hardened.conf" --check-config 2>&1)
if [ $? = 0 ] && [ "$(grep -c '^warning' <<<"$out")" = 1 ] && grep -q "option 'backend'" <<<"$out"; then
    pass hardened_block_loads "one warning: $(grep '^warning' <<<"$out" | cut -c1-100)"
else
    fail hardened_block_loads "$(echo "$out" | grep -v '^  ' | head -5)"
fi
SERVER_CMD="'$SHINGLED' --config '$TMP/hardened.conf'"
start_server main "$P_FUZZY" -
wait_server main "$P_FUZZY" || finish
if grep -q "writes are allowed by key only" "$TMP/srv-main/stdout.log"; then
    pass writes_by_key_only_is_logged
else
    fail writes_by_key_only_is_logged "no such line at start"
fi

rule() {  # name key flag symbol [read_only]
    echo "  rule \"$1\" {"
    echo "    servers = \"127.0.0.1:$P_FUZZY\";"
    echo "    read_only = ${5:-false};"
    echo "    encryption_key = \"$2\";"
    echo "    timeout = 1s;"
    echo "    retransmits = 1;"
    echo "    max_score = 100.0;"
    echo "    mime_types = [\"*\"];"
    echo "    short_text_direct_hash = true;"
    echo "    min_length = 64;"
    echo "    fuzzy_map = { $4 { max_score = 100.0; flag = $3; } }"
    echo "  }"
}
RSPAMD_SYMBOLS='    FUZZY_SCAN { weight = 1.0; }
    FUZZY_SCAN_SEES_LEARNED { weight = 1.0; }
    FUZZY_LEARN { weight = 1.0; }
    FUZZY_DYN { weight = 1.0; }
    FUZZY_DYN2 { weight = 1.0; }
    FUZZY_OLD { weight = 1.0; }'
# scan: the scanners key trying to learn (flag 11); scan_read: the same key
# reading what the learners key learned (flag 12), as a read-only rule.
RSPAMD_RULES="$(rule scan "$PUB_scan" 11 FUZZY_SCAN)
$(rule scan_read "$PUB_scan" 12 FUZZY_SCAN_SEES_LEARNED true)
$(rule learn "$PUB_learn" 12 FUZZY_LEARN)
$(rule dyn "$PUB_dyn" 13 FUZZY_DYN)
$(rule dyn2 "$PUB_dyn2" 14 FUZZY_DYN2)
$(rule old "$PUB_old" 12 FUZZY_OLD true)"
start_rspamd
check_alive

echo "== 2. writes by key"
fuzzy_op learners_key_learns fuzzy_add 12 10 msg1.eml
f="$TMP/op-scan.out"
rc "$f" -h "127.0.0.1:$P_CTRL" -f 11 -w 10 fuzzy_add "$TMP/mail/msg6.eml"; code=$?
if [ $code != 0 ] && ! grep -q 'success = true' "$f"; then
    pass scanners_key_may_not_learn "rspamc fuzzy_add -f 11: exit $code: $(grep -v '^Results for\|^$' "$f" | tr '\n' ' ' | cut -c1-160)"
else
    fail scanners_key_may_not_learn "expected a refusal, rc=$code: $(tr '\n' ' ' <"$f")"
fi
errors=$("$SHINGLECTL" --socket "$TMP/ctl.sock" stats --json | "$PYTHON" -c "
import json, sys
keys = {k.get('name'): k for k in json.load(sys.stdin)['keys'] if 'name' in k}
print(keys['scanners']['errors'], keys['learners']['writes'])")
[ "$errors" = "1 1" ] && pass stats_name_the_keys "scanners errors 1, learners writes 1" ||
    fail stats_name_the_keys "scanners errors / learners writes = $errors"

echo "== 3. reads through both keys"
expect_sym learned_mail_hits_through_learners msg1.eml FUZZY_LEARN present
expect_sym learned_mail_hits_through_scanners msg1.eml FUZZY_SCAN_SEES_LEARNED present
# (FUZZY_FORBIDDEN may show: the expired key's rule, part 6)
scan msg6.eml
if [ -z "$(sym_line FUZZY_SCAN)$(sym_line FUZZY_LEARN)$(sym_line FUZZY_SCAN_SEES_LEARNED)" ]; then
    pass refused_learn_stored_nothing "msg6.eml: $(seen)"
else
    fail refused_learn_stored_nothing "msg6.eml hits: $(seen)"
fi

echo "== 4. dynamic keys"
fuzzy_op dynamic_key_learns fuzzy_add 13 10 msg3.eml
dynamic_map "$TMP/dyn2.kp" partner2
start=$(date +%s%N)
ok=0
for _ in $(seq 20); do
    if rc "$TMP/op-dyn2.out" -h "127.0.0.1:$P_CTRL" -f 14 -w 10 fuzzy_add "$TMP/mail/msg4.eml" &&
       grep -q 'success = true' "$TMP/op-dyn2.out"; then ok=1; break; fi
    sleep 0.1
done
ms=$((($(date +%s%N) - start) / 1000000))
if [ $ok = 1 ] && [ $ms -lt 2000 ]; then
    pass new_dynamic_key_learns_after_the_edit "after $ms ms"
else
    fail new_dynamic_key_learns_after_the_edit "ok=$ok after $ms ms: $(tr '\n' ' ' <"$TMP/op-dyn2.out" | cut -c1-200)"
fi
rc "$TMP/op-dyn-gone.out" -h "127.0.0.1:$P_CTRL" -f 13 -w 10 fuzzy_add "$TMP/mail/msg5.eml"; code=$?
if [ $code != 0 ] && ! grep -q 'success = true' "$TMP/op-dyn-gone.out"; then
    pass removed_dynamic_key_is_not_answered "exit $code"
else
    fail removed_dynamic_key_is_not_answered "the removed key still learns"
fi
echo "== 6. an expired key"
scan msg1.eml
if [ -n "$(sym_line FUZZY_OLD)" ]; then
    fail expired_key_is_refused "the expired key still reads: $(seen)"
elif client_at_least 3.10 && [ -z "$(sym_line FUZZY_FORBIDDEN)" ]; then
    fail expired_key_is_refused "no FUZZY_FORBIDDEN from a $RSPAMD_CLIENT_VERSION client: $(seen)"
else
    pass expired_key_is_refused "$(seen)"
fi
expired=$("$SHINGLECTL" --socket "$TMP/ctl.sock" stats --json |
    "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['totals']['key_expired'])")
[ "$expired" -ge 1 ] && pass expired_key_counted "key_expired = $expired" || fail expired_key_counted "key_expired = $expired"
check_alive
finish
