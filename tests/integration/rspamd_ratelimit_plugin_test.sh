#!/usr/bin/env bash
# The rspamd plugin contrib/rspamd/shingled_ratelimit.lua inside a REAL,
# unmodified rspamd 3.4, pointed at a fake rate-limit service
# (fake_ratelimit_server.py) instead of shingled: the fake decodes each
# datagram by docs/ratelimit.md's layout and answers with crafted verdicts
# chosen by the recipient. Checks what rspamd sends (bytes, envelope, phases,
# mask echo, resends) and what rspamc then shows (soft reject and its text,
# symbol mode, fail open). Needs no shingled build; never touches ports but
# random loopback ones; stops only the processes it started.
#
# Usage: rspamd_ratelimit_plugin_test.sh [--keep] [--start-timeout SEC] [--build DIR (ignored)]
# Last line "N passed, M failed"; exit 0 only if M = 0 (2: setup error).
set -uo pipefail
# shared helpers: die, lib_setup (temp dir, cleanup trap, port picker), rc, pass, fail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"
# rl_rspamd_start: rspamd 3.4 with the plugin, as the shingled test starts it
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rl_rspamd.sh"

KEEP=0; START_TIMEOUT=20; RT=5; TRACE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) KEEP=1; shift ;;
        --build) shift 2 ;;   # scripts/test.sh passes it to every test; no build is needed
        --start-timeout) START_TIMEOUT="${2:?}"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
PLUGIN="$REPO_DIR/contrib/rspamd/shingled_ratelimit.lua"
FAKE="$SCRIPT_DIR/fake_ratelimit_server.py"
for tool in rspamd rspamc python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found in PATH"
done
[ -r "$PLUGIN" ] || die "missing $PLUGIN"
PYTHON=$(python3 -c 'import sys; print(sys.executable)') || die "python3 does not run"

lib_setup rspamd-rl-plugin-test
read -r P_FAKE P_A P_B <<<"$(free_ports 3)"
[ -n "$P_B" ] || die "could not pick free ports"
FAKE_LOG="$TMP/fake.jsonl"
echo "tmp=$TMP fake=127.0.0.1:$P_FAKE rspamd A (two-phase)=$P_A B (one-shot, symbol mode)=$P_B"

finish() {  # lib_rspamd's, with the plugin's log lines instead of fuzzy ones
    local d
    if [ "$NFAIL" -gt 0 ]; then
        for d in "$TMP"/rspamd-*; do
            echo "---- last plugin lines of $d/rspamd.log ----"
            grep -i shingled "$d/rspamd.log" 2>/dev/null | tail -n 15 | cut -c1-300
        done
    fi
    echo "$NPASS passed, $NFAIL failed"
    [ "$NFAIL" = 0 ]
    exit $?
}
fake() { "$PYTHON" -S "$FAKE" "$@"; }

# ---------------------------------------------------------------- the fake service
"$PYTHON" -S "$FAKE" serve "$P_FAKE" "$FAKE_LOG" >"$TMP/fake.err" 2>&1 &
FAKE_PID=$!
PIDS+=("$FAKE_PID")
for _ in $(seq 50); do [ "$(py isbound "$P_FAKE")" = 1 ] && break; sleep 0.1; done
[ "$(py isbound "$P_FAKE")" = 1 ] || die "the fake service did not bind 127.0.0.1:$P_FAKE: $(cat "$TMP/fake.err")"

# ---------------------------------------------------------------- rspamd
# The plugin is loaded as Debian users install it (contrib/rspamd/README.md):
# a user plugin from a modules path, enabled by its own config section.
# test_rules.lua adds what the checks need around it: a rule that sets
# another module's pre-result, and symbols that make the verdict ham or spam.
cat >"$TMP/test_rules.lua" <<'EOF'
local function subject_has(task, word)
  local s = task:get_header('Subject') or ''
  return s:find(word, 1, true) ~= nil
end
rspamd_config:register_symbol({ name = 'TEST_OTHER_PRERESULT', score = 0.0, group = 'test',
  callback = function(task)
    if subject_has(task, 'force-prereject') then
      task:set_pre_result('soft reject', 'greylisted by the test', 'test_rules')
    end
  end })
rspamd_config:register_symbol({ name = 'TEST_HAM', score = -1.0, group = 'test',
  callback = function(task) return subject_has(task, 'verdict-ham') end })
