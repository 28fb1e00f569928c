# shellcheck shell=bash
# Shared helpers of the integration tests that use a REAL rspamd 3.4 as the
# fuzzy client (rspamd_fuzzy_test.sh, rspamd_encrypted_test.sh). Source it;
# it only defines functions. The calling script sets MODE (shingled | rspamd |
# cmd), SHINGLED, SHINGLED_CONF_EXTRA, SERVER_CMD, SYNC, WRITE_WAIT, VECTORS,
# START_TIMEOUT, RT, TRACE, KEEP, FUZZY_TIMEOUT, then calls, in this order:
#
#   lib_check_env          tools, python, mails, shingled path, WRITE_WAIT default
#   lib_setup PREFIX       temp dir TMP, cleanup traps, python helper, tld list
#   lib_make_mails         TMP/mail/msg1..6.eml
#   start_server / wait_server / start_relay
#   start_rspamd           with RSPAMD_SYMBOLS and RSPAMD_RULES (UCL text) set
#   scan, expect_sym, fuzzy_op, expect_stat, ...   (checks)
#   finish                 prints "N passed, M failed" and exits
#
# Globals it maintains: NPASS NFAIL PIDS CHILD_PIDS SERVER_NAMES TRACE_NAMES
# RSPAMD_PID P_NORMAL P_CTRL (set by the caller from `free_ports`).

die() { echo "error: $*" >&2; echo "0 passed, 1 failed"; exit 2; }

# RSPAMD_PREFIX=DIR runs another rspamd build as the client (DIR/bin/rspamd,
# rspamc, rspamadm), e.g. a current release built from source for a manual
# check (docs/rspamd-versions.md); CI uses Debian's 3.4 from PATH.
if [ -n "${RSPAMD_PREFIX:-}" ]; then
    [ -x "$RSPAMD_PREFIX/bin/rspamd" ] || die "RSPAMD_PREFIX: no $RSPAMD_PREFIX/bin/rspamd"
    export PATH="$RSPAMD_PREFIX/bin:$PATH"
fi
# The client's version, "3.4" or "4.1.5": checks that differ by client epoch
# ask client_at_least 3.10.
RSPAMD_CLIENT_VERSION=$(rspamd --version 2>/dev/null | grep -o 'version [0-9][0-9.]*' | head -1 | cut -d' ' -f2)
export RSPAMD_CLIENT_VERSION
client_at_least() {  # MAJOR.MINOR
    [ "$(printf '%s\n%s\n' "$1" "${RSPAMD_CLIENT_VERSION:-0}" | sort -V | head -1)" = "$1" ]
}
# shellcheck source=tests/integration/lib_rspamd_conf.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd_conf.sh"

# ---------------------------------------------------------------- environment
lib_check_env() {
    SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
    [ -n "$VECTORS" ] || VECTORS="$REPO_DIR/../shared/spec/vectors"
    MAILS="$VECTORS/mail"
    local f tool
    for f in msg1.eml msg2.eml msg3.eml; do
        [ -r "$MAILS/$f" ] || die "missing test mail $MAILS/$f (use --vectors DIR)"
    done
    for tool in rspamd rspamc python3 timeout "$@"; do
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
}

# ---------------------------------------------------------------- temp dir, cleanup
NPASS=0; NFAIL=0
PIDS=()        # processes this script started (servers, rspamd, relays)
CHILD_PIDS=()  # their direct children seen after start-up (rspamd workers)
SERVER_NAMES=()  # started server instances (checked by check_alive)
TRACE_NAMES=()   # relay logs printed by finish with --trace

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
on_signal() {  # keep the "N passed, M failed" last line even when interrupted
    trap - INT TERM
    NFAIL=$((NFAIL + 1)); echo "FAIL interrupted: got SIG$1 before the end of the run"
    echo "$NPASS passed, $NFAIL failed"
    exit "$2"
}

remember_children() {   # record the direct children of a started process
    local c
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do CHILD_PIDS+=("$c"); done
}

lib_setup() {  # temp-dir-prefix
    TMP="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")" || die "mktemp failed"
    trap cleanup EXIT
    trap 'on_signal INT 130' INT
    trap 'on_signal TERM 143' TERM
    lib_write_py
    mkdir -p "$TMP/mail" "$TMP/rspamd/db" "$TMP/rspamd/run"
    printf 'com\norg\nnet\n' >"$TMP/tld.dat"   # tiny TLD list: the stock one takes ~16 s to compile
    ROOT_OPTS=()
    [ "$(id -u)" = 0 ] && ROOT_OPTS=(-u root -g root)   # rspamd refuses to run workers as root otherwise
    return 0
}

