#!/usr/bin/env bash
# Issue 27 end to end: a REAL shingled (its counter service on a private
# loopback port, two workers) and a REAL, unmodified rspamd 3.4 loading
# contrib/rspamd/shingled_counters.lua with small thresholds, a controller
# worker and a bayes classifier (sqlite3) whose learn_condition hands user
# complaints to the plugin, as docs/counters-plugin.md says.
#
# Checked through rspamc (symbols) and through shingled (`shinglectl
# counters get`, the counters named by the shingles the plugin logs at
# debug level): a campaign with varied subjects fires SHINGLED_MASS_SUBJECT
# from the configured count on; a new sender fires SHINGLED_NEW_SENDER
# once; verdict counters follow rspamd's actions (reject -> spam, no action
# -> ham) and then SHINGLED_SPAMMY_SENDER fires; `rspamc learn_spam` moves
# the complaint counter and SHINGLED_COMPLAINED_SENDER fires; the distinct
# recipients of a sender are counted exactly and SHINGLED_FANOUT fires;
# with shingled stopped, scans pass with no shingled symbol and a log line.
# (That a resent datagram is not counted twice is counter_service_udp_test's.)
#
# Usage: rspamd_counters_plugin_test.sh [--build BUILD_DIR] [--keep] [--start-timeout SEC]
# Prints PASS/FAIL lines; the last line is "N passed, M failed".
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/integration/lib_check.sh
. "$SCRIPT_DIR/lib_check.sh"
# rl_parse_args, rl_cleanup; rspamd_conf_head and rspamd_launch
# shellcheck source=tests/integration/lib_rl_rspamd.sh
. "$SCRIPT_DIR/lib_rl_rspamd.sh"

RT=5
rl_parse_args 2,19 "$@"
shingled="$build/src/daemon/shingled"
ctl="$build/tools/shinglectl"
PLUGIN="$REPO_DIR/contrib/rspamd/shingled_counters.lua"
abort() { fail "$1" "$2"; finish; exit 1; }
for tool in rspamd rspamc python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 || abort requirements "$tool not found in PATH"
done
[ -x "$shingled" ] || abort requirements "no shingled at $shingled"
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rspamd-counters.XXXXXX") || abort setup "mktemp failed"
PIDS=(); CHILD_PIDS=()
trap rl_cleanup EXIT
read -r P_FUZZY P_CT P_NORMAL P_CTRL <<<"$("$PYTHON" -S "$SCRIPT_DIR/free_ports.py" 4)"

# ---------------------------------------------------------------- shingled
S="$TMP/shingled"
mkdir -p "$S"
cat >"$S/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$P_FUZZY";
counters_bind_socket = "127.0.0.1:$P_CT";
ratelimit_bind_socket = [];
max_hashes = 10000;
counters_max = 100000;
workers = 2;
hashfile = "$S/db";
control_socket = "$S/ctl.sock";
EOF
"$shingled" --config "$S/shingled.conf" >"$S/daemon.log" 2>&1 &
SHINGLED_PID=$!
PIDS+=("$SHINGLED_PID")
for _ in $(seq 100); do "$ctl" --socket "$S/ctl.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$ctl" --socket "$S/ctl.sock" ping >/dev/null 2>&1 || abort shingled_ready "shingled did not start: $(tail -3 "$S/daemon.log")"
pass "shingled_ready (counters on 127.0.0.1:$P_CT)"