for _, n in ipairs({ 'TEST_SPAM1', 'TEST_SPAM2' }) do
  rspamd_config:register_symbol({ name = n, score = 10.0, group = 'test',
    callback = function(task) return subject_has(task, 'verdict-spam') end })
end
EOF

start_rl_rspamd() {  # name port plugin-options extra-ucl
    local d="$TMP/rspamd-$1" port=$2 t0 pid
    rl_rspamd_start "$1" "$port" "127.0.0.1:$P_FAKE" "  timeout = 0.5s;
  rules = \"shingled\";
  retransmits = 1;
${3:-}" "lua = \"$TMP/test_rules.lua\";
${4:-}"
    pid="RSPAMD_PID_$1"; pid=${!pid}
    t0=$(date +%s.%N)
    if rl_rspamd_wait "$1" "$port" "ready-$1@rcpt.example"; then
        remember_children "$pid"
        pass "rspamd_${1}_ready" "after $("$PYTHON" -c "print('%.1f' % ($(date +%s.%N) - $t0))")s, plugin loaded: $RL_RSPAMD_LOADED"
    else
        fail "rspamd_${1}_ready" "rspamd did not answer with the plugin loaded within ${START_TIMEOUT}s"
        tail -n 20 "$d/stdout.log" "$d/rspamd.log" 2>/dev/null | indent
        finish
    fi
}

# ---------------------------------------------------------------- mails and scans
mail() {  # name subject
    mail_header 'Alice <alice@sender.example>' 'Bob <bob@rcpt.example>' "$2" "rl-$1@sender.example" \
        >"$TMP/mail/$1.eml"
    printf 'Hello Bob,\n\nthe minutes of the meeting are attached below.\n\nAlice\n' >>"$TMP/mail/$1.eml"
}
mail plain 'Minutes of the meeting'
mail prereject 'Minutes force-prereject'
mail ham 'Minutes verdict-ham'
mail spam 'Minutes verdict-spam'

NSCAN=0
# scan INSTANCE MAIL rspamc-args... -> sets ACTION, MESSAGE, SYMS (NAME=SCORE[opts];...), ELAPSED
scan_rl() {
    local inst=$1 mail=$2 port f t0; shift 2
    port=$([ "$inst" = A ] && echo "$P_A" || echo "$P_B")
    NSCAN=$((NSCAN + 1)); f="$TMP/scan-$NSCAN.json"
    t0=$(date +%s.%N)
    rc "$f" -h "127.0.0.1:$port" --json "$@" "$TMP/mail/$mail.eml"
    ELAPSED=$("$PYTHON" -c "print('%.2f' % ($(date +%s.%N) - $t0))")
    read -r ACTION MESSAGE SYMS <<<"$("$PYTHON" -S -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("unparsable - -"); sys.exit()
msg = d.get("messages", {}).get("smtp_message", "-").replace(" ", "_")
syms = ";".join("%s=%.2f[%s]" % (k, v.get("score", 0), ",".join(v.get("options", [])))
                for k, v in sorted(d.get("symbols", {}).items()))
print(d.get("action", "none").replace(" ", "_"), msg, syms or "-")' "$f")"
}
requests_for() { fake show "$FAKE_LOG" "$1" | wc -l; }
phase_count() { fake show "$FAKE_LOG" "$1" | grep -c "\"phase\": \"$2\""; }

# expect_request CHECK RCPT PHASE JSON: the fake saw it, fields and bytes as documented
expect_request() {
    local out
    if out=$(fake expect "$FAKE_LOG" "$2" "$3" "$4"); then pass "$1" "$out"; else fail "$1" "$out"; fi
}
expect_action() {  # CHECK WANT_ACTION WANT_MESSAGE(- for none)
    if [ "$ACTION" = "$2" ] && [ "$MESSAGE" = "$3" ]; then
        pass "$1" "action $ACTION, message ${MESSAGE//_/ }"
    else
        fail "$1" "expected action $2 with message ${3//_/ }; seen action $ACTION, message ${MESSAGE//_/ }, symbols $SYMS"
    fi
}
expect_no_phase() {  # CHECK RCPT PHASE
    local n; n=$(phase_count "$2" "$3")
    if [ "$n" = 0 ]; then pass "$1" "no $3 request for $2"; else fail "$1" "$n $3 request(s) for $2, expected none"; fi
}

