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
  --refusal-code N       Value expected in replies to refused writes (default 403, as
                         rspamd 3.4; 3.10+ storages answer 503).
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

die() { echo "error: $*" >&2; echo "0 passed, 1 failed"; exit 2; }

# ---------------------------------------------------------------- arguments
MODE=""; SHINGLED=""; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=""; REFUSAL_CODE=403; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=20; RT=5; TRACE=0; KEEP=0; FUZZY_TIMEOUT=2s

while [ $# -gt 0 ]; do
    case "$1" in
        --shingled) MODE=shingled; SHINGLED="${2:?--shingled needs a path}"; shift 2 ;;
        --build) MODE=shingled; SHINGLED="${2:?--build needs a dir}/src/daemon/shingled"; shift 2 ;;
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

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
[ -n "$VECTORS" ] || VECTORS="$REPO_DIR/../shared/spec/vectors"
MAILS="$VECTORS/mail"
for f in msg1.eml msg2.eml msg3.eml; do
    [ -r "$MAILS/$f" ] || die "missing test mail $MAILS/$f (use --vectors DIR)"
done
for tool in rspamd rspamc python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found in PATH"
done
# the real interpreter, not a wrapper such as a pyenv shim (the helper runs ~100 times)
PYTHON=$(python3 -c 'import sys; print(sys.executable)') || die "python3 does not run"
if [ "$MODE" = shingled ]; then
    [ -x "$SHINGLED" ] || die "--shingled: '$SHINGLED' is not an executable file"
    SHINGLED="$(cd "$(dirname "$SHINGLED")" && pwd)/$(basename "$SHINGLED")"
fi
if [ -z "$WRITE_WAIT" ]; then
    if [ "$MODE" = rspamd ]; then
        WRITE_WAIT=$("$PYTHON" -c "print(float('$SYNC') + 1.5)")
    else
        WRITE_WAIT=0
    fi
fi

# ---------------------------------------------------------------- temp dir, cleanup
TMP="$(mktemp -d "${TMPDIR:-/tmp}/rspamd-fuzzy-test.XXXXXX")" || die "mktemp failed"
PIDS=()        # processes this script started (servers, rspamd, relays)
CHILD_PIDS=()  # their direct children seen after start-up (rspamd workers)

