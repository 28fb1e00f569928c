#!/usr/bin/env bash
# Moving between rspamd's Redis fuzzy backend and shingled, both ways, as a
# user would:
#  1. rspamd's fuzzy worker on its Redis backend (its own redis-server with a
#     password, started here on a private port) stores mails added with
#     `rspamc fuzzy_add` (two flags, weights, a re-add, a delete);
#  2. bad imports against that Redis (no password, a wrong one, a prefix
#     with no keys) fail with exit 1 and leave no database behind;
#  3. `shinglectl import-rspamd-redis` brings the hashes over, and shingled
#     on the same port gives the unchanged rspamd the same answers: exact
#     hits with the added values, near-duplicates through the imported
#     shingles, misses for the deleted and the unknown mail;
#  4. `shinglectl export-rspamd-redis` writes them into an empty second
#     Redis (a password too); rspamd's fuzzy worker on that Redis answers the same again, and
#     importing it back gives the same database, byte for byte (dump).
# With RSPAMD_PREFIX pointing at a current rspamd (3.10+), its worker writes
# the current layout (a second flag on one hash) and the export uses it too.
# Usage: rspamd_redis_migrate_test.sh --build BUILD_DIR [--vectors DIR] [--keep]
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

lib_check_env redis-server redis-cli
lib_setup rspamd-redis-migrate-test
read -r P_NORMAL P_CTRL P_FUZZY P_REDIS_A P_REDIS_B <<<"$(free_ports 5)"
[ -n "$P_REDIS_B" ] || die "could not pick free ports"
echo "tmp=$TMP ports: normal=$P_NORMAL controller=$P_CTRL fuzzy=$P_FUZZY redis=$P_REDIS_A,$P_REDIS_B"
lib_make_mails
MULTI_FLAG=0
client_at_least 3.10 && MULTI_FLAG=1
LAYOUT=3.4
[ "$MULTI_FLAG" = 1 ] && LAYOUT=current

