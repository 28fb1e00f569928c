#!/usr/bin/env bash
# Issue 20 end to end: an admin's own rspamd `ratelimit` section works
# unchanged with shingled. A REAL shingled (two workers, no rules of its
# own) and a REAL, unmodified rspamd 3.4 loading
# contrib/rspamd/shingled_ratelimit.lua with its default `rules = "rspamd"`:
# the plugin reads rspamd's `ratelimit { rates { } }` (keyword families,
# a selector, per-bucket options, whitelists from map files), forms the
# buckets as rspamd does and sends them to shingled, which decides.
#
# Checked through what rspamc shows (action, SMTP message, symbols) and
# through shingled (`shinglectl ratelimit peek --rspamd-key`): the
# principal recipient rule and recipient-count charging; a 6-recipient
# message limited by default; the families ip, from, to_ip_from, user, rip
# and bounce_to; a selector rule with its own symbol (no soft reject);
# skip_recipients; a per-bucket message; whitelisted IP, recipient and
# user from map files; and that limits stay in force after a SIGTERM
# restart and after kill -9 (buckets are synced to the LMDB environment).
#
# Usage: rspamd_ratelimit_rules_test.sh [--build BUILD_DIR] [--keep] [--start-timeout SEC]
# Prints PASS/FAIL lines; the last line is "N passed, M failed"; exit status
# 0 only if M = 0. Missing rspamd, rspamc, python3 or the build is a FAIL.
# Only random loopback ports; stops only the processes it started (by PID).
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/integration/lib_check.sh
. "$SCRIPT_DIR/lib_check.sh"
# shellcheck source=tests/integration/lib_rl_rspamd.sh
. "$SCRIPT_DIR/lib_rl_rspamd.sh"

RT=5
rl_parse_args 2,22 "$@"
shingled="$build/src/daemon/shingled"
ctl="$build/tools/shinglectl"
PLUGIN="$REPO_DIR/contrib/rspamd/shingled_ratelimit.lua"

abort() { fail "$1" "$2"; finish; exit 1; }
for tool in rspamd rspamc python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 ||
        abort "requirements" "$tool not found in PATH (Debian 12: apt-get install rspamd python3 coreutils)"
done
[ -x "$shingled" ] || abort "requirements" "no shingled at $shingled"
[ -x "$ctl" ] || abort "requirements" "no shinglectl at $ctl"
PYTHON=$(python3 -c 'import sys; print(sys.executable)') || abort "requirements" "python3 does not run"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rspamd-rl-rules.XXXXXX") || abort "setup" "mktemp failed"
PIDS=(); CHILD_PIDS=()
trap rl_cleanup EXIT
trap 'trap - INT TERM; fail interrupted "signal before the end of the run"; finish; exit 130' INT TERM

# rspamc --json -> "ACTION|MESSAGE|SYMBOL-OPTIONS" (options of SYMBOL, or -)
cat >"$TMP/scan.py" <<'PYEOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print('unparsable|-|-'); sys.exit(0)
sym = d.get('symbols', {}).get(sys.argv[2]) if len(sys.argv) > 2 else None
opts = ','.join(sym.get('options', [])) if sym else '-'
print('%s|%s|%s' % (d.get('action', 'none'),
                    d.get('messages', {}).get('smtp_message', '-').replace('\n', ' '), opts))
PYEOF

read -r P_FUZZY P_RL P_A <<<"$("$PYTHON" -S "$SCRIPT_DIR/free_ports.py" 3)"
[ -n "${P_A:-}" ] || abort "setup" "could not pick free loopback ports"