# ---------------------------------------------------------------- rspamd
D="$TMP/rspamd"
mkdir -p "$D/db" "$D/run" "$D/plugins.d" "$TMP/mail"
cp "$PLUGIN" "$D/plugins.d/"
printf 'com\norg\nnet\nexample\n' >"$TMP/tld.dat"
ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)
{
    rspamd_conf_head "$D" "" "$P_NORMAL"
    cat <<EOF
modules { path = "$D/plugins.d/"; }
actions { reject = 15; add_header = 6; }
worker "controller" { bind_socket = "127.0.0.1:$P_CTRL"; count = 1; secure_ip = "127.0.0.1"; }
logging { debug_modules = ["shingled_counters"]; }
lua = "$TMP/test_rules.lua";
classifier "bayes" {
  tokenizer { name = "osb"; }
  backend = "sqlite3";
  min_learns = 0;
  min_tokens = 1;
  statfile { symbol = "BAYES_SPAM"; path = "$D/db/bayes_spam.sqlite"; spam = true; }
  statfile { symbol = "BAYES_HAM"; path = "$D/db/bayes_ham.sqlite"; spam = false; }
  learn_condition = 'return function(task, is_spam, is_unlearn) local p = rspamd_plugins["shingled_counters"]; if p then return p.learn(task, is_spam, is_unlearn) end return true end';
}
shingled_counters {
  servers = "127.0.0.1:$P_CT";
  prefix = "test";
  timeout = 1s;
  retransmits = 1;
  rules {
    SHINGLED_MASS_SUBJECT { feature = "subject"; window = "10m"; seen = 5; score = 1.0; }
    SHINGLED_NEW_SENDER { feature = "from"; window = "14d"; seen_max = 0; score = 0.1; }
    SHINGLED_SPAMMY_SENDER { feature = "from"; window = "24h"; spam_ratio = 0.9; min_verdicts = 3; score = 2.0; }
    SHINGLED_COMPLAINED_SENDER { feature = "from"; window = "7d"; complaint_spam = 1; score = 1.0; }
    SHINGLED_FANOUT { unique = "rcpts_per_sender"; window = "1h"; unique_min = 4; score = 1.0; }
  }
}
EOF
} >"$D/rspamd.conf"
# A subject with "verdict-spam" gets 20 points: rspamd rejects it.
cat >"$TMP/test_rules.lua" <<'EOF'
rspamd_config:register_symbol({ name = 'TEST_VERDICT_SPAM', score = 20.0, group = 'test',
  callback = function(task) return (task:get_subject() or ''):find('verdict-spam', 1, true) ~= nil end })
EOF
rspamd_launch "$D"
RSPAMD_PID=$!
# The campaign: the spec's test mail (../shared/spec/vectors/mail/msg1.eml)
# with small variations: another sender, Message-ID and subject each time.
SPEC_MAIL="$REPO_DIR/../shared/spec/vectors/mail/msg1.eml"
[ -r "$SPEC_MAIL" ] || abort requirements "missing $SPEC_MAIL (the repository sits beside ../shared)"
campaign() {  # FILE FROM SUBJECT
    sed -e "s/^From: .*/From: Sender <$2>/" -e "s/^Subject: .*/Subject: $3/" \
        -e "s/^Message-ID: .*/Message-ID: <$(basename "$1")@example.org>/" "$SPEC_MAIL" >"$1"
}
MAILGEN=mail
mail() {  # FILE FROM SUBJECT
    { echo "From: Sender <$2>"
      echo "To: Bob <bob@rcpt.example>"
      echo "Subject: $3"
      echo "Date: Tue, 03 Nov 2026 09:00:00 +0000"
      echo "Message-ID: <$(basename "$1")@sender.example>"
      echo "MIME-Version: 1.0"
      echo "Content-Type: text/plain; charset=utf-8"
      echo
      echo "Hello Bob, here are the minutes of our weekly meeting about the garden"
      echo "project, the budget for the new season and the list of volunteers."; } >"$1"
}
NSCAN=0
# scan FROM SUBJECT rspamc-args... -> ACTION and SYMS (the SHINGLED_* symbols, sorted)
scan() {
    local from=$1 subject=$2; shift 2
    NSCAN=$((NSCAN + 1))
    "$MAILGEN" "$TMP/mail/m$NSCAN.eml" "$from" "$subject"
    timeout -k 2 $((RT + 5)) rspamc -t "$RT" -h "127.0.0.1:$P_NORMAL" --json -U test-mta -F "$from" \
        "$@" "$TMP/mail/m$NSCAN.eml" >"$TMP/scan-$NSCAN.json" 2>&1
    read -r ACTION SYMS < <("$PYTHON" -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("unparsable -"); sys.exit(0)
s = sorted(k for k in d.get("symbols", {}) if k.startswith("SHINGLED_"))
print(d.get("action", "none").replace(" ", "_"), ",".join(s) or "-")' "$TMP/scan-$NSCAN.json")
}
has() { case ",$SYMS," in *",$1,"*) return 0 ;; esac; return 1; }
ready=0
for _ in $(seq $((START_TIMEOUT * 5))); do
    kill -0 "$RSPAMD_PID" 2>/dev/null || break
    scan warmup@sender.example "warm up" -r ready@rcpt.example
    if [ "$ACTION" != unparsable ] && grep -q 'shingled_counters: shingled at' "$D/rspamd.log"; then ready=1; break; fi
    sleep 0.2