start_rl_rspamd A "$P_A" ''
start_rl_rspamd B "$P_B" '  flow = "one_shot";
  symbol = "SHINGLED_RL";
  symbol_weight = "tanh";
  allow_local = true;' 'group "rl" { symbols { SHINGLED_RL { weight = 1.0; } } }'
AG=(-U test-mta)   # any User-Agent but rspamc: allow_local = false ignores rspamc (as rspamd does)

# ---------------------------------------------------------------- A: two-phase, requests
echo "== two-phase flow (instance A): what rspamd sends"
scan_rl A plain -r local@rcpt.example --ip 198.51.100.7
n=$(requests_for local@rcpt.example)
if [ "$n" = 0 ] && [ "$ACTION" = no_action ]; then
    pass local_request_ignored "User-Agent rspamc with allow_local = false: nothing sent"
else
    fail local_request_ignored "expected no request for a plain rspamc scan, saw $n (action $ACTION)"
fi

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r bob@rcpt.example -u authuser1
expect_action accepted_passes no_action -
expect_request check_request_ipv4_from_user bob@rcpt.example check \
    '{"ip": "198.51.100.7", "has_sender": true, "sender": "alice@sender.example", "user": "authuser1",
      "rcpts": ["bob@rcpt.example"], "rcpt_count": 1, "outcome": 0, "mask": "0000000000000000"}'
expect_request update_echoes_mask bob@rcpt.example update \
    '{"ip": "198.51.100.7", "sender": "alice@sender.example", "user": "authuser1",
      "rcpts": ["bob@rcpt.example"], "rcpt_count": 1, "outcome": 0, "mask": "8000000000000105"}'
expect_no_phase accepted_not_released bob@rcpt.example release

scan_rl A plain "${AG[@]}" --ip 2001:db8::1 -F '<>' -r Carol@Rcpt.Example -r dave@rcpt.example -r Carol@Rcpt.Example
expect_request check_request_ipv6_bounce_three_rcpts Carol@Rcpt.Example check \
    '{"ip": "2001:db8::1", "has_sender": true, "sender": "", "user": "",
      "rcpts": ["Carol@Rcpt.Example", "dave@rcpt.example", "Carol@Rcpt.Example"], "rcpt_count": 3}'

scan_rl A plain "${AG[@]}" --ip 192.0.2.1 -F Erin@Sender.Example -r frank@rcpt.example -d deliver@rcpt.example
expect_request check_request_deliver_to_first deliver@rcpt.example check \
    '{"ip": "192.0.2.1", "sender": "Erin@Sender.Example", "rcpts": ["deliver@rcpt.example"], "rcpt_count": 1}'

