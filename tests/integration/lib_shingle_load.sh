# Shared by the shingle-load integration tests (source it after
# lib_check.sh and parse_build_arg): the binaries, a temporary directory
# cleaned up with the daemon and responder they started, the JSON helpers,
# and starting/stopping bench/trivial_responder.
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
load=$(realpath "$build/tools/shingle-load")
responder=$(realpath "$build/bench/trivial_responder" 2>/dev/null || echo "$build/bench/trivial_responder")

tmp=$(mktemp -d)
pid=""
rpid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# field JSON EXPR: a Python expression over the object `d`.
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1" 2>/dev/null; }
# expect NAME JSON EXPR: passes when the expression is true.
expect() {
  if [ "$(field "$2" "$3")" = "True" ]; then pass "$1"; else fail "$1" "not ($3) in $2"; fi
}
# run_load ARGS...: runs shingle-load --json; sets `json` (its last line) and
# `rc` (its exit status); its standard error goes to $tmp/load.err.
rc=0
json="{}"
run_load() {
  local out
  out=$("$load" --json --show-wrong 2 "$@" 2>"$tmp/load.err")
  rc=$?
  json=$(echo "$out" | tail -1)
  [ -n "$json" ] || json="{}"
}

# start_responder ARGS...: bench/trivial_responder on a random port (`port`),
# pid in `rpid`; stop_responder sets `responder_json` from its last line.
start_responder() {
  port=$((20000 + RANDOM % 20000))
  "$responder" --bind "127.0.0.1:$port" "$@" >"$tmp/responder.json" 2>"$tmp/responder.err" &
  rpid=$!
  for _ in $(seq 100); do
    [ -n "$(ss -Huln "sport = :$port" 2>/dev/null)" ] && return 0
    sleep 0.02
  done
  sleep 0.2
}
stop_responder() {
  kill -TERM "$rpid" && wait "$rpid" 2>/dev/null
  rpid=""
  responder_json=$(tail -1 "$tmp/responder.json")
}

# usage NAME ARGS...: passes when shingle-load exits 2 with a message.
usage() {
  local name=$1
  shift
  "$load" "$@" >"$tmp/usage.out" 2>"$tmp/usage.err"
  local code=$?
  if [ $code -eq 2 ] && grep -q "shingle-load:" "$tmp/usage.err"; then
    pass "usage error exits 2: $name"
  else
    fail "usage error exits 2: $name" "exit $code, stderr: $(head -2 "$tmp/usage.err")"
  fi
}