done
[ $ready = 1 ] || abort rspamd_ready "rspamd did not answer with the plugin loaded: $(tail -n 5 "$D/rspamd.log" | cut -c1-300 | tr '\n' ' ')"
read -r -a kids <<<"$(cat /proc/"$RSPAMD_PID"/task/*/children 2>/dev/null | tr '\n' ' ')"; CHILD_PIDS+=("${kids[@]}")
pass "rspamd_ready ($(grep -o 'shingled_counters: shingled at.*' "$D/rspamd.log" | head -1 | cut -c1-200))"

# shingle HEX of FEATURE VALUE as the plugin logged it
shingle_of() {
    grep -o "feature $1 $2: counter [0-9]*:0x[0-9a-f]*" "$D/rspamd.log" | tail -1 | sed 's/.*:\(0x[0-9a-f]*\)$/\1/'
}
today() {  # COUNTER -> today's sum (field 4 of the six)
    "$ctl" counters get --prefix test --server "127.0.0.1:$P_CT" --json "$1" 2>/dev/null |
        "$PYTHON" -c 'import json,sys; d=json.loads(sys.stdin.read().splitlines()[-1]); print(d["today"])' 2>/dev/null
}

# ---------------------------------------------------------------- mass subject
echo "== a campaign (the spec's msg1, varied): SHINGLED_MASS_SUBJECT at seen >= 5 (10 minutes)"
ok=1; seen=()
q="Quarterly report on the northern warehouse inventory"
subjects=("$q" "$q 2" "RE: quarterly report on the Northern warehouse inventory" "Fwd: Quarterly  report on the northern warehouse inventory 17"
          "[staff] $q" "$q (2026)" "Fw: [staff] $q 3")
MAILGEN=campaign
for i in 1 2 3 4 5 6 7; do
    scan "c$i@campaign.example" "${subjects[$((i - 1))]}" -r "v$i@rcpt.example"
    seen+=("$i:$(has SHINGLED_MASS_SUBJECT && echo fired || echo -)")
    if [ $i -le 5 ]; then has SHINGLED_MASS_SUBJECT && ok=0; else has SHINGLED_MASS_SUBJECT || ok=0; fi
done
MAILGEN=mail
if [ $ok = 1 ]; then pass "mass_subject_fires_from_the_sixth_mail (${seen[*]}; subjects normalised)"
else fail mass_subject_fires_from_the_sixth_mail "expected mails 6-7 only; seen ${seen[*]}"; fi

# ---------------------------------------------------------------- novelty
scan newbie@fresh.example "Hello there" -r n1@rcpt.example
first=$SYMS
scan newbie@fresh.example "Hello again" -r n2@rcpt.example
if [[ ",$first," == *",SHINGLED_NEW_SENDER,"* ]] && ! has SHINGLED_NEW_SENDER; then
    pass "new_sender_fires_once (first: $first; second: $SYMS)"
else
    fail new_sender_fires_once "expected SHINGLED_NEW_SENDER on the first mail only; first $first, second $SYMS"
fi

