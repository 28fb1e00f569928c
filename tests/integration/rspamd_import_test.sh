#!/usr/bin/env bash
# Moving from rspamd's own fuzzy storage to shingled, as a user would:
#  1. rspamd 3.4's fuzzy worker (sqlite backend) stores mails added with
#     `rspamc fuzzy_add` into its fuzzy.db;
#  2. `shinglectl import-rspamd fuzzy.db` brings them into a shingled
#     database;
#  3. shingled starts on that database on the SAME port, and the unchanged
#     rspamd finds the mails through it: exact hits with their flags and
#     values, near-duplicates through the imported shingles, nothing for an
#     unrelated mail.
# Usage: rspamd_import_test.sh --build BUILD_DIR [--vectors DIR] [--keep]
# The last line of output is always "N passed, M failed".
set -u
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"

BUILD=""; VECTORS="${SHINGLED_VECTORS:-}"; KEEP=0
MODE=rspamd; SHINGLED=""; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=""; START_TIMEOUT=20; RT=5; TRACE=0; FUZZY_TIMEOUT=2s
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD="${2:?--build needs a dir}"; shift 2 ;;
        --vectors) VECTORS="${2:?}"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown argument: $1 (usage: $0 --build BUILD_DIR [--vectors DIR] [--keep])" ;;
    esac
done
[ -n "$BUILD" ] || die "--build BUILD_DIR is required"
SHINGLED=$(realpath "$BUILD/src/daemon/shingled")
CTL=$(realpath "$BUILD/tools/shinglectl")
[ -x "$SHINGLED" ] && [ -x "$CTL" ] || die "no shingled/shinglectl under $BUILD"

lib_check_env sqlite3
lib_setup rspamd-import-test
read -r P_NORMAL P_CTRL P_FUZZY <<<"$(free_ports 3)"
[ -n "$P_FUZZY" ] || die "could not pick free ports"
echo "tmp=$TMP ports: normal=$P_NORMAL controller=$P_CTRL fuzzy=$P_FUZZY"
lib_make_mails

# ---------------------------------------------------------------- 1. rspamd's own storage
SERVER_PID_main=""
start_server main "$P_FUZZY" 127.0.0.1
wait_server main "$P_FUZZY" || finish
RSPAMD_SYMBOLS='    FUZZY_DENIED_TEST { weight = 10.0; description = "fuzzy flag 1"; }
    FUZZY_WHITE_TEST { weight = -5.0; description = "fuzzy flag 2"; }'
RSPAMD_RULES=$(plain_fuzzy_rule test "127.0.0.1:$P_FUZZY" "FUZZY_DENIED_TEST:1 FUZZY_WHITE_TEST:2")
start_rspamd

echo "== writes into rspamd's fuzzy worker (sqlite)"
fuzzy_op add_msg1 fuzzy_add 1 10 msg1.eml; H1=$HASHES
fuzzy_op add_msg1_again fuzzy_add 1 10 msg1.eml
fuzzy_op add_msg4 fuzzy_add 1 7 msg4.eml; H4=$HASHES
fuzzy_op add_msg3 fuzzy_add 2 10 msg3.eml; H3=$HASHES
settle
expect_sym rspamd_storage_has_msg1 msg1.eml FUZZY_DENIED_TEST present

# Stop rspamd's storage: it flushes on exit, and frees the port for shingled.
kill -TERM "$SERVER_PID_main" 2>/dev/null
for _ in $(seq 100); do kill -0 "$SERVER_PID_main" 2>/dev/null || break; sleep 0.1; done
for _ in $(seq 100); do [ "$(py isbound "$P_FUZZY")" = 1 ] || break; sleep 0.1; done
DB="$TMP/srv-main/fuzzy.db"
n=$(sqlite3 "$DB" 'select count(*) from digests;' 2>&1)
if [ "$n" = 3 ]; then pass rspamd_wrote_fuzzy_db "$DB: 3 digests"; else fail rspamd_wrote_fuzzy_db "expected 3 digests in $DB, got: $n"; fi

# ---------------------------------------------------------------- 2. import
echo "== shinglectl import-rspamd"
mkdir -p "$TMP/srv-shingled"
out=$("$CTL" import-rspamd "$DB" --db "$TMP/srv-shingled/db" 2>&1); code=$?
if [ $code = 0 ]; then pass import_rspamd "$(echo "$out" | tr '\n' ' ')"; else fail import_rspamd "rc=$code: $out"; fi
out=$("$CTL" info --db "$TMP/srv-shingled/db" --json 2>&1)
if echo "$out" | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); assert d["hashes"]==3, d' 2>/dev/null; then
    pass info_counts_imported "$out"
else
    fail info_counts_imported "expected 3 hashes: $out"
fi

# ---------------------------------------------------------------- 3. shingled on the same port
echo "== shingled serves the imported hashes"
MODE=shingled
start_server shingled "$P_FUZZY" 127.0.0.1
wait_server shingled "$P_FUZZY" || finish
if grep -q "loaded 3 hashes" "$TMP/srv-shingled/stdout.log"; then
    pass shingled_loaded_3 "$(grep 'loaded 3 hashes' "$TMP/srv-shingled/stdout.log" | cut -c1-160)"
else
    fail shingled_loaded_3 "$(head -5 "$TMP/srv-shingled/stdout.log")"
fi
expect_sym hit_exact_msg1 msg1.eml FUZZY_DENIED_TEST present && {
    parse_opt FUZZY_DENIED_TEST
    exp=$(py score 10 20 1)
    if [ "$OPT_DIGEST" = "${H1:0:10}" ] && [ "$OPT_PROB" = 1.00 ] && py cmp "$SCORE" eq "$exp" 0.02; then
        pass msg1_value_20_imported "digest $OPT_DIGEST, score $SCORE = 10*tanh(e*20/100): both adds counted"
    else
        fail msg1_value_20_imported "expected 1:${H1:0:10}:1.00 and score $exp, seen: $(seen)"
    fi
}
expect_sym hit_exact_msg4 msg4.eml FUZZY_DENIED_TEST present && {
    parse_opt FUZZY_DENIED_TEST
    exp=$(py score 10 7 1)
    if py cmp "$SCORE" eq "$exp" 0.02; then pass msg4_value_7_imported "score $SCORE"; else fail msg4_value_7_imported "expected score $exp, seen $(seen)"; fi
}
expect_sym near_duplicate_msg2 msg2.eml FUZZY_DENIED_TEST present && {
    parse_opt FUZZY_DENIED_TEST
    if [ "$OPT_DIGEST" = "${H1:0:10}" ] && py cmp "$OPT_PROB" gt 0.5 && py cmp "$OPT_PROB" lt 1.0; then
        pass near_duplicate_msg2_via_imported_shingles "msg1's digest, prob $OPT_PROB"
    else
        fail near_duplicate_msg2_via_imported_shingles "expected 1:${H1:0:10}:0.5<p<1, seen: $(seen)"
    fi
}
expect_sym near_duplicate_msg5 msg5.eml FUZZY_DENIED_TEST present
expect_sym short_text_msg3_white msg3.eml FUZZY_WHITE_TEST present && {
    parse_opt FUZZY_WHITE_TEST
    if [ "$OPT_DIGEST" = "${H3:0:10}" ]; then pass msg3_digest "$OPT_DIGEST"; else fail msg3_digest "expected ${H3:0:10}, seen $(seen)"; fi
}
expect_none unrelated_msg6_misses msg6.eml
finish
