#!/usr/bin/env bash
# Map files of the access controls, on the running daemon:
#  1. a `blocked` map edited while the daemon runs takes effect within 2 s
#     (PING from 127.0.0.1 answered, then silent once 127.0.0.1 is listed);
#  2. a broken edit (a line that is no address) changes nothing: the old
#     map stays, the log names the file and line, map_reload_failures
#     counts it; the fixed file is taken within 2 s;
#  3. SIGHUP re-reads every map file;
#  4. a skip_hashes map file refuses WRITEs of its digests (401);
#  5. at start, a bad map file stops the daemon with file, line and reason,
#     and an https:// map is refused at its config line.
# Usage: access_maps_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
udp="python3 $(realpath "$(dirname "$0")/fuzzy_udp.py")"

setup_tmp
port=$((20000 + RANDOM % 20000))
digest=$(python3 -c "import hashlib; print(hashlib.sha512(b'skip me').hexdigest())")
echo "# nothing blocked yet" >"$tmp/blocked.map"
printf '# digests never learned\n%s\n' "$digest" >"$tmp/skip.map"
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 2;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
blocked = ["192.0.2.1", "$tmp/blocked.map"];
skip_hashes = "file://$tmp/skip.map";
EOF

ping_answer() { $udp --to "127.0.0.1:$port" --cmd ping --timeout 0.3; }
replace() {  # replace FILE TEXT: written beside and renamed over, as a deploy would
  printf '%s' "$2" >"$1.new" && mv "$1.new" "$1"
}
# within_2s silent|answered: polls PING until it is so; prints the ms it took
within_2s() {
  local start now got
  start=$(date +%s%N)
  while :; do
    got=$(ping_answer)
    now=$(date +%s%N)
    if { [ "$1" = silent ] && [ "$got" = silent ]; } || { [ "$1" != silent ] && [ "$got" != silent ]; }; then
      echo $(((now - start) / 1000000))
      return 0
    fi
    [ $((now - start)) -gt 2000000000 ] && { echo "still '$got' after 2 s"; return 1; }
  done
}
failures() {
  "$ctl" --socket "$tmp/ctl.sock" stats --json |
    python3 -c "import json,sys; print(json.load(sys.stdin)['maps']['map_reload_failures'])"
}

if ! start_daemon "$tmp"; then fail start "daemon did not start"; finish; exit; fi
if [ "$(ping_answer)" != silent ]; then pass "1: PING answered while 127.0.0.1 is not blocked"
else fail 1 "no answer before the edit"; fi

replace "$tmp/blocked.map" $'# the edit\n127.0.0.0/8\n'
if ms=$(within_2s silent); then pass "1: the edited map blocks 127.0.0.1 after $ms ms (< 2 s)"; else fail 1 "$ms"; fi

replace "$tmp/blocked.map" $'10.0.0.1\nnot-an-address\n'
sleep 2
if [ "$(ping_answer)" = silent ] && [ "$(ping_answer)" = silent ]; then
  pass "2: a broken edit changes nothing (127.0.0.1 still blocked 2 s on)"
else
  fail 2 "the broken edit was taken"
fi
if grep -q "blocked.map: line 2: 'not-an-address'" "$tmp/daemon.log"; then
  pass "2: the log names the file and line"
else
  fail 2 "no log line: $(grep -i map "$tmp/daemon.log" | tail -3)"
fi
n=$(failures)
if [ "$n" = 1 ]; then pass "2: map_reload_failures = 1"; else fail 2 "map_reload_failures = $n"; fi
replace "$tmp/blocked.map" $'10.0.0.1\n'
if ms=$(within_2s answered); then pass "2: the fixed file is taken after $ms ms"; else fail 2 "$ms"; fi

before=$(grep -c "blocked.map reloaded" "$tmp/daemon.log")
kill -HUP "$pid"
for _ in $(seq 40); do
  [ "$(grep -c "blocked.map reloaded" "$tmp/daemon.log")" -gt "$before" ] && break
  sleep 0.05
done
if [ "$(grep -c "blocked.map reloaded" "$tmp/daemon.log")" -gt "$before" ] &&
   grep -q "skip.map reloaded" "$tmp/daemon.log"; then
  pass "3: SIGHUP re-reads every map file"
else
  fail 3 "no reload logged after SIGHUP"
fi

# A WRITE of the skipped digest (sha512 of the seed, as fuzzy_udp.py makes
# digests) and of another one.
out=$(python3 - "$port" <<'PY'
import hashlib, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect(("127.0.0.1", int(sys.argv[1])))
for seed, tag in ((b"skip me", 7), (b"learn me", 8)):
    s.send(struct.pack("<BBBBiI", 4, 1, 0, 1, 1, tag) + hashlib.sha512(seed).digest())
    print(struct.unpack_from("<i", s.recv(2048), 0)[0])
PY
)
if [ "$out" = $'401\n0' ]; then
  pass "4: a WRITE of a digest in the skip_hashes file gets 401, another is learned"
else
  fail 4 "replies: $(echo $out)"
fi
kill "$pid"
wait "$pid" 2>/dev/null
pid=""

# 5. Start-up refuses a bad map, with file, line and reason.
replace "$tmp/blocked.map" $'10.0.0.1\n10.0.0.300\n'
out=$("$shingled" --config "$tmp/shingled.conf" --check-config 2>&1)
if [ $? -ne 0 ] && grep -q "map $tmp/blocked.map: line 2: " <<<"$out"; then
  pass "5: a bad map file stops start-up: $(head -1 <<<"$out")"
else
  fail 5 "not refused: $out"
fi
printf 'bind_socket = "127.0.0.1:%d";\nblocked = "https://maps.example.com/blocked.map";\n' "$port" >"$tmp/url.conf"
out=$("$shingled" --config "$tmp/url.conf" --check-config 2>&1)
if [ $? -ne 0 ] && grep -q "url.conf:2: .*fetches nothing from the network" <<<"$out"; then
  pass "5: an HTTPS map is refused at its line"
else
  fail 5 "not refused: $out"
fi
finish