# ---------------------------------------------------------------- shingled (no rules of its own)
S="$TMP/shingled"
mkdir -p "$S"
cat >"$S/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$P_FUZZY";
counters_bind_socket = [];
ratelimit_bind_socket = "127.0.0.1:$P_RL";
ratelimit_service_max_buckets = 65536;
max_hashes = 10000;
workers = 2;
hashfile = "$S/db";
control_socket = "$S/ctl.sock";
sync = 1s;
EOF
start_shingled() {
    "$shingled" --config "$S/shingled.conf" >>"$S/daemon.log" 2>&1 &
    SHINGLED_PID=$!
    PIDS+=("$SHINGLED_PID")
    for _ in $(seq $((START_TIMEOUT * 10))); do
        kill -0 "$SHINGLED_PID" 2>/dev/null || return 1
        "$ctl" --socket "$S/ctl.sock" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
start_shingled || abort shingled_ready "shingled did not start: $(tail -n 5 "$S/daemon.log" | tr '\n' ' ')"
pass "shingled_ready (no ratelimit rules in its config)"

# peek_key KEYSTRING BURST -> "EXISTED LEVEL" of rspamd's bucket named by KEYSTRING
peek_key() {
    "$ctl" ratelimit peek "$1" --rspamd-key --burst "$2" --leak 0 --server "127.0.0.1:$P_RL" --json \
        >"$TMP/peek.json" 2>&1 || { echo "peek failed: $(head -c 200 "$TMP/peek.json")"; return; }
    "$PYTHON" -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(str(d["existed"]).lower(), "%.3f" % d["level"])' "$TMP/peek.json"
}

# ---------------------------------------------------------------- rspamd with rspamd's own ratelimit section
mkdir -p "$TMP/mail" "$TMP/maps"
printf 'com\norg\nnet\nexample\n' >"$TMP/tld.dat"
ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)
mail() {  # FILE [HEADER-LINE]
    { echo "From: Someone <someone@sender.example>"
      echo "To: Bob <bob@rcpt.example>"
      echo "Subject: Minutes"
      echo "Date: Tue, 03 Nov 2026 09:00:00 +0000"
      echo "Message-ID: <$(basename "$1")@sender.example>"
      [ -n "${2:-}" ] && echo "$2"
      echo "MIME-Version: 1.0"
      echo "Content-Type: text/plain; charset=utf-8"
      echo
      echo "Hello, the minutes are below."; } >"$1"
}
mail "$TMP/mail/plain.eml"
mail "$TMP/mail/tenant.eml" "X-Tenant: acme"
echo "vip@rcpt.example" >"$TMP/maps/rcpts.map"
echo "192.0.2.0/24" >"$TMP/maps/ip.map"
echo "trusted" >"$TMP/maps/user.map"

# Bursts, per hour (the leak is negligible during the run). R = round(100000 / burst).
RATELIMIT_UCL=$(cat <<EOF
ratelimit {
  whitelisted_rcpts = "file://$TMP/maps/rcpts.map";
  whitelisted_ip = "file://$TMP/maps/ip.map";
  whitelisted_user = "file://$TMP/maps/user.map";
  rates {
    to = "4 / 1h";
    ip = { bucket = { burst = 3; rate = "3 / 1h"; message = "IP over its limit"; } }
    rip = "1 / 1h";
    from = "5 / 1h";
    to_ip_from = "2 / 1h";
    bounce_to = "1 / 1h";
    user = { bucket = [ { burst = 5; rate = "5 / 1h"; skip_recipients = true; } ] }
    tenant = { selector = 'header("X-Tenant")'; bucket = { burst = 2; rate = "2 / 1h"; symbol = "TENANT_LIMIT"; } }
  }
}
EOF
)
rl_rspamd_start A "$P_A" "127.0.0.1:$P_RL" '  timeout = 1s;
  retransmits = 1;' "$RATELIMIT_UCL"
