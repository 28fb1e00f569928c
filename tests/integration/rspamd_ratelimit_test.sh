#!/usr/bin/env bash
# Acceptance test of issue 6 end to end: a REAL shingled (its rate-limit
# service on a private loopback port, two workers so a message's buckets fan
# out across cores) and two REAL, unmodified rspamd 3.4 instances loading
# contrib/rspamd/shingled_ratelimit.lua: A in the two-phase flow (check, then
# update), B in the one-shot flow. Mails are sent with rspamc; every check
# looks at what rspamc reports (action `soft reject` and the message
# `Ratelimit "<family>" exceeded`, or no action), then at shingled's own view
# (`shinglectl stats --json`, `shinglectl ratelimit peek`).
#
# Rates: to = [3, 0.5] (burst 3, one message back every 2 s),
# bounce_to = [1, 0.5], user = [2, 0.5]; default whitelist (postmaster,
# mailer-daemon). Checked: the 4th mail to a recipient is the first one
# soft-rejected, another recipient is fresh, the recipient's case does not
# matter, the limit lifts one leak interval later (for exactly one mail),
# whitelisted recipients are never limited and exempt the whole message,
# bounces (`<>`, mailer-daemon@) hit bounce_to at its own count, the user
# bucket, two scanners sharing one bucket, the peeked level under the
# documented key (R:rcpt, R = round(100000 / burst)), the plugin's decoding
# of real replies (family, recipient, capacity, wait in its log line), and
# that the server's counters agree with what rspamc showed.
#
# Usage: rspamd_ratelimit_test.sh [--build BUILD_DIR] [--keep] [--start-timeout SEC]
# Prints PASS/FAIL lines; the last line is "N passed, M failed"; exit status
# 0 only if M = 0. Missing rspamd, rspamc, python3 or the build is a FAIL.
# Only random loopback ports; stops only the processes it started (by PID).
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
# pass, fail, finish ("N passed, M failed"; counts in `passed` and `failed`)
# shellcheck source=tests/integration/lib_check.sh
. "$SCRIPT_DIR/lib_check.sh"
# rl_rspamd_start: real rspamd 3.4 with the plugin (shared with the plugin test)
# shellcheck source=tests/integration/lib_rl_rspamd.sh
. "$SCRIPT_DIR/lib_rl_rspamd.sh"

RT=5
rl_parse_args 2,26 "$@"
shingled="$build/src/daemon/shingled"
ctl="$build/tools/shinglectl"
PLUGIN="$REPO_DIR/contrib/rspamd/shingled_ratelimit.lua"

# The rates the checks below are written for.
TO_BURST=3; TO_LEAK=0.5          # the 4th mail is refused; one comes back every 2 s
BOUNCE_BURST=1; BOUNCE_LEAK=0.5
USER_BURST=2; USER_LEAK=0.5
TO_R=$(( (100000 + TO_BURST / 2) / TO_BURST ))   # 33333: R of the key, round(100000 / burst)
BOUNCE_R=$(( (100000 + BOUNCE_BURST / 2) / BOUNCE_BURST ))

# Missing pieces fail the test (scripts/test.sh counts it), they do not skip it.
abort() {  # NAME REASON: one FAIL, the tally, exit 1
    fail "$1" "$2"
    finish
    exit 1
}
for tool in rspamd rspamc python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 ||
        abort "requirements" "$tool not found in PATH (Debian 12: apt-get install rspamd python3 coreutils); this test needs real rspamd 3.4"
done
[ -x "$shingled" ] || abort "requirements" "no shingled at $shingled (build it: ninja -C $build src/daemon/shingled tools/shinglectl)"
[ -x "$ctl" ] || abort "requirements" "no shinglectl at $ctl (build it: ninja -C $build tools/shinglectl)"
[ -r "$PLUGIN" ] || abort "requirements" "missing $PLUGIN"
PYTHON=$(python3 -c 'import sys; print(sys.executable)') || abort "requirements" "python3 does not run"
T_START=$("$PYTHON" -c 'import time; print(time.time())')

