# Shared by the integration tests (source it after `set -uo pipefail`):
# the --build argument, PASS/FAIL lines and the tally scripts/test.sh reads
# ("N passed, M failed" as the last line, exit status 1 on any failure),
# and starting or killing a daemon the test owns.

# parse_build_arg "$@": sets `build` (default: build).
parse_build_arg() {
  build=build
  while [ $# -gt 0 ]; do
    case "$1" in
      --build) build=$2; shift 2 ;;
      *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
  done
}

# locate_tools: sets `shingled`, `ctl` and `probe` (the fuzzy_probe client)
# from `build`, as absolute paths (tests cd elsewhere).
locate_tools() {
  shingled=$(realpath "$build/src/daemon/shingled")
  ctl=$(realpath "$build/tools/shinglectl")
  probe=$(realpath "$build/tests/fuzzy_probe")
}

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
check() {  # check NAME COMMAND...: passes when the command succeeds
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name" "command failed: $*"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}

# start_daemon DIR: runs $shingled with DIR/shingled.conf (whose
# control_socket must be DIR/ctl.sock), logging to DIR/daemon.log; sets
# `pid` and returns once the control socket answers.
start_daemon() {
  "$shingled" --config "$1/shingled.conf" >>"$1/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    "$ctl" --socket "$1/ctl.sock" ping >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "daemon did not start; log:" >&2
  tail -20 "$1/daemon.log" >&2
  return 1
}
crash_daemon() {  # kill -9 the daemon of start_daemon
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  pid=""
}

# setup_tmp: a fresh `tmp` directory, removed at exit together with the
# daemon of start_daemon if it still runs.
setup_tmp() {
  tmp=$(mktemp -d)
  pid=""
  trap 'if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
}