rc() {  # OUTFILE rspamc-args...
    local out=$1; shift
    timeout -k 2 $((RT + 5)) rspamc -t "$RT" "$@" >"$out" 2>&1
}
if rl_rspamd_wait A "$P_A" ready@rcpt.example; then
    remember=$(cat /proc/"$RSPAMD_PID_A"/task/*/children 2>/dev/null | tr '\n' ' ')
    read -r -a kids <<<"$remember"; CHILD_PIDS+=("${kids[@]}")
    case "$RL_RSPAMD_LOADED" in
        *"rspamd's ratelimit rules: bounce_to, from, ip, rip, tenant, to, to_ip_from, user"*)
            pass "rspamd_ready_with_the_sections_rules ($RL_RSPAMD_LOADED)" ;;
        *) fail rspamd_ready_with_the_sections_rules "expected every rule read; loaded: $RL_RSPAMD_LOADED" ;;
    esac
else
    abort rspamd_ready "rspamd did not answer with the plugin loaded: $(tail -n 5 "$TMP/rspamd-A/rspamd.log" | tr '\n' ' ' | cut -c1-600)"
fi

NSCAN=0
# scan [--mail FILE] [--symbol NAME] rspamc-args... -> ACTION MESSAGE OPTIONS
scan() {
    local file="$TMP/mail/plain.eml" sym=""
    [ "$1" = --mail ] && { file=$2; shift 2; }
    [ "$1" = --symbol ] && { sym=$2; shift 2; }
    NSCAN=$((NSCAN + 1))
    rc "$TMP/scan-$NSCAN.json" -h "127.0.0.1:$P_A" --json -U test-mta "$@" "$file"
    IFS='|' read -r ACTION MESSAGE OPTIONS < <("$PYTHON" -S "$TMP/scan.py" "$TMP/scan-$NSCAN.json" $sym)
}
shown() { echo "action $ACTION, message $MESSAGE"; }
expect_pass() {
    if [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; then pass "$1 ($(shown))"
    else fail "$1" "expected no action; rspamc showed $(shown)"; fi
}
expect_limit() {  # CHECK TEXT
    if [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = "$2" ]; then pass "$1 ($(shown))"
    else fail "$1" "expected soft reject '$2'; rspamc showed $(shown)"; fi
}
# n_pass_then_limit CHECK N TEXT ARGS-FOR-MAIL-i... : mails 1..N pass, N+1 is
# soft-rejected with TEXT; each argument may use $i (evaluated per mail)
n_pass_then_limit() {
    local name=$1 n=$2 text=$3 i ok=1 seen=(); shift 3
    for i in $(seq $((n + 1))); do
        eval "scan $*"
        seen+=("$i:${ACTION// /_}")
        if [ "$i" -le "$n" ]; then
            { [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; } || ok=0
        else
            { [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = "$text" ]; } || ok=0
        fi
    done
    if [ $ok = 1 ]; then pass "$name (mails 1-$n passed, mail $((n + 1)): '$text')"
    else fail "$name" "expected $n passes then '$text'; seen ${seen[*]}; last: $(shown)"; fi
}

# ---------------------------------------------------------------- the principal recipient, charged the count
echo "== to = \"4 / 1h\": the principal recipient, charged the SMTP recipient count"
scan -F s1@sender.example --ip 127.0.0.11 -r p1@rcpt.example -r p2@rcpt.example -r p3@rcpt.example
expect_pass three_recipients_pass
got=$(peek_key "25000:p1@rcpt.example" 4)
if [ "${got%% *}" = true ] && "$PYTHON" -c "import sys; sys.exit(0 if 2.99 <= float('${got#* }') <= 3.0 else 1)"; then
    pass "principal_recipient_charged_three (25000:p1@rcpt.example: $got)"
else
    fail principal_recipient_charged_three "expected the first recipient's bucket at 3; peek: $got"
fi
got=$(peek_key "25000:p2@rcpt.example" 4)
if [ "${got%% *}" = false ]; then pass "other_recipients_form_no_bucket (25000:p2@rcpt.example: $got)"
else fail other_recipients_form_no_bucket "expected no bucket for p2; peek: $got"; fi

echo "== a sixth recipient lifts no limit"
SIX=(-r q1@rcpt.example -r q2@rcpt.example -r q3@rcpt.example -r q4@rcpt.example -r q5@rcpt.example -r q6@rcpt.example)
scan -F s2@sender.example --ip 127.0.0.12 "${SIX[@]}"
expect_pass six_recipients_first_mail_new_buckets_admit
scan -F s2@sender.example --ip 127.0.0.12 "${SIX[@]}"
if [ "$ACTION" = "soft reject" ] &&
   grep -q 'ratelimit "to(25000:q1@rcpt.example)" exceeded' "$TMP/rspamd-A/rspamd.log"; then
    pass "six_recipient_message_limited (second mail: $(shown); to(q1) over its burst of 4 in the log)"
else
    fail six_recipient_message_limited "expected a soft reject by to(25000:q1@rcpt.example); $(shown)"
fi

# ---------------------------------------------------------------- keyword families
echo "== keyword families"
n_pass_then_limit ip_family_with_bucket_message 3 "IP over its limit" \
    '-F "i$i@sender.example" --ip 127.0.0.13 -r "ri$i@rcpt.example"'
n_pass_then_limit from_family 5 'Ratelimit "from" exceeded' \
    '-F f@sender.example --ip "127.0.0.3$i" -r "rf$i@rcpt.example"'
n_pass_then_limit to_ip_from_family 2 'Ratelimit "to_ip_from" exceeded' \
    '-F t@sender.example --ip 127.0.0.14 -r rt@rcpt.example'
n_pass_then_limit user_family_with_skip_recipients 5 'Ratelimit "user" exceeded' \
    '-F "u$i@sender.example" --ip "127.0.0.4$i" -u u1 -r "ru$i@rcpt.example" -r "rv$i@rcpt.example" -r "rw$i@rcpt.example"'
n_pass_then_limit rip_family_on_a_remote_ip 1 'Ratelimit "rip" exceeded' \
    '-F "r$i@sender.example" --ip 203.0.113.9 -r "rr$i@rcpt.example"'
scan -F x1@sender.example --ip 127.0.0.9 -r rx1@rcpt.example
scan -F x2@sender.example --ip 127.0.0.9 -r rx2@rcpt.example
expect_pass rip_skips_a_local_ip
n_pass_then_limit bounce_to_family 1 'Ratelimit "bounce_to" exceeded' \
    "-F '<>' --ip 127.0.0.20 -r b1@rcpt.example"

echo "== a selector rule with its own symbol"
ok=1; seen=()
for i in 1 2 3; do
    scan --mail "$TMP/mail/tenant.eml" --symbol TENANT_LIMIT -F "n$i@sender.example" --ip "127.0.0.5$i" -r "rn$i@rcpt.example"
    seen+=("$i:${ACTION// /_}:$OPTIONS")
    if [ "$i" -le 2 ]; then [ "$OPTIONS" = - ] || ok=0
    else case "$OPTIONS" in tenant\(RL*\)) ;; *) ok=0 ;; esac; [ "$ACTION" = "no action" ] || ok=0; fi
done
if [ $ok = 1 ]; then pass "selector_rule_symbol_without_soft_reject (${seen[*]})"
else fail selector_rule_symbol_without_soft_reject "expected TENANT_LIMIT on the 3rd mail only and no soft reject; seen ${seen[*]}"; fi

# ---------------------------------------------------------------- whitelists from map files
echo "== whitelists from map files (f@sender.example is over its from limit now)"
scan -F f@sender.example --ip 127.0.0.39 -r vip@rcpt.example
expect_pass whitelisted_recipient_from_map
scan -F f@sender.example --ip 127.0.0.39 -r other@rcpt.example -r vip@rcpt.example
expect_pass whitelisted_recipient_exempts_the_whole_message
scan -F f@sender.example --ip 192.0.2.5 -r other2@rcpt.example
expect_pass whitelisted_ip_from_map
scan -F f@sender.example --ip 127.0.0.38 -u trusted -r other3@rcpt.example
expect_pass whitelisted_user_from_map
scan -F f@sender.example --ip 127.0.0.37 -r other4@rcpt.example
expect_limit from_still_limited_without_a_whitelist 'Ratelimit "from" exceeded'

# ---------------------------------------------------------------- restarts keep the limits
restart_check() {  # NAME SIGNAL SENDER: SENDER's from bucket is full; restart; still limited
    local name=$1 sig=$2 sender=$3
    sleep 1.5  # one sync period: kill -9 loses at most the changes of the last one
    kill "-$sig" "$SHINGLED_PID" 2>/dev/null
    wait "$SHINGLED_PID" 2>/dev/null
    if ! start_shingled; then
        fail "$name" "shingled did not restart: $(tail -n 5 "$S/daemon.log" | tr '\n' ' ')"
        return
    fi
    scan -F "$sender" --ip 127.0.0.36 -r "after-$sig@rcpt.example"
    if [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = 'Ratelimit "from" exceeded' ]; then
        pass "$name ($sender: $(shown))"
    else
        fail "$name" "expected $sender still limited after the restart; $(shown)"
    fi
}
restart_check limits_kept_across_sigterm_restart TERM f@sender.example
# A bucket filled after that restart reaches the disk within a sync period.
n_pass_then_limit from_family_after_restart 5 'Ratelimit "from" exceeded' \
    '-F g@sender.example --ip "127.0.0.6$i" -r "rg$i@rcpt.example"'
restart_check limits_kept_across_kill_9 KILL g@sender.example

# ---------------------------------------------------------------- top and unblock
echo "== shinglectl ratelimit top / unblock (g@sender.example was just refused)"
g_name=$("$ctl" ratelimit peek "20000:g@sender.example" --rspamd-key --burst 5 --leak 0 \
    --server "127.0.0.1:$P_RL" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["key"])')
top=$("$ctl" ratelimit top --json --socket "$S/ctl.sock" --server "127.0.0.1:$P_RL" 2>&1)
if grep -q "\"key\":\"$g_name\",\"burst\":5," <<<"$top"; then
    pass "top_lists_the_refusing_bucket ($g_name, from(20000:g@sender.example))"
else
    fail top_lists_the_refusing_bucket "expected $g_name in: $(head -c 400 <<<"$top")"
fi
"$ctl" ratelimit unblock "20000:g@sender.example" --rspamd-key --server "127.0.0.1:$P_RL" >"$TMP/unblock.out" 2>&1
scan -F g@sender.example --ip 127.0.0.35 -r after-unblock@rcpt.example
if grep -q "unblocked" "$TMP/unblock.out" && [ "$ACTION" = "no action" ]; then
    pass "unblock_lets_the_next_mail_through ($(cat "$TMP/unblock.out"); $(shown))"
else
    fail unblock_lets_the_next_mail_through "unblock said '$(cat "$TMP/unblock.out")'; then $(shown)"
fi

# ---------------------------------------------------------------- hygiene, then failing open
errs=$(grep -c 'letting the message pass\|no shingled server available' "$TMP/rspamd-A/rspamd.log")
# the two restarts may cost a timeout each while shingled is down
if [ "$errs" -le 2 ]; then pass "no_plugin_errors ($errs while shingled restarted)"
else fail no_plugin_errors "$errs plugin error line(s): $(grep 'letting the message pass' "$TMP/rspamd-A/rspamd.log" | head -2 | cut -c1-300)"; fi
if kill -0 "$RSPAMD_PID_A" 2>/dev/null && kill -0 "$SHINGLED_PID" 2>/dev/null; then pass "processes_alive"
else fail processes_alive "shingled or rspamd exited"; fi
# shingled not answering (stopped): g@ is limited again by now, yet passes
scan -F g@sender.example --ip 127.0.0.35 -r fill@rcpt.example
kill -STOP "$SHINGLED_PID"
scan -F g@sender.example --ip 127.0.0.35 -r while-stopped@rcpt.example
kill -CONT "$SHINGLED_PID"
if [ "$ACTION" = "no action" ] &&
   [ "$(grep -c 'letting the message pass' "$TMP/rspamd-A/rspamd.log")" -gt "$errs" ]; then
    pass "fails_open_when_shingled_does_not_answer ($(shown); the timeout logged)"
else
    fail fails_open_when_shingled_does_not_answer "expected the mail to pass with an error logged; $(shown)"
fi
if [ "$failed" -gt 0 ]; then
    echo "---- plugin lines ----"; grep -i 'shingled\|ratelimit' "$TMP/rspamd-A/rspamd.log" | tail -n 15 | cut -c1-300
    echo "---- shingled log ----"; tail -n 10 "$S/daemon.log"
fi
finish