# ---------------------------------------------------------------- temp dir, processes, cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rspamd-rl-test.XXXXXX") || abort "setup" "mktemp failed"
PIDS=()        # processes this script started
CHILD_PIDS=()  # their direct children seen after start-up (rspamd's workers)
trap rl_cleanup EXIT
trap 'trap - INT TERM; fail interrupted "SIGINT before the end of the run"; finish; exit 130' INT
trap 'trap - INT TERM; fail interrupted "SIGTERM before the end of the run"; finish; exit 143' TERM
remember_children() {
    local kids
    read -r -a kids <<<"$(cat /proc/"$1"/task/*/children 2>/dev/null | tr '\n' ' ')"
    CHILD_PIDS+=("${kids[@]}")
}

# ---------------------------------------------------------------- python helper
PY="$TMP/rl.py"
cat >"$PY" <<'PYEOF'
import json, random, socket, sys, time

def scan(path):  # rspamc --json -> the action, then the SMTP message (- for none)
    try:
        d = json.load(open(path))
    except Exception:
        print('unparsable'); print('-'); return
    print(d.get('action', 'none'))
    print(d.get('messages', {}).get('smtp_message', '-').replace('\n', ' '))

def stat(path, *keys):  # values of dotted keys of `shinglectl stats --json`
    d = json.load(open(path))
    out = []
    for k in keys:
        v = d
        for part in k.split('.'):
            v = v[part]
        out.append(str(v))
    print(' '.join(out))

def malformed(path):
    d = json.load(open(path))
    print(sum(d['ratelimit']['malformed_by_reason'].values()))

def peek(path):  # shinglectl ratelimit peek --json -> "EXISTED LEVEL CAPACITY WAIT"
    d = json.loads(open(path).read().strip().splitlines()[-1])
    print('%s %.3f %.3f %d' % (str(d['existed']).lower(), d['level'], d['capacity'], d['wait_ms']))

def within(x, lo, hi):  # exit 0 if lo <= x <= hi
    sys.exit(0 if float(lo) <= float(x) <= float(hi) else 1)

def now():
    print('%.3f' % time.time())

def calc(expr):
    print('%.3f' % eval(expr, {}))

f = {'scan': lambda a: scan(a[0]),
     'stat': lambda a: stat(*a), 'malformed': lambda a: malformed(a[0]),
     'peek': lambda a: peek(a[0]), 'within': lambda a: within(*a), 'now': lambda a: now(),
     'calc': lambda a: calc(a[0])}
f[sys.argv[1]](sys.argv[2:])
PYEOF
py() { "$PYTHON" -S "$PY" "$@"; }
now() { py now; }

read -r P_FUZZY P_RL P_A P_B <<<"$("$PYTHON" -S "$SCRIPT_DIR/free_ports.py" 4)"
[ -n "${P_B:-}" ] || abort "setup" "could not pick free loopback ports"
echo "tmp=$TMP shingled: fuzzy 127.0.0.1:$P_FUZZY, ratelimit 127.0.0.1:$P_RL; rspamd A (two-phase)=$P_A, B (one-shot)=$P_B"

# ---------------------------------------------------------------- shingled
S="$TMP/shingled"
mkdir -p "$S"
cat >"$S/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$P_FUZZY";
counters_bind_socket = [];
ratelimit_bind_socket = "127.0.0.1:$P_RL";
ratelimit_service_max_buckets = 65536;
max_hashes = 10000;   # the fuzzy tables are not used here: keep them small
workers = 2;
hashfile = "$S/db";
control_socket = "$S/ctl.sock";
ratelimit {
  rates {
    to = [$TO_BURST, $TO_LEAK];
    bounce_to = [$BOUNCE_BURST, $BOUNCE_LEAK];
    user = [$USER_BURST, $USER_LEAK];
  }
}
EOF
"$shingled" --config "$S/shingled.conf" >"$S/daemon.log" 2>&1 &
SHINGLED_PID=$!
PIDS+=("$SHINGLED_PID")
N_PEEK=0
rlpeek() {  # KEY BURST LEAK -> sets PEEK ("EXISTED LEVEL CAPACITY WAIT") or returns 1
    N_PEEK=$((N_PEEK + 1))
    "$ctl" ratelimit peek "$1" --burst "$2" --leak "$3" --server "127.0.0.1:$P_RL" --json \
        >"$TMP/peek.json" 2>&1 || { PEEK="shinglectl failed: $(head -c 300 "$TMP/peek.json")"; return 1; }
    PEEK=$(py peek "$TMP/peek.json") || { PEEK="unparsable: $(head -c 300 "$TMP/peek.json")"; return 1; }
}
ready=0
for _ in $(seq $((START_TIMEOUT * 10))); do
    kill -0 "$SHINGLED_PID" 2>/dev/null || break
    if "$ctl" --socket "$S/ctl.sock" ping >/dev/null 2>&1 && rlpeek probe:ready 1 0; then ready=1; break; fi
    sleep 0.1