PASSWORD="pw-$$-$RANDOM"
printf '%s\n' "$PASSWORD" >"$TMP/redis-password"
start_redis() {  # name port [requirepass]
    local d="$TMP/redis-$1"
    mkdir -p "$d"
    redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" \
        --logfile "$d/redis.log" ${3:+--requirepass "$3"} >"$d/stdout.log" 2>&1 &
    PIDS+=("$!")
    printf -v "REDIS_PID_$1" '%s' "$!"
    for _ in $(seq 100); do
        redis-cli -p "$2" ${3:+--no-auth-warning -a "$3"} ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    fail "redis_$1_start" "redis-server on port $2 did not answer"
    finish
}
stop_fuzzy_server() {  # name
    local pidvar="SERVER_PID_$1"
    kill -TERM "${!pidvar}" 2>/dev/null
    for _ in $(seq 100); do kill -0 "${!pidvar}" 2>/dev/null || break; sleep 0.1; done
    for _ in $(seq 100); do [ "$(py isbound "$P_FUZZY")" = 1 ] || break; sleep 0.1; done
}
redis_backend() {  # port [password]
    RSPAMD_FUZZY_BACKEND="  backend = \"redis\";
  servers = \"127.0.0.1:$1\";
  timeout = 10;${2:+
  password = \"$2\";}"
}

RSPAMD_SYMBOLS='    FUZZY_DENIED_TEST { weight = 10.0; description = "fuzzy flag 1"; }
    FUZZY_WHITE_TEST { weight = -5.0; description = "fuzzy flag 2"; }'
RSPAMD_RULES=$(plain_fuzzy_rule test "127.0.0.1:$P_FUZZY" "FUZZY_DENIED_TEST:1 FUZZY_WHITE_TEST:2")

# The answers every storage must give the unchanged client, whichever holds
# the hashes. $1 names the storage in the check names.
expect_answers() {
    local who=$1 exp
    expect_sym "${who}_exact_msg1" msg1.eml FUZZY_DENIED_TEST present && {
        parse_opt FUZZY_DENIED_TEST
        exp=$(py score 10 20 1)
        if [ "$OPT_DIGEST" = "${H1:0:10}" ] && [ "$OPT_PROB" = 1.00 ] && py cmp "$SCORE" eq "$exp" 0.02; then
            pass "${who}_msg1_value_20" "digest $OPT_DIGEST, score $SCORE = 10*tanh(e*20/100): both adds counted"
        else
            fail "${who}_msg1_value_20" "expected 1:${H1:0:10}:1.00 and score $exp, seen: $(seen)"
        fi
    }
    expect_sym "${who}_near_duplicate_msg2" msg2.eml FUZZY_DENIED_TEST present && {
        parse_opt FUZZY_DENIED_TEST
        if [ "$OPT_DIGEST" = "${H1:0:10}" ] && py cmp "$OPT_PROB" gt 0.5 && py cmp "$OPT_PROB" lt 1.0; then
            pass "${who}_msg2_via_msg1_shingles" "msg1's digest, prob $OPT_PROB"
        else
            fail "${who}_msg2_via_msg1_shingles" "expected 1:${H1:0:10}:0.5<p<1, seen: $(seen)"
        fi
    }
    expect_sym "${who}_short_text_msg3_white" msg3.eml FUZZY_WHITE_TEST present && {
        parse_opt FUZZY_WHITE_TEST
        if [ "$OPT_DIGEST" = "${H3:0:10}" ]; then pass "${who}_msg3_digest" "$OPT_DIGEST"; else fail "${who}_msg3_digest" "expected ${H3:0:10}, seen $(seen)"; fi
    }
    expect_none "${who}_deleted_msg4_misses" msg4.eml
    expect_none "${who}_unknown_msg6_misses" msg6.eml
}

# ---------------------------------------------------------------- 1. rspamd on Redis
start_redis a "$P_REDIS_A" "$PASSWORD"
redis_backend "$P_REDIS_A" "$PASSWORD"
start_server main "$P_FUZZY" 127.0.0.1
wait_server main "$P_FUZZY" || finish
start_rspamd
echo "== writes into rspamd's fuzzy worker (Redis, rspamd $RSPAMD_CLIENT_VERSION)"
fuzzy_op add_msg1 fuzzy_add 1 10 msg1.eml; H1=$HASHES
fuzzy_op add_msg1_again fuzzy_add 1 10 msg1.eml
fuzzy_op add_msg3 fuzzy_add 2 10 msg3.eml; H3=$HASHES
[ "$MULTI_FLAG" = 1 ] && fuzzy_op add_msg3_second_flag fuzzy_add 1 3 msg3.eml
fuzzy_op add_msg4 fuzzy_add 1 7 msg4.eml
settle
fuzzy_op delete_msg4 fuzzy_del 1 "" msg4.eml
settle
expect_answers rspamd_redis
stop_fuzzy_server main
digests=$(redis-cli -p "$P_REDIS_A" --no-auth-warning -a "$PASSWORD" --scan --pattern 'fuzzy*' |
          awk 'length($0) > 40' | wc -l)
echo "Redis a holds $(redis-cli -p "$P_REDIS_A" --no-auth-warning -a "$PASSWORD" dbsize) keys, about $digests of them digests"

# ---------------------------------------------------------------- 2. refused imports
echo "== refused imports leave nothing behind"
DB="$TMP/srv-shingled/db"
mkdir -p "$TMP/srv-shingled"
refused() {  # name expected-text args...
    local name=$1 want=$2 out code
    shift 2
    out=$("$CTL" import-rspamd-redis --redis "127.0.0.1:$P_REDIS_A" --db-dir "$DB" "$@" 2>&1); code=$?
    if [ $code = 1 ] && echo "$out" | grep -q -- "$want" && [ ! -e "$DB" ]; then
        pass "$name" "exit 1: $(echo "$out" | head -1 | cut -c1-150)"
    else
        fail "$name" "expected exit 1 with '$want' and no $DB; rc=$code: $out; $(ls "$DB" 2>&1)"
    fi
}
refused import_without_password_refused "password" 
echo "not-the-password" >"$TMP/wrong-password"
refused import_with_wrong_password_refused "authentication refused" --password-file "$TMP/wrong-password"
refused import_of_an_empty_prefix_refused "no digest under the prefix 'nothing'" \
    --password-file "$TMP/redis-password" --prefix nothing

# ---------------------------------------------------------------- 3. import, shingled answers
echo "== shinglectl import-rspamd-redis"
out=$("$CTL" import-rspamd-redis --redis "127.0.0.1:$P_REDIS_A" --password-file "$TMP/redis-password" \
      --db-dir "$DB" 2>&1); code=$?
echo "$out" | indent
if [ $code = 0 ] && echo "$out" | grep -q "^2 digests (2 with shingles\|^2 digests (1 with shingles, 1 without"; then
    pass import_rspamd_redis "$(echo "$out" | head -1 | cut -c1-160)"
else
    fail import_rspamd_redis "rc=$code, expected 2 digests (msg1 with shingles, msg3 short text): $out"
fi
"$CTL" dump --db "$DB" >"$TMP/imported.jsonl" 2>&1
if "$PYTHON" - "$TMP/imported.jsonl" "$H1" "$H3" "$MULTI_FLAG" <<'EOF'
import json, sys
path, h1, h3, multi = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
recs = {r["digest"]: r for r in map(json.loads, open(path))}
assert len(recs) == 2, recs.keys()
m1 = next(r for d, r in recs.items() if d.startswith(h1[:16]))
m3 = next(r for d, r in recs.items() if d.startswith(h3[:16]))
assert m1["flags"] == [{"flag": 1, "value": 20}], m1["flags"]
assert "shingles" in m1, "msg1 came without shingles"
want3 = [{"flag": 2, "value": 10}] + ([{"flag": 1, "value": 3}] if multi else [])
assert m3["flags"] == want3, m3["flags"]
assert m1["first_write"] <= m1["last_write"]
EOF
then pass imported_records_exact "msg1 flag 1 value 20 with 32 shingles; msg3 flags $([ "$MULTI_FLAG" = 1 ] && echo '2:10,1:3' || echo '2:10')"
else fail imported_records_exact "$(cat "$TMP/imported.jsonl" | cut -c1-300)"; fi

MODE=shingled
start_server shingled "$P_FUZZY" 127.0.0.1
wait_server shingled "$P_FUZZY" || finish
expect_answers shingled
stop_fuzzy_server shingled

# ---------------------------------------------------------------- 4. export, rspamd answers again
echo "== shinglectl export-rspamd-redis --layout $LAYOUT"
PASSWORD_B="pwb-$$-$RANDOM"
start_redis b "$P_REDIS_B" "$PASSWORD_B"
out=$("$CTL" export-rspamd-redis --redis "127.0.0.1:$P_REDIS_B" --password "$PASSWORD_B" --layout "$LAYOUT" --db-dir "$DB" 2>&1); code=$?
echo "$out" | indent
if [ $code = 0 ] && echo "$out" | grep -q "^exported 2 digests"; then pass export_rspamd_redis "$(echo "$out" | head -1 | cut -c1-160)"
else fail export_rspamd_redis "rc=$code: $out"; fi
out=$("$CTL" export-rspamd-redis --redis "127.0.0.1:$P_REDIS_B" --password "$PASSWORD_B" --db-dir "$DB" 2>&1); code=$?
if [ $code = 1 ] && echo "$out" | grep -q "already holds keys"; then pass export_into_a_filled_prefix_refused "$(echo "$out" | cut -c1-150)"
else fail export_into_a_filled_prefix_refused "rc=$code: $out"; fi
RB=(redis-cli -p "$P_REDIS_B" --no-auth-warning -a "$PASSWORD_B")
ttl=$("${RB[@]}" --scan --pattern 'fuzzy_0_*' | head -1 | xargs -d '\n' "${RB[@]}" ttl)
if [ -n "$ttl" ] && [ "$ttl" -gt 7700000 ] && [ "$ttl" -le 7776000 ]; then pass exported_ttl_from_expiry "a shingle key's TTL $ttl s (90 d from the last write)"
else fail exported_ttl_from_expiry "expected a TTL just under 7776000, got '$ttl'"; fi

out=$("$CTL" import-rspamd-redis --redis "127.0.0.1:$P_REDIS_B" --password "$PASSWORD_B" --db-dir "$TMP/roundtrip" 2>&1); code=$?
"$CTL" dump --db "$TMP/roundtrip" >"$TMP/roundtrip.jsonl" 2>&1
# Before rspamd reads Redis b (its hits refresh TTLs): the same records; the
# expiry round-trips through whole seconds of TTL.
if [ $code = 0 ] && "$PYTHON" - "$TMP/imported.jsonl" "$TMP/roundtrip.jsonl" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 2
for x, y in zip(a, b):
    assert abs(x.pop("last_write") - y.pop("last_write")) <= 2, (x, y)
    assert x == y, (x, y)
EOF
then pass export_then_import_same_records "digests, flags, values, shingles and first_write equal; last_write within 2 s"
else fail export_then_import_same_records "rc=$code: $out; $(diff "$TMP/imported.jsonl" "$TMP/roundtrip.jsonl" | head -5)"; fi

MODE=rspamd
redis_backend "$P_REDIS_B" "$PASSWORD_B"
start_server exported "$P_FUZZY" 127.0.0.1
wait_server exported "$P_FUZZY" || finish
expect_answers rspamd_on_export
stop_fuzzy_server exported

finish