# ---------------------------------------------------------------- A: replies to actions
echo "== two-phase flow (instance A): what rspamd does with the reply"
scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r limit-to@rcpt.example
expect_action limit_to_soft_reject soft_reject 'Ratelimit_"to"_exceeded'
expect_no_phase limited_not_updated limit-to@rcpt.example update
expect_no_phase limited_nothing_to_release limit-to@rcpt.example release

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r limit-user@rcpt.example -u heavy
expect_action limit_user_soft_reject soft_reject 'Ratelimit_"user"_exceeded'

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r silent@rcpt.example
copies=$(fake show "$FAKE_LOG" silent@rcpt.example | "$PYTHON" -S -c '
import json, sys
e = [json.loads(l) for l in sys.stdin]
print(len(e), len({x["hex"] for x in e}), len({x["src_port"] for x in e}))')
if [ "$ACTION" = no_action ] && [ "$copies" = "2 1 1" ] &&
   grep -q 'shingled check at 127.0.0.1:[0-9]*: read timeout; letting the message pass' "$TMP/rspamd-A/rspamd.log"; then
    pass no_answer_fails_open "passed after ${ELAPSED}s; fake saw 2 identical copies from one port; timeout logged"
else
    fail no_answer_fails_open "expected action no action, 2 identical copies (timeout 0.5 s, 1 retransmit) and a logged read timeout; seen action $ACTION, copies/distinct/ports: $copies"
fi
expect_no_phase unanswered_not_updated silent@rcpt.example update

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r badid@rcpt.example
if [ "$ACTION" = no_action ] && grep -q 'reply to another request id' "$TMP/rspamd-A/rspamd.log"; then
    pass reply_with_other_id_ignored "a limit reply carrying another id did not soft-reject; logged"
else
    fail reply_with_other_id_ignored "expected no action and a logged id mismatch, seen action $ACTION"
fi

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r resend@rcpt.example
copies=$(fake show "$FAKE_LOG" resend@rcpt.example | "$PYTHON" -S -c '
import json, sys
e = [json.loads(l) for l in sys.stdin]
print(len(e), len({x["hex"] for x in e}), len({x["src_port"] for x in e}), sum(x["replied"] for x in e))')
if [ "$ACTION" = soft_reject ] && [ "$copies" = "2 1 1 1" ]; then
    pass resend_is_identical_and_answered "first copy dropped, identical resend from the same port answered: soft reject"
else
    fail resend_is_identical_and_answered "expected soft reject after 2 identical copies (1 answered); seen action $ACTION, copies/distinct/ports/answered: $copies"
fi

scan_rl A plain "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r white@rcpt.example
expect_action whitelisted_passes no_action -
expect_no_phase whitelisted_not_updated white@rcpt.example update

scan_rl A prereject "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r gina@rcpt.example
expect_request other_prerejection_releases gina@rcpt.example release \
    '{"rcpts": ["gina@rcpt.example"], "outcome": 0, "mask": "8000000000000105"}'
expect_no_phase other_prerejection_not_updated gina@rcpt.example update

scan_rl A ham "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r hank@rcpt.example
expect_request update_outcome_ham hank@rcpt.example update '{"outcome": 1, "mask": "8000000000000105"}'
scan_rl A spam "${AG[@]}" --ip 198.51.100.7 -F alice@sender.example -r ivan@rcpt.example
if [ "$ACTION" = reject ]; then
    expect_request update_outcome_spam ivan@rcpt.example update '{"outcome": 2, "mask": "8000000000000105"}'
else
    fail update_outcome_spam "the spam test mail was not rejected on score (action $ACTION): test setup broken"
fi

# ---------------------------------------------------------------- B: one-shot, symbol mode
echo "== one-shot flow, symbol mode (instance B)"
scan_rl B plain -r judy@rcpt.example --ip 198.51.100.9 -F alice@sender.example
expect_request one_shot_request_allow_local judy@rcpt.example one-shot \
    '{"ip": "198.51.100.9", "sender": "alice@sender.example", "rcpts": ["judy@rcpt.example"], "mask": "0000000000000000"}'
n=$(fake show "$FAKE_LOG" judy@rcpt.example | wc -l)
if [ "$n" = 1 ]; then pass one_shot_single_datagram "one request per message"; else fail one_shot_single_datagram "$n requests for one message"; fi

scan_rl B plain -r limit-to_ip@rcpt.example --ip 198.51.100.9 -F alice@sender.example
want=$("$PYTHON" -c 'import math, struct; print("%.2f" % struct.unpack("<f", struct.pack("<f", 2 * math.tanh(0.5)))[0])')
sym=$(echo "$SYMS" | tr ';' '\n' | grep '^SHINGLED_RL=')
if [ "$ACTION" != soft_reject ] && [ "$sym" = "SHINGLED_RL=${want}[to_ip(limit-to_ip@rcpt.example)]" ]; then
    pass symbol_mode_inserts_symbol "action $ACTION, $sym"
else
    fail symbol_mode_inserts_symbol "expected no soft reject and SHINGLED_RL=${want}[to_ip(limit-to_ip@rcpt.example)]; seen action $ACTION, symbols $SYMS"
fi

# ---------------------------------------------------------------- protocol hygiene
bad=$(fake show "$FAKE_LOG" '*')
if [ -z "$bad" ]; then
    pass no_malformed_requests "every datagram decoded by the documented layout ($(wc -l <"$FAKE_LOG") datagrams)"
else
    fail no_malformed_requests "malformed datagrams: $(echo "$bad" | head -3)"
fi
check_alive_rl() {
    local i pidvar
    for i in A B; do
        pidvar="RSPAMD_PID_$i"
        kill -0 "${!pidvar}" 2>/dev/null || fail "rspamd_${i}_alive" "rspamd $i exited"
    done
    kill -0 "$FAKE_PID" 2>/dev/null || fail fake_alive "the fake service exited: $(cat "$TMP/fake.err")"
}
check_alive_rl
finish