done
if [ $ready = 1 ]; then
    pass "shingled_ready (control socket and rate-limit service on 127.0.0.1:$P_RL answer; 2 workers)"
else
    fail shingled_ready "shingled did not answer within ${START_TIMEOUT}s; log: $(tail -n 5 "$S/daemon.log" | tr '\n' ' ')"
    finish; exit 1
fi

stats() {  # FILE: shinglectl stats --json into FILE
    "$ctl" --socket "$S/ctl.sock" stats --json >"$1" 2>&1
}

# ---------------------------------------------------------------- rspamd
mkdir -p "$TMP/mail"
printf 'com\norg\nnet\nexample\n' >"$TMP/tld.dat"   # tiny TLD list: the stock one takes ~16 s to compile
ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)   # rspamd refuses to run workers as root otherwise
cat >"$TMP/mail/plain.eml" <<'EOF'
From: Alice <alice@sender.example>
To: Bob <bob@rcpt.example>
Subject: Minutes of the meeting
Date: Tue, 03 Nov 2026 09:00:00 +0000
Message-ID: <rl-acceptance@sender.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: 7bit

Hello Bob,

the minutes of the meeting are attached below.

Alice
EOF

rc() {  # OUTFILE rspamc-args... (bounded)
    local out=$1; shift
    timeout -k 2 $((RT + 5)) rspamc -t "$RT" "$@" >"$out" 2>&1
}

# wait_rl_rspamd NAME PORT READY-RCPT: a scan answers and the plugin is loaded
wait_rl_rspamd() {
    local d="$TMP/rspamd-$1" pidvar="RSPAMD_PID_$1"
    if rl_rspamd_wait "$1" "$2" "$3"; then
        remember_children "${!pidvar}"
        pass "rspamd_${1}_ready ($RL_RSPAMD_LOADED)"
    else
        fail "rspamd_${1}_ready" "rspamd did not answer with the plugin loaded within ${START_TIMEOUT}s: $(tail -n 5 "$d/stdout.log" "$d/rspamd.log" 2>/dev/null | tr '\n' ' ' | cut -c1-600)"
        finish; exit 1
    fi
}

# A: two-phase (the default flow), allow_local = false, so scans carry another
# User-Agent (-U) as an MTA's would; its readiness scans (rspamc's own agent)
# are ignored by the plugin. B: one-shot, allow_local = true: plain rspamc is
# limited; its readiness scan goes to a whitelisted recipient.
rl_rspamd_start A "$P_A" "127.0.0.1:$P_RL" '  timeout = 1s;
  rules = "shingled";
  retransmits = 1;'
rl_rspamd_start B "$P_B" "127.0.0.1:$P_RL" '  timeout = 1s;
  rules = "shingled";
  retransmits = 1;
  flow = "one_shot";
  allow_local = true;'
wait_rl_rspamd A "$P_A" ready@rcpt.example
wait_rl_rspamd B "$P_B" postmaster@ready.example
AGENT=(-U test-mta)