cleanup() {
    local pid i alive
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for i in $(seq 50); do
        alive=0
        for pid in "${PIDS[@]}" "${CHILD_PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${PIDS[@]}" "${CHILD_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    if [ "$KEEP" = 1 ]; then
        echo "kept temp dir: $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
NPASS=0; NFAIL=0
on_signal() {  # keep the "N passed, M failed" last line even when interrupted
    trap - INT TERM
    NFAIL=$((NFAIL + 1)); echo "FAIL interrupted: got SIG$1 before the end of the run"
    echo "$NPASS passed, $NFAIL failed"
    exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

remember_children() {   # record the direct children of a started process
    local c
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do CHILD_PIDS+=("$c"); done
}

# ---------------------------------------------------------------- python helper
PY="$TMP/fz.py"
cat >"$PY" <<'PYEOF'
import json, math, os, random, select, socket, struct, sys, time

def u(s): return struct.unpack('<iIIf', s[:16])

def free_ports(n):
    got = []
    while len(got) < n:
        p = random.randint(20000, 40000)
        if p in got:
            continue
        ok = True
        for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, typ)
            try:
                s.bind(('127.0.0.1', p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            got.append(p)
    print(' '.join(map(str, got)))

def request(cmd, flag=0, value=0, digest=None, tag=None):
    tag = random.getrandbits(32) if tag is None else tag
    digest = os.urandom(64) if digest is None else digest
    return struct.pack('<BBBBiI', 4, cmd, 0, flag, value, tag) + digest, tag

def exchange(port, data, timeout, src='127.0.0.1'):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            s.sendto(data, ('127.0.0.1', port))
            r, _, _ = select.select([s], [], [], min(1.0, max(0.05, deadline - time.time())))
            if r:
                return s.recv(2048)
        return None
    finally:
        s.close()

def probe(port, timeout):
    """Send STAT until some reply arrives (readiness probe)."""
    data, tag = request(3, digest=bytes(64))
    rep = exchange(int(port), data, float(timeout))
    if rep is None:
        print('no reply'); return 1
    if len(rep) >= 16:
        v, f, t, p = u(rep)
        print('len=%d value=%d flag(count)=%d tag_ok=%d prob=%g' % (len(rep), v, f, t == tag, p))
    else:
        print('len=%d (short reply)' % len(rep))
    return 0

def raw(port, cmd, flag, value):
    data, tag = request(int(cmd), int(flag), int(value))
    rep = exchange(int(port), data, 3.0)
    if rep is None:
        print('len=0 no reply'); return 1
    if len(rep) < 16:
        print('len=%d short' % len(rep)); return 1
    v, f, t, p = u(rep)
    print('len=%d value=%d flag=%d tag_ok=%d prob=%g' % (len(rep), v, f, t == tag, p))
    return 0

def is_bound(port):
    """prints 1 if some process has UDP 127.0.0.1:port bound, else 0"""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(('127.0.0.1', int(port)))
        print(0)
    except OSError:
        print(1)
    finally:
        s.close()
    return 0

def load(path):
    with open(path, 'rb') as fh:
        return json.loads(fh.read().decode('utf-8', 'replace'))

def syms(path):
    """rspamc --json symbols output -> one line per FUZZY_* symbol: NAME SCORE OPT|OPT"""
    try:
        d = load(path)
        s = d['symbols']
    except Exception as e:
        print('ERROR cannot parse scan result: %s' % e); return 2
    for name, sym in sorted(s.items()):
        if name.startswith('FUZZY'):
            print('%s %.4f %s' % (name, sym.get('score', 0.0), '|'.join(sym.get('options', [])) or '-'))
    return 0

def addres(path):
    """rspamc --json fuzzy_add/del output -> 'ok HASH...' or 'fail REASON'"""
    try:
        d = load(path)
    except Exception:
        with open(path, 'rb') as fh:
            raw = fh.read(300).decode('utf-8', 'replace')
        print('fail rspamc output: ' + ' '.join(raw.split())); return 0
    if d.get('success') is True:
        print('ok ' + ' '.join(d.get('hashes', [])))
    else:
        print('fail ' + json.dumps(d))
    return 0

def statres(path, rule):
    try:
        d = load(path)
        print(d['fuzzy_hashes'][rule])
    except Exception:
        print('missing')
    return 0

def score(weight, value, prob, max_score=100.0):
    """rspamd 3.4 fuzzy score: weight * tanh(e * value / max_score) * sqrt(prob)"""
    print('%.4f' % (float(weight) * math.tanh(math.e * float(value) / float(max_score)) * math.sqrt(float(prob))))
    return 0

def scoreok(score_, weight, value, prob, tol='0.011'):
    """Does SCORE fit stored VALUE at the (2-decimal) option PROB? Compares the prob implied by
    the score, (score / (weight * tanh(e * value / 100)))^2, with PROB."""
    f = float(weight) * math.tanh(math.e * float(value) / 100.0)
    implied = (float(score_) / f) ** 2
    return 0 if abs(implied - float(prob)) <= float(tol) else 1

def fcmp(a, op, b, tol='0.01'):
    a, b, tol = float(a), float(b), float(tol)
    r = {'lt': a < b, 'gt': a > b, 'eq': abs(a - b) <= tol, 'le': a <= b, 'ge': a >= b}[op]
    return 0 if r else 1

CMDS = {0: 'CHECK', 1: 'WRITE', 2: 'DEL', 3: 'STAT', 4: 'PING'}

def decode_req(b):
    if len(b) >= 4 and b[:4] == b'rsfe':
        return 'encrypted %d bytes' % len(b)
    if len(b) < 76:
        return 'short %d bytes' % len(b)
    ver, cmd, shc, flag, value, tag = struct.unpack('<BBBBiI', b[:12])
    off = 76 + (256 if shc else 0)
    ext = b[off:]
    exts = []
    i = 0
    while i < len(ext):
        t = ext[i]
        if t == 0x64 and i + 1 < len(ext):
            n = ext[i + 1]; exts.append("d'%s'" % ext[i + 2:i + 2 + n].decode('latin-1')); i += 2 + n
        elif t == 0x34:
            exts.append('ip4 ' + socket.inet_ntop(socket.AF_INET, ext[i + 1:i + 5])); i += 5
        elif t == 0x36:
            exts.append('ip6 ' + socket.inet_ntop(socket.AF_INET6, ext[i + 1:i + 17])); i += 17
        else:
            exts.append('?' + ext[i:].hex()); break
    return ('%d bytes ver=%d cmd=%s shingles=%d flag=%d value=%d tag=%08x digest=%s ext=[%s]' %
            (len(b), ver, CMDS.get(cmd, cmd), shc, flag, value, tag, b[12:20].hex(), ', '.join(exts)))

def decode_rep(b):
    if len(b) < 16:
        return 'short %d bytes' % len(b)
    v, f, t, p = u(b)
    s = '%d bytes value=%d flag=%d tag=%08x prob=%g' % (len(b), v, f, t, p)
    if len(b) >= 84:
        s += ' digest=%s ts=%d' % (b[16:24].hex(), struct.unpack('<I', b[80:84])[0])
    return s

def relay(lport, tport, log):
    """UDP relay 127.0.0.1:lport -> 127.0.0.1:tport that logs every datagram."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lsock.bind(('127.0.0.1', int(lport)))
    ups = {}   # client addr -> upstream socket
    back = {}  # upstream fd -> client addr
    out = open(log, 'a', buffering=1)
    t0 = time.time()
    while True:
        r, _, _ = select.select([lsock] + list(ups.values()), [], [], 1.0)
        for s in r:
            if s is lsock:
                data, addr = lsock.recvfrom(4096)
                up = ups.get(addr)
                if up is None:
                    up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    up.connect(('127.0.0.1', int(tport)))
                    ups[addr] = up; back[up.fileno()] = addr
                out.write('%7.3f %s:%d -> %s\n' % (time.time() - t0, addr[0], addr[1], decode_req(data)))
                try:
                    up.send(data)
                except OSError as e:
                    out.write('        send error %s\n' % e)
            else:
                try:
                    data = s.recv(4096)
                except OSError as e:
                    out.write('        upstream error %s\n' % e); continue
                addr = back[s.fileno()]
                out.write('%7.3f %s:%d <- %s\n' % (time.time() - t0, addr[0], addr[1], decode_rep(data)))
                lsock.sendto(data, addr)

if __name__ == '__main__':
    a = sys.argv[1:]
    f = {'ports': lambda: free_ports(int(a[1])), 'probe': lambda: probe(a[1], a[2]),
         'raw': lambda: raw(*a[1:5]), 'isbound': lambda: is_bound(a[1]),
         'syms': lambda: syms(a[1]), 'addres': lambda: addres(a[1]),
         'statres': lambda: statres(a[1], a[2]), 'score': lambda: score(*a[1:]),
         'cmp': lambda: fcmp(*a[1:]), 'scoreok': lambda: scoreok(*a[1:]), 'relay': lambda: relay(a[1], a[2], a[3])}[a[0]]
    sys.exit(f() or 0)
PYEOF
py() { "$PYTHON" -S "$PY" "$@"; }

# ---------------------------------------------------------------- results
pass() { NPASS=$((NPASS + 1)); echo "PASS $1${2:+ ($2)}"; }
# a documented difference of rspamd's own sqlite storage, accepted only in --rspamd-fuzzy mode
deviation() { NPASS=$((NPASS + 1)); echo "PASS $1 (known rspamd 3.4 sqlite deviation: $2)"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $1: $2"; }
info() { echo "     $*"; }
indent() { sed 's/^/       | /'; }

# ---------------------------------------------------------------- ports, dirs
read -r P_NORMAL P_CTRL P_FUZZY P_REFUSE P_RELAY1 P_RELAY2 <<<"$(py ports 6)"
[ -n "$P_RELAY2" ] || die "could not pick free ports"
mkdir -p "$TMP/mail" "$TMP/rspamd/db" "$TMP/rspamd/run"
printf 'com\norg\nnet\n' >"$TMP/tld.dat"   # tiny TLD list: the stock one takes ~16 s to compile
ROOT_OPTS=()
[ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)   # rspamd refuses to run workers as root otherwise

echo "mode=$MODE write_wait=${WRITE_WAIT}s tmp=$TMP"
echo "ports: normal=$P_NORMAL controller=$P_CTRL fuzzy=$P_FUZZY fuzzy_refuse=$P_REFUSE$( [ $TRACE = 1 ] && echo " relays=$P_RELAY1,$P_RELAY2")"

# ---------------------------------------------------------------- test mails
cp "$MAILS/msg1.eml" "$MAILS/msg2.eml" "$MAILS/msg3.eml" "$TMP/mail/"

mail_header() {  # from to subject msgid
    printf 'From: %s\nTo: %s\nSubject: %s\nDate: Tue, 03 Nov 2026 09:00:00 +0000\nMessage-ID: <%s>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 7bit\n\n' "$@"
}
# msg4: long German text (added with flag 1). It shares no word with msg1, but its "Kinder"
# stems to "kind" like msg2's "Kind regards", so exactly one of msg2's shingles points at
# msg4: msg2's vote is split 30 (msg1) : 1 (msg4), see msg2_vote below.
{
    mail_header 'Erin Example <erin@example.com>' 'Frank Example <frank@example.net>' \
        'Beobachtungsabende und Wartung des Teleskops' 'fuzzy-test-0004@example.com'
    cat <<'EOF'
Liebe Mitglieder des Sternwartenvereins am Fluss,

der Vorstand hat sich am Donnerstag getroffen, um die Beobachtungsabende im
Herbst zu planen. Freiwillige oeffnen die Kuppel jeden zweiten Samstag von
sieben Uhr bis Mitternacht, sofern das Wetter mitspielt, und Besucher parken
bitte hinter der alten Muehle statt neben der Fussgaengerbruecke. Das grosse
Spiegelteleskop braucht eine neue Halterung fuer den Fangspiegel, deshalb hat
Gregor eine bei einer Werkstatt aus Bayern bestellt; bis sie ankommt, benutzen
wir den kleineren Refraktor und die Fernglasmontierung. Kinder aus der
Dorfschule wuenschten sich einen besonderen Abend ueber Jupiter und seine
Monde, was wir gerne zugesagt haben. Denkt bitte daran, dass rote
Taschenlampen auf der Plattform Pflicht sind, dass heisse Schokolade eine
Muenze pro Becher kostet und dass das Logbuch nach jeder Beobachtung
unterschrieben werden muss. Im Bibliotheksschrank stehen jetzt Sternatlanten,
Okularkataloge und eine geschenkte Sammlung alter fotografischer Platten. Die
Mitgliedsbeitraege fuer das naechste Jahr bleiben unveraendert.

Klaren Himmel wuenscht
Erin
EOF
} >"$TMP/mail/msg4.eml"
# msg5: msg4 with three words changed (near-duplicate, must match msg4 by shingles)
sed -e 's/am Donnerstag/am Mittwoch/' -e 's/^Gregor eine/Martin eine/' \
    -e 's/gerne zugesagt/gern zugesagt/' -e 's/fuzzy-test-0004/fuzzy-test-0005/' \
    "$TMP/mail/msg4.eml" >"$TMP/mail/msg5.eml"
# msg6: long unrelated text, never added
{
    mail_header 'Grace Example <grace@example.net>' 'Henry Example <henry@example.org>' \
        'Sourdough workshop notes and equipment list' 'fuzzy-test-0006@example.net'
    cat <<'EOF'
Hi Henry,

thanks for helping with the sourdough workshop last weekend. Here are my
notes so the next group can prepare properly. Every participant should bring
an apron, a kitchen scale that measures single grams, two glass jars with
loose lids and a linen cloth. Feed the starter twice daily using equal parts
rye flour and lukewarm water, then wait until it doubles and smells pleasantly
sour. Mix the dough with strong wheat flour, salt and water, rest it for forty
minutes, and perform four sets of stretch and fold spaced half an hour apart.
Shape the loaves gently, dust the banneton with rice flour, and let them prove
overnight in the refrigerator. Bake inside a preheated cast iron pot, first
covered for twenty minutes and afterwards uncovered until the crust turns
deep brown. Let each loaf cool completely before slicing, otherwise the crumb
stays gummy. Our bakery supplier offered discounted flour sacks for members.

Warm wishes,
Grace
EOF
} >"$TMP/mail/msg6.eml"

# ---------------------------------------------------------------- servers
SERVER_PID_main=""; SERVER_PID_refuse=""

write_rspamd_fuzzy_conf() {  # dir port allow
    cat >"$1/rspamd-fuzzy.conf" <<EOF
options {
  pidfile = "$1/rspamd.pid";
  url_tld = "$TMP/tld.dat";
  hs_cache_dir = "$1";
  dynamic_conf = "$1/dynamic";
  filters = "";
}
logging { type = "file"; filename = "$1/rspamd.log"; level = "info"; }
worker "fuzzy" {
  bind_socket = "127.0.0.1:$2";
  count = 1;
  backend = "sqlite";
  hash_file = "$1/fuzzy.db";
  sync = ${SYNC}s;
  expire = 90d;
  allow_update = ["$3"];
}
EOF
}

write_shingled_conf() {  # dir port allow
    cat >"$1/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$2";
allow_update = ["$3"];
workers = 2;
control_socket = "$1/ctl.sock";
$SHINGLED_CONF_EXTRA
EOF
}

start_server() {  # name port allow
    local name=$1 port=$2 allow=$3 dir="$TMP/srv-$1" cmd pid
    mkdir -p "$dir"
    case "$MODE" in
        rspamd)
            write_rspamd_fuzzy_conf "$dir" "$port" "$allow"
            rspamd -f "${ROOT_OPTS[@]}" -c "$dir/rspamd-fuzzy.conf" --var DBDIR="$dir" \
                --var RUNDIR="$dir" --var LOGDIR="$dir" >"$dir/stdout.log" 2>&1 &
            ;;
        shingled)
            write_shingled_conf "$dir" "$port" "$allow"
            "$SHINGLED" --config "$dir/shingled.conf" >"$dir/stdout.log" 2>&1 &
            ;;
        cmd)
            cmd=${SERVER_CMD//\{PORT\}/$port}; cmd=${cmd//\{ALLOW\}/$allow}
            cmd=${cmd//\{DIR\}/$dir}; cmd=${cmd//\{NAME\}/$name}
            bash -c "exec $cmd" >"$dir/stdout.log" 2>&1 &
            ;;
    esac
    pid=$!
    PIDS+=("$pid")
    printf -v "SERVER_PID_$name" '%s' "$pid"
}

wait_server() {  # name port
    local name=$1 port=$2 pidvar="SERVER_PID_$1" out
    out=$(py probe "$port" "$START_TIMEOUT")
    if [ $? = 0 ]; then
        remember_children "${!pidvar}"
        pass "server_${name}_answers_stat" "port $port: $out"
        return 0
    fi
    if ! kill -0 "${!pidvar}" 2>/dev/null; then
        fail "server_${name}_start" "process exited; output:"
        tail -n 20 "$TMP/srv-$name/stdout.log" 2>/dev/null | indent
        return 1
    fi
    if [ "$(py isbound "$port")" = 1 ]; then
        remember_children "${!pidvar}"
        fail "server_${name}_answers_stat" "no reply to a raw STAT within ${START_TIMEOUT}s, but UDP port $port is bound; continuing"
        return 0
    fi
    fail "server_${name}_start" "UDP port $port not bound after ${START_TIMEOUT}s"
    return 1
}

start_relay() {  # listen target name
    "$PYTHON" -S "$PY" relay "$1" "$2" "$TMP/trace-$3.log" >"$TMP/relay-$3.err" 2>&1 &
    PIDS+=("$!")
}

finish() {
    if [ "$NFAIL" -gt 0 ] && [ -f "$TMP/rspamd/rspamd.log" ]; then
        echo "---- last fuzzy lines of the rspamd log ----"
        grep -i fuzzy "$TMP/rspamd/rspamd.log" | tail -n 25 | cut -c1-300
    fi
    if [ "$TRACE" = 1 ]; then
        for n in main refuse; do
            echo "---- trace of the '$n' server (relay log) ----"
            cat "$TMP/trace-$n.log" 2>/dev/null
        done
    fi
    echo "$NPASS passed, $NFAIL failed"
    [ "$NFAIL" = 0 ]
    exit $?
}

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
R="$TMP/rspamd"
cat >"$R/rspamd.conf" <<EOF
# Self-contained rspamd 3.4 config: no /etc/rspamd includes, no Lua rules, no redis/DNS users.
options {
  pidfile = "$R/run/rspamd.pid";
  filters = "fuzzy_check";          # C modules run only if listed here
  url_tld = "$TMP/tld.dat";
  hs_cache_dir = "$R/db";
  cache_file = "$R/db/symbols.cache";
  dynamic_conf = "$R/db/rspamd_dynamic";
  history_file = "$R/db/rspamd.history";
  stats_file = "$R/db/stats.ucl";
  local_addrs = [];
  task_timeout = 8s;
}
logging { type = "file"; filename = "$R/rspamd.log"; level = "info"; }
worker "normal" {
  bind_socket = "127.0.0.1:$P_NORMAL";
  count = 1;
  mime = true;
}
worker "controller" {
  bind_socket = "127.0.0.1:$P_CTRL";
  count = 1;
  secure_ip = "127.0.0.1";          # fuzzy_add/fuzzy_del without password
}
actions { reject = 1000; }
group "fuzzy_test" {
  max_score = 1000;
  symbols {
    FUZZY_DENIED_TEST { weight = 10.0; description = "fuzzy flag 1 (server under test)"; }
    FUZZY_WHITE_TEST { weight = -5.0; description = "fuzzy flag 2 (server under test)"; }
    FUZZY_REFUSE_TEST { weight = 1.0; description = "fuzzy flag 3 (server refusing writes)"; }
  }
}
fuzzy_check {
  min_bytes = 1k;
  timeout = $FUZZY_TIMEOUT;
  retransmits = 1;
  rule "test" {
    servers = "127.0.0.1:$RULE_PORT_MAIN";
    read_only = false;
    max_score = 100.0;
    mime_types = ["*"];
    short_text_direct_hash = true;
    min_length = 64;
    fuzzy_map = {
      FUZZY_DENIED_TEST { max_score = 100.0; flag = 1; }
      FUZZY_WHITE_TEST { max_score = 100.0; flag = 2; }
    }
  }
  # writes with -f 3 go only here: this server allows updates from 127.0.0.2 only
  rule "refuse" {
    servers = "127.0.0.1:$RULE_PORT_REFUSE";
    read_only = false;
    max_score = 100.0;
    mime_types = ["*"];
    short_text_direct_hash = true;
    min_length = 64;
    fuzzy_map = {
      FUZZY_REFUSE_TEST { max_score = 100.0; flag = 3; }
    }
  }
}
EOF

rspamd -f "${ROOT_OPTS[@]}" -c "$R/rspamd.conf" --var DBDIR="$R/db" --var RUNDIR="$R/run" \
    --var LOGDIR="$R" >"$R/stdout.log" 2>&1 &
RSPAMD_PID=$!
PIDS+=("$RSPAMD_PID")

rc() {  # outfile rspamc-args...   (bounded rspamc call)
    local out=$1; shift
    timeout -k 2 $((RT + 5)) rspamc -t "$RT" "$@" >"$out" 2>&1
}

t0=$(date +%s.%N)
ready=0
deadline=$(( $(date +%s) + START_TIMEOUT ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    kill -0 "$RSPAMD_PID" 2>/dev/null || break
    if rc "$TMP/ready.out" -h "127.0.0.1:$P_CTRL" stat &&
       rc "$TMP/ready.json" -h "127.0.0.1:$P_NORMAL" --json symbols "$TMP/mail/msg3.eml" &&
       py syms "$TMP/ready.json" >/dev/null; then
        ready=1; break
    fi
    sleep 0.2
done
if [ $ready = 1 ]; then
    remember_children "$RSPAMD_PID"
    pass rspamd_ready "controller and normal worker answer after $("$PYTHON" -c "print('%.1f' % ($(date +%s.%N) - $t0))")s"
else
    fail rspamd_ready "rspamd did not answer within ${START_TIMEOUT}s"
    tail -n 20 "$R/stdout.log" "$R/rspamd.log" 2>/dev/null | indent
    finish
fi

# ---------------------------------------------------------------- check helpers
NSCAN=0
# scan MAIL -> sets SCAN (lines "NAME SCORE OPTS") and SCAN_OK
scan() {
    NSCAN=$((NSCAN + 1))
    local f="$TMP/scan-$NSCAN.json"
    SCAN_OK=1
    if ! rc "$f" -h "127.0.0.1:$P_NORMAL" --json symbols "$TMP/mail/$1"; then
        SCAN_OK=0; SCAN="rspamc failed: $(head -c 400 "$f")"; return 1
    fi
    SCAN=$(py syms "$f") || { SCAN_OK=0; SCAN="$SCAN / $(head -c 400 "$f")"; return 1; }
    return 0
}
seen() { [ -n "$SCAN" ] && echo "$SCAN" | tr '\n' ';' | sed 's/;$//' || echo "no FUZZY symbols"; }
sym_line() { echo "$SCAN" | awk -v s="$1" '$1 == s'; }

# expect_sym CHECKNAME MAIL SYMBOL present|absent
expect_sym() {
    local name=$1 mail=$2 sym=$3 want=$4 line
    if ! scan "$mail"; then fail "$name" "scan of $mail failed: $SCAN"; return 1; fi
    line=$(sym_line "$sym")
    if [ "$want" = present ] && [ -n "$line" ]; then
        pass "$name" "$mail: $line"; return 0
    elif [ "$want" = absent ] && [ -z "$line" ]; then
        pass "$name" "$mail: $(seen)"; return 0
    fi
    fail "$name" "$mail: expected $sym $want, seen: $(seen)"
    return 1
}
# no fuzzy symbol of any kind (FUZZY_*)
expect_none() {
    local name=$1 mail=$2
    if ! scan "$mail"; then fail "$name" "scan of $mail failed: $SCAN"; return 1; fi
    if [ -z "$SCAN" ]; then pass "$name" "$mail: no FUZZY symbols"; return 0; fi
    fail "$name" "$mail: expected no FUZZY_* symbol, seen: $(seen)"
}
# option "FLAG:DIGEST10:PROB:TYPE" of SYMBOL in the last scan -> OPT_FLAG OPT_DIGEST OPT_PROB OPT_TYPE SCORE
parse_opt() {
    local line; line=$(sym_line "$1")
    SCORE=$(echo "$line" | awk '{print $2}')
    IFS=: read -r OPT_FLAG OPT_DIGEST OPT_PROB OPT_TYPE <<<"$(echo "$line" | awk '{print $3}' | cut -d'|' -f1)"
}

# fuzzy_op CHECKNAME CMD FLAG WEIGHT MAIL -> sets HASHES; expects success with 1 hash
fuzzy_op() {
    local name=$1 cmd=$2 flag=$3 weight=$4 mail=$5 f="$TMP/op-$1.json" res
    local args=(-h "127.0.0.1:$P_CTRL" --json -f "$flag")
    [ -n "$weight" ] && args+=(-w "$weight")
    rc "$f" "${args[@]}" "$cmd" "$TMP/mail/$mail"
    local code=$?
    res=$(py addres "$f")
    HASHES=${res#ok }
    if [ $code = 0 ] && [ "${res%% *}" = ok ] && [ "$(echo "$HASHES" | wc -w)" = 1 ]; then
        pass "$name" "rspamc $cmd -f $flag${weight:+ -w $weight} $mail -> ${HASHES:0:16}..."
        return 0
    fi
    fail "$name" "rspamc $cmd -f $flag${weight:+ -w $weight} $mail: expected success with one hash, rc=$code, got: $res"
    HASHES=""
    return 1
}

# stop early (instead of piling up client timeouts) if a server or rspamd died
check_alive() {
    local n pidvar
    for n in main refuse; do
        pidvar="SERVER_PID_$n"
        if ! kill -0 "${!pidvar}" 2>/dev/null; then
            fail "server_${n}_alive" "the '$n' server process (pid ${!pidvar}) has exited; last output:"
            tail -n 20 "$TMP/srv-$n/stdout.log" 2>/dev/null | indent
            finish
        fi
    done
    if ! kill -0 "$RSPAMD_PID" 2>/dev/null; then
        fail rspamd_alive "rspamd (pid $RSPAMD_PID) has exited"
        tail -n 20 "$R/stdout.log" 2>/dev/null | indent
        finish
    fi
}

settle() { [ "$WRITE_WAIT" != 0 ] && sleep "$WRITE_WAIT"; return 0; }

# expect_stat CHECKNAME RULE N : `rspamc stat` shows N hashes for the rule
expect_stat() {
    local name=$1 rule=$2 want=$3 f="$TMP/stat-$1.json" got
    rc "$f" -h "127.0.0.1:$P_CTRL" --json stat
    got=$(py statres "$f" "$rule")
    if [ "$got" = "$want" ]; then
        pass "$name" "rspamc stat: fuzzy hashes in \"$rule\" = $got"
    else
        fail "$name" "rspamc stat: expected $want fuzzy hashes for rule \"$rule\", got $got"
    fi
}

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