# ---------------------------------------------------------------- python helper
lib_write_py() {
PY="$TMP/fz.py"
cat >"$PY" <<'PYEOF'
import hashlib, json, math, os, random, re, select, socket, struct, sys, time

def u(s): return struct.unpack('<iIIf', s[:16])

def request(cmd, flag=0, value=0, digest=None, tag=None):
    tag = random.getrandbits(32) if tag is None else tag
    digest = os.urandom(64) if digest is None else digest
    return struct.pack('<BBBBiI', 4, cmd, 0, flag, value, tag) + digest, tag

def exchange(port, data, timeout, src='127.0.0.1', resend=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    try:
        deadline = time.time() + timeout
        sent = False
        while time.time() < deadline:
            if resend or not sent:
                s.sendto(data, ('127.0.0.1', port)); sent = True
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

def rawtcp(port, cmd, flag, value):
    """Like raw, over TCP as rspamd 3.14+ clients talk: a frame (LE u16 length, then the
    request), a frame back."""
    data, tag = request(int(cmd), int(flag), int(value))
    try:
        s = socket.create_connection(('127.0.0.1', int(port)), timeout=3.0)
    except OSError as e:
        print('len=0 no connection (%s)' % e); return 1
    try:
        s.sendall(struct.pack('<H', len(data)) + data)
        buf = b''
        while len(buf) < 2 or len(buf) < 2 + struct.unpack('<H', buf[:2])[0]:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except OSError:
        buf = b''
    finally:
        s.close()
    if len(buf) < 2:
        print('len=0 no reply'); return 1
    rep = buf[2:2 + struct.unpack('<H', buf[:2])[0]]
    if len(rep) < 16:
        print('len=%d short' % len(rep)); return 1
    v, f, t, p = u(rep)
    print('len=%d value=%d flag=%d tag_ok=%d prob=%g' % (len(rep), v, f, t == tag, p))
    return 0

def badmac(port, keyid_hex, wait):
    """One datagram with an encryption header for key id KEYID (8 bytes hex), a random client
    key, nonce and MAC and an 80-byte random 'ciphertext' (a CHECK without shingles is 76):
    it cannot pass the MAC check. Sent once; prints 'no reply' or the reply length."""
    data = b'rsfe' + bytes.fromhex(keyid_hex)[:8] + os.urandom(32 + 24 + 16) + os.urandom(80)
    rep = exchange(int(port), data, float(wait), resend=False)
    print('no reply' if rep is None else 'reply len=%d' % len(rep))
    return 0

B32 = 'ybndrfg8ejkmcpqxot1uwisza345h769'

def b32enc(b):
    out, acc, n = [], 0, 0
    for x in b:
        acc |= x << n; n += 8
        while n >= 5:
            out.append(B32[acc & 31]); acc >>= 5; n -= 5
    if n:
        out.append(B32[acc & 31])
    return ''.join(out)

def b32dec(s):
    out, acc, n = bytearray(), 0, 0
    for c in s:
        i = B32.find(c)
        if i < 0:
            raise ValueError('character %r is not rspamd base32' % c)
        acc |= i << n; n += 5
        if n >= 8:
            out.append(acc & 255); acc >>= 8; n -= 8
    return bytes(out)

def keyfield(text, name):
    m = re.search(r'\b%s\s*=\s*"([^"]*)"' % name, text)
    return m.group(1) if m else None

def kpinfo(path):
    """Keypair text as `rspamadm keypair -u` prints it -> 'PUBKEY KEYID_HEX ID_STATUS' where
    PUBKEY is the encoded pubkey string, KEYID_HEX the first 8 bytes of the raw public key and
    ID_STATUS 'id_ok' (id = base32(BLAKE2b-512(pubkey))), 'no_id' or 'id_mismatch'."""
    with open(path) as fh:
        text = fh.read()
    if not re.search(r'^\s*keypair\s*\{', text, re.M):
        print('ERROR no "keypair {" block'); return 1
    enc = keyfield(text, 'encoding') or 'base32'
    pub, priv = keyfield(text, 'pubkey'), keyfield(text, 'privkey')
    if not pub or not priv:
        print('ERROR pubkey or privkey missing'); return 1
    try:
        raw_pub = bytes.fromhex(pub) if enc == 'hex' else b32dec(pub)
        raw_priv = bytes.fromhex(priv) if enc == 'hex' else b32dec(priv)
    except ValueError as e:
        print('ERROR %s' % e); return 1
    if len(raw_pub) != 32 or len(raw_priv) != 32:
        print('ERROR key lengths %d/%d, not 32' % (len(raw_pub), len(raw_priv))); return 1
    kid = keyfield(text, 'id')
    st = 'no_id' if kid is None else (
        'id_ok' if kid == b32enc(hashlib.blake2b(raw_pub, digest_size=64).digest()) else 'id_mismatch')
    print('%s %s %s' % (pub, raw_pub[:8].hex(), st))
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
        text = fh.read().decode('utf-8', 'replace')
    # rspamc 4.x prints bare `nan` in its timing arrays, which is not JSON
    text = re.sub(r'(?<=[\[,:\s])-?nan(?=[\s,\]}])', 'NaN', text)
    return json.loads(text)

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

def jsonget(path, key):
    """top-level KEY of the JSON object in PATH, or 'missing'"""
    try:
        print(load(path)[key])
    except Exception:
        print('missing')
    return 0

def score(weight, value, prob, max_score=100.0):
    """rspamd 3.4 fuzzy score: weight * tanh(e * value / max_score) * sqrt(prob)"""
    print('%.4f' % (float(weight) * math.tanh(math.e * float(value) / float(max_score)) * math.sqrt(float(prob))))
    return 0

def client_at_least(want):
    have = [int(x) for x in (os.environ.get('RSPAMD_CLIENT_VERSION') or '0').split('.') if x.isdigit()]
    return have >= [int(x) for x in want.split('.')]

def scoreok(score_, weight, value, prob, tol='0.011'):
    """Does SCORE fit stored VALUE at the (2-decimal) option PROB? Compares the prob implied by
    the score with PROB. A client up to 4.1.2 scores weight * tanh(e * value / 100) * sqrt(prob);
    from 4.1.3 it scales by (prob - 0.5) / 0.5 instead (its rule's prob_bias and prob_power at
    their defaults)."""
    f = float(weight) * math.tanh(math.e * float(value) / 100.0)
    if client_at_least('4.1.3'):
        implied = 0.5 + 0.5 * float(score_) / f
    else:
        implied = (float(score_) / f) ** 2
    return 0 if abs(implied - float(prob)) <= float(tol) else 1

def fcmp(a, op, b, tol='0.01'):
    a, b, tol = float(a), float(b), float(tol)
    r = {'lt': a < b, 'gt': a > b, 'eq': abs(a - b) <= tol, 'le': a <= b, 'ge': a >= b}[op]
    return 0 if r else 1

CMDS = {0: 'CHECK', 1: 'WRITE', 2: 'DEL', 3: 'STAT', 4: 'PING'}

def decode_req(b):
    if len(b) >= 4 and b[:4] == b'rsfe':
        return 'encrypted %d bytes keyid=%s' % (len(b), b[4:12].hex())
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

def decode_rep(b, enc=False):
    if enc:   # reply to an encrypted request: nonce (24) | MAC (16) | ciphertext
        return 'encrypted %d bytes nonce=%s' % (len(b), b[:6].hex())
    if len(b) < 16:
        return 'short %d bytes' % len(b)
    v, f, t, p = u(b)
    s = '%d bytes value=%d flag=%d tag=%08x prob=%g' % (len(b), v, f, t, p)
    if len(b) >= 84:
        s += ' digest=%s ts=%d' % (b[16:24].hex(), struct.unpack('<I', b[80:84])[0])
    return s

class TcpPipe:
    """One relayed TCP connection (rspamd 3.14+ framing): bytes pass through as they come;
    each whole frame is logged (and captured) once it has passed."""
    def __init__(self, client, tport):
        self.client = client
        self.up = socket.create_connection(('127.0.0.1', int(tport)))
        self.buf = {client.fileno(): b'', self.up.fileno(): b''}

    def pump(self, s, out, cap, t0):
        data = s.recv(65536)
        if not data:
            return False
        to_server = s is self.client
        (self.up if to_server else self.client).sendall(data)
        b = self.buf[s.fileno()] + data
        while len(b) >= 2 and len(b) >= 2 + struct.unpack('<H', b[:2])[0]:
            n = struct.unpack('<H', b[:2])[0]
            frame, b = b[2:2 + n], b[2 + n:]
            out.write('%7.3f tcp %s %s\n' % (time.time() - t0, '->' if to_server else '<-',
                                             decode_req(frame) if to_server else decode_rep(frame, False)))
            if cap:
                cap.write('%s %s tcp\n' % ('request' if to_server else 'reply', frame.hex()))
        self.buf[s.fileno()] = b
        return True

def relay(lport, tport, log):
    """Relay 127.0.0.1:lport -> 127.0.0.1:tport that logs every datagram, and every frame of
    the TCP connections made to the same port."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lsock.bind(('127.0.0.1', int(lport)))
    tsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tsock.bind(('127.0.0.1', int(lport)))
    tsock.listen(16)
    pipes = {}  # fd -> TcpPipe, both ends
    ups = {}   # client addr -> upstream socket
    back = {}  # upstream fd -> client addr
    last_enc = {}  # client addr -> was its last request encrypted
    out = open(log, 'a', buffering=1)
    # CAPTURE_DIR (a manual run): every datagram both ways, in hex, for vector files
    cap = None
    if os.environ.get('CAPTURE_DIR'):
        cap = open(os.path.join(os.environ['CAPTURE_DIR'], os.path.basename(log) + '.hex'), 'a', buffering=1)
    t0 = time.time()
    while True:
        socks = {p.client.fileno(): p.client for p in pipes.values()}
        socks.update({p.up.fileno(): p.up for p in pipes.values()})
        r, _, _ = select.select([lsock, tsock] + list(ups.values()) + list(socks.values()), [], [], 1.0)
        for s in r:
            if s is tsock:
                c, _ = tsock.accept()
                try:
                    p = TcpPipe(c, tport)
                except OSError as e:
                    out.write('        tcp upstream error %s\n' % e); c.close(); continue
                pipes[c.fileno()] = p; pipes[p.up.fileno()] = p
                continue
            if s.fileno() in pipes:
                p = pipes[s.fileno()]
                try:
                    alive = p.pump(s, out, cap, t0)
                except OSError:
                    alive = False
                if not alive:
                    for end in (p.client, p.up):
                        pipes.pop(end.fileno(), None); end.close()
                continue
            if s is lsock:
                data, addr = lsock.recvfrom(4096)
                up = ups.get(addr)
                if up is None:
                    up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    up.connect(('127.0.0.1', int(tport)))
                    ups[addr] = up; back[up.fileno()] = addr
                last_enc[addr] = data[:4] == b'rsfe'
                out.write('%7.3f %s:%d -> %s\n' % (time.time() - t0, addr[0], addr[1], decode_req(data)))
                if cap:
                    cap.write('request %s\n' % data.hex())
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
                out.write('%7.3f %s:%d <- %s\n' % (time.time() - t0, addr[0], addr[1],
                                                   decode_rep(data, last_enc.get(addr, False))))
                if cap:
                    cap.write('reply %s\n' % data.hex())
                lsock.sendto(data, addr)

def traceck(log, want, keyid=''):
    """Relay log -> one summary line; exit 0 if every request and reply fits WANT:
    'enc': requests start with 'rsfe' (and carry KEYID if given), replies are 56/136/184 bytes;
    'plain': no request starts with 'rsfe', replies are 16/96/144 bytes. Needs >= 1 of each."""
    try:
        lines = open(log).read().splitlines()
    except OSError:
        lines = []
    req = [l for l in lines if ' -> ' in l]
    rep = [l for l in lines if ' <- ' in l]
    enc = [l for l in req if ' -> encrypted ' in l]
    kids = sorted(set(re.findall(r'keyid=([0-9a-f]+)', ' '.join(enc))))
    rlen = sorted(set(int(m) for m in re.findall(r' <- (?:encrypted )?(\d+) bytes', '\n'.join(rep))))
    ok = len(req) > 0 and len(rep) > 0
    if want == 'enc':
        ok = ok and len(enc) == len(req) and set(rlen) <= {56, 136, 184}
        if keyid:
            ok = ok and kids == [keyid]
    else:
        ok = ok and not enc and set(rlen) <= {16, 96, 144}
    print('%d requests (%d start with rsfe, key ids %s), %d replies (lengths %s)' %
          (len(req), len(enc), ','.join(kids) or '-', len(rep), ','.join(map(str, rlen)) or '-'))
    return 0 if ok else 1

if __name__ == '__main__':
    a = sys.argv[1:]
    f = {'probe': lambda: probe(a[1], a[2]),
         'raw': lambda: raw(*a[1:5]), 'rawtcp': lambda: rawtcp(*a[1:5]), 'isbound': lambda: is_bound(a[1]),
         'syms': lambda: syms(a[1]), 'addres': lambda: addres(a[1]),
         'statres': lambda: statres(a[1], a[2]), 'score': lambda: score(*a[1:]),
         'cmp': lambda: fcmp(*a[1:]), 'scoreok': lambda: scoreok(*a[1:]), 'relay': lambda: relay(a[1], a[2], a[3]),
         'badmac': lambda: badmac(a[1], a[2], a[3]), 'kpinfo': lambda: kpinfo(a[1]),
         'jsonget': lambda: jsonget(a[1], a[2]), 'traceck': lambda: traceck(*a[1:4])}[a[0]]
    sys.exit(f() or 0)
PYEOF
}
py() { "$PYTHON" -S "$PY" "$@"; }
free_ports() { "$PYTHON" -S "$SCRIPT_DIR/free_ports.py" "$1"; }  # N private loopback ports

# ---------------------------------------------------------------- results
pass() { NPASS=$((NPASS + 1)); echo "PASS $1${2:+ ($2)}"; }
# a documented difference of rspamd's own sqlite storage, accepted only in --rspamd-fuzzy mode
deviation() { NPASS=$((NPASS + 1)); echo "PASS $1 (known rspamd 3.4 sqlite deviation: $2)"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $1: $2"; }
info() { echo "     $*"; }
indent() { sed 's/^/       | /'; }

# ---------------------------------------------------------------- test mails
mail_header() {  # from to subject msgid
    printf 'From: %s\nTo: %s\nSubject: %s\nDate: Tue, 03 Nov 2026 09:00:00 +0000\nMessage-ID: <%s>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 7bit\n\n' "$@"
}

# msg1/msg2/msg3 from the spec vectors (msg2 = msg1 with 3 words changed, msg3 = short text);
# generated: msg4 (long German text), msg5 (msg4 with 3 words changed), msg6 (long, unrelated).
lib_make_mails() {
cp "$MAILS/msg1.eml" "$MAILS/msg2.eml" "$MAILS/msg3.eml" "$TMP/mail/"
# msg4: long German text. It shares no word with msg1, but its "Kinder" stems to "kind" like
# msg2's "Kind regards", so exactly one of msg2's shingles points at msg4: when both are stored
# on one server, msg2's vote is split 30 (msg1) : 1 (msg4).
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
}

# ---------------------------------------------------------------- servers
# RSPAMD_FUZZY_BACKEND (UCL lines) replaces the worker's sqlite backend, e.g.
# with backend = "redis" and its servers.
write_rspamd_fuzzy_conf() {  # dir port allow [extra-ucl for the worker block]
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
${RSPAMD_FUZZY_BACKEND:-  backend = "sqlite";
  hash_file = "$1/fuzzy.db";}
  sync = ${SYNC}s;
  expire = 90d;
  allow_update = ["$3"];
${4:-}
}
EOF
}

write_shingled_conf() {  # dir port allow [extra-ucl]
    cat >"$1/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$2";
counters_bind_socket = [];
ratelimit_bind_socket = [];
allow_update = ["$3"];
workers = 2;
control_socket = "$1/ctl.sock";
hashfile = "$1/db";
${4:-}$SHINGLED_CONF_EXTRA
EOF
}

start_server() {  # name port allow [extra-ucl: shingled config / rspamd fuzzy worker block]
    local name=$1 port=$2 allow=$3 extra=${4:-} dir="$TMP/srv-$1" cmd pid
    mkdir -p "$dir"
    case "$MODE" in
        rspamd)
            write_rspamd_fuzzy_conf "$dir" "$port" "$allow" "$extra"
            rspamd -f "${ROOT_OPTS[@]}" -c "$dir/rspamd-fuzzy.conf" --var DBDIR="$dir" \
                --var RUNDIR="$dir" --var LOGDIR="$dir" >"$dir/stdout.log" 2>&1 &
            ;;
        shingled)
            write_shingled_conf "$dir" "$port" "$allow" "${extra:+$extra
}"
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
    SERVER_NAMES+=("$name")
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

start_relay() {  # listen target name   (log: TMP/trace-NAME.log)
    "$PYTHON" -S "$PY" relay "$1" "$2" "$TMP/trace-$3.log" >"$TMP/relay-$3.err" 2>&1 &
    PIDS+=("$!")
    TRACE_NAMES+=("$3")
}

finish() {
    local n
    if [ "$NFAIL" -gt 0 ] && [ -f "$TMP/rspamd/rspamd.log" ]; then
        echo "---- last fuzzy lines of the rspamd log ----"
        grep -i fuzzy "$TMP/rspamd/rspamd.log" | tail -n 25 | cut -c1-300
    fi
    if [ "$TRACE" = 1 ]; then
        for n in "${TRACE_NAMES[@]}"; do
            echo "---- trace of the '$n' server (relay log) ----"
            cat "$TMP/trace-$n.log" 2>/dev/null
        done
    fi
    echo "$NPASS passed, $NFAIL failed"
    [ "$NFAIL" = 0 ]
    exit $?
}

# ---------------------------------------------------------------- rspamd (client side)
rc() {  # outfile rspamc-args...   (bounded rspamc call)
    local out=$1; shift
    timeout -k 2 $((RT + 5)) rspamc -t "$RT" "$@" >"$out" 2>&1
}

# plain_fuzzy_rule NAME SERVERS "SYMBOL:FLAG ..." [EXTRA-UCL]: prints the
# fuzzy_check rule the tests share: it learns (read_only = false) and checks
# every MIME part of 64 bytes or more (short texts hashed directly), each
# symbol at max_score 100 for its flag; EXTRA-UCL goes in the rule as is.
plain_fuzzy_rule() {
    local name=$1 servers=$2 maps=$3 extra=${4:-} m
    echo "  rule \"$name\" {"
    echo "    servers = \"$servers\";"
    echo "    read_only = false;"
    [ -n "$extra" ] && echo "    $extra"
    echo "    max_score = 100.0;"
    echo "    mime_types = [\"*\"];"
    echo "    short_text_direct_hash = true;"
    echo "    min_length = 64;"
    echo "    fuzzy_map = {"
    for m in $maps; do echo "      ${m%%:*} { max_score = 100.0; flag = ${m#*:}; }"; done
    echo "    }"
    echo "  }"
}

# Writes TMP/rspamd/rspamd.conf (symbols group "fuzzy_test" = RSPAMD_SYMBOLS, the fuzzy_check
# rules = RSPAMD_RULES), starts rspamd, waits until the controller and the normal worker answer.
start_rspamd() {
    local t0 ready deadline
    R="$TMP/rspamd"
    {
        echo "# Self-contained rspamd 3.4 config: no /etc/rspamd includes, no Lua rules, no redis/DNS users."
        rspamd_conf_head "$R" fuzzy_check "$P_NORMAL"
        cat <<EOF
worker "controller" {
  bind_socket = "127.0.0.1:$P_CTRL";
  count = 1;
  secure_ip = "127.0.0.1";          # fuzzy_add/fuzzy_del without password
}
actions { reject = 1000; }
group "fuzzy_test" {
  max_score = 1000;
  symbols {
$RSPAMD_SYMBOLS
  }
}
fuzzy_check {
  min_bytes = 1k;
  timeout = $FUZZY_TIMEOUT;
  retransmits = 1;
$RSPAMD_RULES
}
EOF
    } >"$R/rspamd.conf"

    rspamd_launch "$R"
    RSPAMD_PID=$!

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
}

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
    for n in "${SERVER_NAMES[@]}"; do
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

# expect_stat CHECKNAME RULE N : `rspamc stat` shows N hashes for the rule (seen: STAT_GOT)
expect_stat() {
    local name=$1 rule=$2 want=$3 f="$TMP/stat-$1.json" got
    rc "$f" -h "127.0.0.1:$P_CTRL" --json stat
    got=$(py statres "$f" "$rule")
    STAT_GOT=$got
    if [ "$got" = "$want" ]; then
        pass "$name" "rspamc stat: fuzzy hashes in \"$rule\" = $got"
    elif [ "$MODE" = rspamd ] && [ "$want" = 0 ] && [ "$got" = missing ]; then
        # rspamd's storage answers an empty STAT with prob 0, which its client does not show
        deviation "$name" "rspamc stat shows no line for rule \"$rule\" (an empty storage)"
    else
        fail "$name" "rspamc stat: expected $want fuzzy hashes for rule \"$rule\", got $got"
    fi
}