# ---------------------------------------------------------------- scanning
NSCAN=0
declare -A LIMITED_BY=([to]=0 [bounce_to]=0 [user]=0)
N_LIMITED=0; N_ACCEPTED_A=0; N_LIMITED_A=0; N_WHITE_A=0; N_B=0; N_WHITE_B=0
# scan A|B KIND rspamc-args... -> ACTION, MESSAGE (- for none), T_SENT, T_DONE.
# KIND (accept | limit | white) is what the test expects shingled to decide;
# it only feeds the expected server counters, the checks compare rspamc's output.
scan() {
    local inst=$1 kind=$2 port f; shift 2
    port=$([ "$inst" = A ] && echo "$P_A" || echo "$P_B")
    NSCAN=$((NSCAN + 1)); f="$TMP/scan-$NSCAN.json"
    T_SENT=$(now)
    if [ "$inst" = A ]; then
        rc "$f" -h "127.0.0.1:$port" --json "${AGENT[@]}" "$@" "$TMP/mail/plain.eml"
    else
        rc "$f" -h "127.0.0.1:$port" --json "$@" "$TMP/mail/plain.eml"
    fi
    T_DONE=$(now)
    { read -r ACTION; read -r MESSAGE; } < <(py scan "$f")
    if [ "$ACTION" = "soft reject" ]; then
        N_LIMITED=$((N_LIMITED + 1))
        case "$MESSAGE" in
            'Ratelimit "'*'" exceeded') local fam=${MESSAGE#Ratelimit \"}; fam=${fam%\" exceeded}
                LIMITED_BY[$fam]=$(( ${LIMITED_BY[$fam]:-0} + 1 )) ;;
        esac
    fi
    # what the plugin sends for it (feeds the expected server counters)
    if [ "$inst" = A ]; then
        case "$kind" in
            accept) N_ACCEPTED_A=$((N_ACCEPTED_A + 1)) ;;
            limit) N_LIMITED_A=$((N_LIMITED_A + 1)) ;;
            white) N_WHITE_A=$((N_WHITE_A + 1)) ;;
        esac
    else
        N_B=$((N_B + 1))
        [ "$kind" = white ] && N_WHITE_B=$((N_WHITE_B + 1))
    fi
    return 0
}
shown() { echo "action $ACTION, message $MESSAGE"; }
expect_pass() {  # CHECK: the last scan passed (no action, no message)
    if [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; then
        pass "$1 ($(shown))"
    else
        fail "$1" "expected no action and no message; rspamc showed $(shown)"
    fi
}
expect_limit() {  # CHECK FAMILY: soft reject with the family's message
    if [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = "Ratelimit \"$2\" exceeded" ]; then
        pass "$1 ($(shown))"
    else
        fail "$1" "expected action soft reject with message 'Ratelimit \"$2\" exceeded'; rspamc showed $(shown)"
    fi
}
# burst_until_limit A|B BURST CHECK FAMILY rspamc-args...: BURST + 1 mails; the
# first BURST must pass and the next one be soft-rejected; sets T_FIRST (when
# the first mail was sent) and T_LIMIT (when the refused one was answered)
burst_until_limit() {
    local inst=$1 burst=$2 name=$3 fam=$4 i seen=() ok=1 t0; shift 4
    t0=$(now)
    for i in $(seq $((burst + 1))); do
        if [ "$i" -le "$burst" ]; then scan "$inst" accept "$@"; else scan "$inst" limit "$@"; fi
        [ "$i" = 1 ] && T_FIRST=$T_SENT
        seen+=("$i:${ACTION// /_}")
        if [ "$i" -le "$burst" ]; then
            { [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; } || ok=0
        else
            { [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = "Ratelimit \"$fam\" exceeded" ]; } || ok=0
        fi
    done
    T_LIMIT=$T_DONE
    local took which; took=$(py calc "$T_LIMIT - $t0")
    which=$([ "$burst" = 1 ] && echo "mail 1" || echo "mails 1-$burst")
    if [ $ok = 1 ]; then
        pass "$name ($which passed, mail $((burst + 1)) soft-rejected with 'Ratelimit \"$fam\" exceeded'; ${took}s for all)"
    else
        fail "$name" "expected $which to pass and mail $((burst + 1)) to get soft reject 'Ratelimit \"$fam\" exceeded'; seen ${seen[*]} (last: $(shown)); the $((burst + 1)) mails took ${took}s"
    fi
}
# expect_full_bucket CHECK KEY BURST LEAK T_FIRST: a bucket filled to BURST by
# mails the first of which was sent at T_FIRST: peek shows it stored, its
# capacity, and a level between BURST minus what can have leaked since then
# and BURST
expect_full_bucket() {
    local name=$1 key=$2 burst=$3 leak=$4 existed level capacity lo cap
    if ! rlpeek "$key" "$burst" "$leak"; then fail "$name" "$PEEK"; return; fi
    read -r existed level capacity _ <<<"$PEEK"
    lo=$(py calc "$burst - $leak * ($(now) - $5)")
    cap=$(py calc "$burst")
    if [ "$existed" = true ] && [ "$capacity" = "$cap" ] && py within "$level" "$lo" "$burst.001"; then
        pass "$name (key $key: level $level of $capacity, expected $lo..$burst)"
    else
        fail "$name" "key $key: expected a stored bucket, capacity $burst, level in $lo..$burst; peek: $PEEK"
    fi
}
sleep_until() {  # EPOCH-SECONDS
    local d; d=$(py calc "max(0.0, $1 - $(now))")
    sleep "$d"
}

N_PEEK=0
stats "$TMP/stats0.json" || abort stats_before "shinglectl stats --json failed: $(head -c 300 "$TMP/stats0.json")"

# ---------------------------------------------------------------- A: the to limit, two-phase
echo "== instance A (two-phase flow): to = [$TO_BURST, $TO_LEAK]"
if rlpeek "$TO_R:bob@rcpt.example" "$TO_BURST" "$TO_LEAK" && [ "${PEEK%% *}" = false ]; then
    pass "peek_before_any_mail ($TO_R:bob@rcpt.example not stored: $PEEK)"
else
    fail peek_before_any_mail "expected $TO_R:bob@rcpt.example not stored yet; peek: $PEEK"
fi
FROM=(-F alice@sender.example --ip 198.51.100.7)
burst_until_limit A "$TO_BURST" A_to_limit_at_4th_mail to "${FROM[@]}" -r bob@rcpt.example
T_BOB1=$T_FIRST; T_BOB_LIMIT=$T_LIMIT

# the plugin decoded shingled's real reply: family, recipient, capacity, wait
line=$(grep -o 'ratelimit "to(bob@rcpt.example)" exceeded (shingled): .*' "$TMP/rspamd-A/rspamd.log" | head -1)
wait_ms=$(echo "$line" | sed -n 's/.*accepts again in \([0-9]*\) ms.*/\1/p')
if [ -n "$line" ] && echo "$line" | grep -q "of 3.0000," && [ -n "$wait_ms" ] &&
   [ "$wait_ms" -gt 0 ] && [ "$wait_ms" -le 2000 ]; then
    pass "A_plugin_decodes_real_reply (log: ${line%%[[:cntrl:]]*})"
else
    fail A_plugin_decodes_real_reply "expected the plugin's log line for to(bob@rcpt.example) with capacity 3.0000 and a wait in (0, 2000] ms; seen: '${line:-none}'"
fi

scan A limit "${FROM[@]}" -r Bob@RCPT.Example
expect_limit A_recipient_case_ignored to
scan A limit "${FROM[@]}" -r bob@rcpt.example
expect_limit A_still_limited_right_after to

scan A accept "${FROM[@]}" -r dave@rcpt.example
expect_pass A_other_recipient_is_fresh

expect_full_bucket A_peek_shows_level "$TO_R:bob@rcpt.example" "$TO_BURST" "$TO_LEAK" "$T_BOB1"

# one leak interval (1 / 0.5 s) after the refused mail, exactly one fits again
sleep_until "$(py calc "$T_BOB_LIMIT + 1 / $TO_LEAK + 0.1")"
scan A accept "${FROM[@]}" -r bob@rcpt.example
expect_pass A_limit_lifts_after_leak_interval
scan A limit "${FROM[@]}" -r bob@rcpt.example
expect_limit A_only_one_mail_leaked_back to

# ---------------------------------------------------------------- A: whitelisted recipients
echo "== instance A: whitelisted recipients (postmaster, mailer-daemon)"
wl_ok=1; wl_seen=()
for r in postmaster@rcpt.example postmaster@rcpt.example postmaster@rcpt.example \
         postmaster@rcpt.example postmaster@rcpt.example mailer-daemon@rcpt.example; do
    scan A white "${FROM[@]}" -r "$r"
    wl_seen+=("${ACTION// /_}")
    { [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; } || wl_ok=0
done
if [ $wl_ok = 1 ]; then
    pass "A_whitelisted_never_limited (5 mails to postmaster@, 1 to mailer-daemon@, burst $TO_BURST: all passed)"
else
    fail A_whitelisted_never_limited "expected 6 passes; seen ${wl_seen[*]}"
fi
if rlpeek "$TO_R:postmaster@rcpt.example" "$TO_BURST" "$TO_LEAK" && [ "${PEEK%% *}" = false ]; then
    pass "A_whitelisted_not_counted (no bucket $TO_R:postmaster@rcpt.example)"
else
    fail A_whitelisted_not_counted "expected no bucket for postmaster@rcpt.example; peek: $PEEK"
fi
# bob is limited right now; a whitelisted recipient beside him exempts the message
scan A white "${FROM[@]}" -r bob@rcpt.example -r postmaster@rcpt.example
expect_pass A_whitelisted_rcpt_exempts_whole_message

# ---------------------------------------------------------------- A: bounces
echo "== instance A: bounces, bounce_to = [$BOUNCE_BURST, $BOUNCE_LEAK]"
burst_until_limit A "$BOUNCE_BURST" A_bounce_limited_at_own_count bounce_to -F '<>' --ip 198.51.100.7 -r carol@rcpt.example
expect_full_bucket A_peek_bounce_bucket "$BOUNCE_R:_:carol@rcpt.example" "$BOUNCE_BURST" "$BOUNCE_LEAK" "$T_FIRST"
scan A accept "${FROM[@]}" -r carol@rcpt.example
expect_pass A_non_bounce_to_same_rcpt_passes
burst_until_limit A "$BOUNCE_BURST" A_mailer_daemon_sender_is_bounce bounce_to -F mailer-daemon@sender.example --ip 198.51.100.7 -r frank@rcpt.example

# ---------------------------------------------------------------- A: the user bucket
echo "== instance A: user = [$USER_BURST, $USER_LEAK]"
u_seen=(); u_ok=1
for i in 1 2 3; do
    if [ $i -le "$USER_BURST" ]; then scan A accept "${FROM[@]}" -u authuser1 -r "u$i@rcpt.example"
    else scan A limit "${FROM[@]}" -u authuser1 -r "u$i@rcpt.example"; fi
    u_seen+=("$i:$ACTION:$MESSAGE;")
    if [ $i -le "$USER_BURST" ]; then
        { [ "$ACTION" = "no action" ] && [ "$MESSAGE" = - ]; } || u_ok=0
    else
        { [ "$ACTION" = "soft reject" ] && [ "$MESSAGE" = 'Ratelimit "user" exceeded' ]; } || u_ok=0
    fi
done
if [ $u_ok = 1 ]; then
    pass "A_user_limited_across_recipients (authuser1 to u1, u2 passed; u3 soft-rejected with 'Ratelimit \"user\" exceeded')"
else
    fail A_user_limited_across_recipients "expected 2 passes then soft reject 'Ratelimit \"user\" exceeded'; seen ${u_seen[*]}"
fi

# ---------------------------------------------------------------- B: one-shot
echo "== instance B (one-shot flow, allow_local, plain rspamc)"
burst_until_limit B "$TO_BURST" B_to_limit_at_4th_mail to -F alice@sender.example --ip 198.51.100.9 -r erin@rcpt.example
T_ERIN_LIMIT=$T_LIMIT
expect_full_bucket B_peek_shows_level "$TO_R:erin@rcpt.example" "$TO_BURST" "$TO_LEAK" "$T_FIRST"
# two scanners, one bucket: 2 mails to henry through A, the 3rd through B passes, the 4th is refused
scan A accept "${FROM[@]}" -r henry@rcpt.example
scan A accept "${FROM[@]}" -r henry@rcpt.example
scan B accept -F alice@sender.example --ip 198.51.100.9 -r henry@rcpt.example
h3=$ACTION
scan B limit -F alice@sender.example --ip 198.51.100.9 -r henry@rcpt.example
if [ "$h3" = "no action" ]; then
    expect_limit scanners_share_one_bucket to
else
    fail scanners_share_one_bucket "expected the 3rd mail to henry (through B) to pass and the 4th to be refused; seen $h3, then $(shown)"
fi
sleep_until "$(py calc "$T_ERIN_LIMIT + 1 / $TO_LEAK + 0.1")"
scan B accept -F alice@sender.example --ip 198.51.100.9 -r erin@rcpt.example
expect_pass B_limit_lifts_after_leak_interval
scan B limit -F alice@sender.example --ip 198.51.100.9 -r erin@rcpt.example
expect_limit B_only_one_mail_leaked_back to
line=$(grep -o 'ratelimit "to(erin@rcpt.example)" exceeded (shingled): .*' "$TMP/rspamd-B/rspamd.log" | head -1)
if echo "$line" | grep -q "of 3.0000, accepts again in [0-9]* ms"; then
    pass "B_plugin_decodes_real_reply (log: $line)"
else
    fail B_plugin_decodes_real_reply "expected the plugin's log line for to(erin@rcpt.example) with capacity 3.0000; seen: '${line:-none}'"
fi

# ---------------------------------------------------------------- the server's view
echo "== shingled's counters against what rspamc showed"
sleep 0.3   # A's last update may still be on its way
stats "$TMP/stats1.json" || fail stats_after "shinglectl stats --json failed: $(head -c 300 "$TMP/stats1.json")"
keys=(totals.ratelimit_limited ratelimit.limited_by_family.to ratelimit.limited_by_family.bounce_to
      ratelimit.limited_by_family.user totals.ratelimit_whitelisted totals.ratelimit_messages
      totals.ratelimit_requests)
read -r -a s0 <<<"$(py stat "$TMP/stats0.json" "${keys[@]}")"
read -r -a s1 <<<"$(py stat "$TMP/stats1.json" "${keys[@]}")"
delta() { echo $(( ${s1[$1]:-0} - ${s0[$1]:-0} )); }
# Every mail is one decision (A's check, B's one-shot). Requests: A also
# sends an update after an accepted check (a refused check reserves nothing,
# so there is nothing to release; a whitelisted one is not updated), and the
# test's own peeks are bucket requests.
want_messages=$(( N_ACCEPTED_A + N_LIMITED_A + N_WHITE_A + N_B ))
want_requests=$(( want_messages + N_ACCEPTED_A + N_PEEK ))
expect_delta() {  # CHECK INDEX WANT WHAT
    local got; got=$(delta "$2")
    if [ "$got" = "$3" ]; then pass "$1 (${keys[$2]} +$got: $4)"; else fail "$1" "${keys[$2]} rose by $got, expected $3: $4"; fi
}
expect_delta stats_limited 0 "$N_LIMITED" "the soft rejects rspamc showed"
expect_delta stats_limited_to 1 "${LIMITED_BY[to]}" "'Ratelimit \"to\" exceeded' shown"
expect_delta stats_limited_bounce_to 2 "${LIMITED_BY[bounce_to]}" "'Ratelimit \"bounce_to\" exceeded' shown"
expect_delta stats_limited_user 3 "${LIMITED_BY[user]}" "'Ratelimit \"user\" exceeded' shown"
expect_delta stats_whitelisted 4 $((N_WHITE_A + N_WHITE_B)) "mails to whitelisted recipients"
expect_delta stats_messages 5 "$want_messages" "one per mail scanned: A $((N_ACCEPTED_A + N_LIMITED_A + N_WHITE_A)) checks, B $N_B one-shot"
expect_delta stats_requests 6 "$want_requests" "the $want_messages decisions, A's $N_ACCEPTED_A updates, $N_PEEK peeks"
mal=$(py malformed "$TMP/stats1.json")
if [ "$mal" = 0 ]; then pass "no_malformed_datagrams"; else fail no_malformed_datagrams "$mal rate-limit datagrams dropped as malformed"; fi

# ---------------------------------------------------------------- hygiene
for i in A B; do
    errs=$(grep -c 'letting the message pass\|no shingled server available' "$TMP/rspamd-$i/rspamd.log")
    if [ "$errs" = 0 ]; then
        pass "rspamd_${i}_no_plugin_errors (no timeout, bad reply or failed send logged)"
    else
        fail "rspamd_${i}_no_plugin_errors" "$errs plugin error line(s): $(grep 'letting the message pass' "$TMP/rspamd-$i/rspamd.log" | head -2 | cut -c1-300)"
    fi
done
alive=1
for p in "$SHINGLED_PID" "$RSPAMD_PID_A" "$RSPAMD_PID_B"; do kill -0 "$p" 2>/dev/null || alive=0; done
if [ $alive = 1 ]; then pass "processes_alive (shingled and both rspamd)"; else fail processes_alive "shingled or an rspamd exited during the run"; fi
echo "     $NSCAN scans in $(py calc "$(now) - $T_START")s"
if [ "$failed" -gt 0 ]; then
    for i in A B; do
        echo "---- last plugin lines of rspamd $i ----"
        grep -i shingled "$TMP/rspamd-$i/rspamd.log" | tail -n 10 | cut -c1-300
    done
    echo "---- shingled log ----"
    tail -n 10 "$S/daemon.log"
fi
finish