# ---------------------------------------------------------------- verdict counters
echo "== verdict counters follow rspamd's actions"
for i in 1 2 3; do scan spammer@bad.example "verdict-spam $i" -r "s$i@rcpt.example"; done
spam_action=$ACTION
for i in 1 2; do scan friend@good.example "Lunch $i" -r "h$i@rcpt.example"; done
ham_action=$ACTION
sp=$(shingle_of from spammer@bad.example); hm=$(shingle_of from friend@good.example)
spam_count=$(today "1014:$sp"); ham_count=$(today "2014:$hm"); spam_of_friend=$(today "1014:$hm")
if [ "$spam_action" = reject ] && [ "$ham_action" = no_action ] && [ "$spam_count" = 3 ] &&
   [ "$ham_count" = 2 ] && [ "$spam_of_friend" = 0 ]; then
    pass "verdict_counters_follow_actions (3 rejects -> spam counter 1014:$sp = 3; 2 no-action -> ham 2014:$hm = 2)"
else
    fail verdict_counters_follow_actions "actions $spam_action/$ham_action; spam $spam_count, ham $ham_count, friend's spam $spam_of_friend (shingles '$sp' '$hm')"
fi
scan spammer@bad.example "A normal subject" -r s4@rcpt.example
if has SHINGLED_SPAMMY_SENDER; then pass "spammy_sender_fires_after_three_spam_verdicts ($SYMS)"
else fail spammy_sender_fires_after_three_spam_verdicts "symbols: $SYMS"; fi

# ---------------------------------------------------------------- complaints
echo "== rspamc learn_spam: a complaint"
mail "$TMP/mail/complaint.eml" complainer@shady.example "Your invoice"
timeout -k 2 $((RT + 5)) rspamc -t "$RT" -h "127.0.0.1:$P_CTRL" learn_spam "$TMP/mail/complaint.eml" >"$TMP/learn.out" 2>&1
scan complainer@shady.example "Your invoice again" -r k1@rcpt.example
cm=$(shingle_of from complainer@shady.example)
complaints=$(today "3014:$cm")
if [ "$complaints" = 1 ] && has SHINGLED_COMPLAINED_SENDER; then
    pass "learn_spam_moves_the_complaint_counter (3014:$cm = 1; next scan: $SYMS)"
else
    fail learn_spam_moves_the_complaint_counter "complaints '$complaints'; symbols $SYMS; learn: $(head -c 200 "$TMP/learn.out")"
fi

# ---------------------------------------------------------------- distinct recipients
echo "== distinct recipients of a sender (unique counter)"
scan fan@wide.example "Note 1" -r r1@rcpt.example -r r2@rcpt.example
scan fan@wide.example "Note 2" -r r2@rcpt.example -r r3@rcpt.example
scan fan@wide.example "Note 3" -r r4@rcpt.example -r r5@rcpt.example
before=$SYMS
scan fan@wide.example "Note 4" -r r6@rcpt.example
fs=$(shingle_of env_from fan@wide.example)
distinct=$(today "5017:$fs:0x1")
if [ "$distinct" = 6 ] && has SHINGLED_FANOUT && [[ ",$before," != *",SHINGLED_FANOUT,"* ]]; then
    pass "distinct_recipients_exact_and_fanout_fires (5017:$fs = 6; fired at the 4th mail: $SYMS)"
else
    fail distinct_recipients_exact_and_fanout_fires "distinct '$distinct' (want 6); 3rd mail $before, 4th $SYMS"
fi

# ---------------------------------------------------------------- failing open
kill -STOP "$SHINGLED_PID"
scan brand-new@other.example "Cheap pills 8" -r z1@rcpt.example
kill -CONT "$SHINGLED_PID"
if [ "$ACTION" = no_action ] && [ "$SYMS" = - ] && grep -q 'no counter figures' "$D/rspamd.log"; then
    pass "fails_open_when_shingled_is_stopped (no symbol, action $ACTION, logged)"
else
    fail fails_open_when_shingled_is_stopped "action $ACTION, symbols $SYMS"
fi
if kill -0 "$RSPAMD_PID" 2>/dev/null && kill -0 "$SHINGLED_PID" 2>/dev/null; then pass processes_alive
else fail processes_alive "shingled or rspamd exited"; fi
if [ "$failed" -gt 0 ]; then
    echo "---- plugin lines ----"; grep -i 'shingled_counters' "$D/rspamd.log" | tail -n 12 | cut -c1-300
fi
finish
