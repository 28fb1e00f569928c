#!/usr/bin/env bash
# Long fuzzing runs, outside CI: builds every libFuzzer target (clang,
# ASan + UBSan, as scripts/test.sh does for its short runs) and runs each in
# turn for SECONDS (default 600) on one CPU, starting from the saved corpus
# in tests/fuzz/corpus/<target>. The run works on a copy; afterwards the
# saved corpus is replaced by the smallest set of inputs that keeps all the
# coverage reached (libFuzzer's -merge=1), so the next run (and CI's short
# one) starts from it without the corpus growing run after run (commit it
# when it changed). A crash input is copied to
# tests/fuzz/crashes/<target>-<hash> and fails the run; keep it once fixed:
# scripts/test.sh replays every file there through its target.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 3600 fuzz_frame
#     env: CPU=1 (the CPU to pin to), BUILD=build-fuzz, JOBS=2
#
# Never stop a run with SIGSTOP (to free its CPU for a while): libFuzzer's
# -timeout is wall-clock, so the input under way when it resumes is reported
# as a timeout that is not one.
#
# Prints, per target, the executions, executions per second, CPU seconds used
# (less than SECONDS when the CPU was shared, e.g. run under `nice`), coverage
# (libFuzzer's `cov` and `ft`), corpus size and crashes, then a summary line;
# exit status 1 if any target crashed or did not run.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-600}
shift || true
CPU=${CPU:-1}
BUILD=${BUILD:-build-fuzz}
JOBS=${JOBS:-2}

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD" -Dbuildtype=debugoptimized -Dfuzzing=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false -Dbenchmarks=false \
    -Ddpdk=disabled >/dev/null || { echo "fuzz.sh: meson setup failed" >&2; exit 1; }
fi
ninja -C "$BUILD" -j "$JOBS" >/dev/null || { echo "fuzz.sh: build failed" >&2; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for t in "$BUILD"/tests/fuzz/fuzz_*; do [ -x "$t" ] && [ -f "$t" ] && targets+=("$(basename "$t")"); done
fi
# A target may be named with or without its fuzz_ prefix; a name that is no
# built target stops the run before any hour is spent on it.
for i in "${!targets[@]}"; do
  case "${targets[$i]}" in fuzz_*) ;; *) targets[$i]="fuzz_${targets[$i]}" ;; esac
  if [ ! -x "$BUILD/tests/fuzz/${targets[$i]}" ]; then
    echo "fuzz.sh: no fuzz target ${targets[$i]} in $BUILD/tests/fuzz" >&2
    exit 2
  fi
done
logs=$(mktemp -d /tmp/shingled-fuzz.XXXXXX)
mkdir -p tests/fuzz/crashes
crashed=0
printf '%-26s %12s %10s %7s %8s %8s %8s %7s\n' target executions exec/s cpu_s cov ft corpus crashes
for name in "${targets[@]}"; do
  bin="$BUILD/tests/fuzz/$name"
  corpus="tests/fuzz/corpus/${name#fuzz_}"
  mkdir -p "$corpus"
  work="$logs/$name-work"
  mkdir -p "$work"
  cp -r "$corpus"/. "$work"/
  log="$logs/$name.log"
  artifacts="$logs/$name-artifacts"
  mkdir -p "$artifacts"
  # CPU seconds as well as wall time: a run sharing its CPU (e.g. under
  # `nice`) reaches fewer executions in the same -max_total_time.
  TIMEFORMAT='%U %S'
  cpu_times=$( { time taskset -c "$CPU" "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" \
    >"$log" 2>&1; } 2>&1 )
  rc=$?
  cpu=$(awk '{ printf "%d", $1 + $2 }' <<<"$cpu_times")
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+')
  ft=$(grep -Eo 'ft: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+')
  # Minimise: the inputs of the saved corpus and of the run that together
  # keep every feature reached, into a fresh directory that replaces it.
  merged="$logs/$name-merged"
  mkdir -p "$merged"
  if taskset -c "$CPU" "$bin" -merge=1 "$merged" "$corpus" "$work" >"$logs/$name-merge.log" 2>&1; then
    rm -rf "$corpus" && mv "$merged" "$corpus"
  fi
  files=$(find "$corpus" -type f | wc -l)
  crashes=0
  for a in "$artifacts"/*; do
    [ -f "$a" ] || continue
    # A slow unit is an input that took long on a shared CPU, not a failure
    # (timeouts, crashes, leaks and out-of-memory are).
    case "$(basename "$a")" in slow-unit-*) continue ;; esac
    crashes=$((crashes + 1))
    cp "$a" "tests/fuzz/crashes/$name-$(sha1sum "$a" | cut -c1-12)"
  done
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without an artifact
  [ "$crashes" -gt 0 ] && crashed=$((crashed + 1))
  printf '%-26s %12s %10s %7s %8s %8s %8s %7s\n' "$name" "${execs:-?}" "${rate:-?}" "${cpu:-?}" \
    "${cov:-?}" "${ft:-?}" "$files" "$crashes"
done
echo "logs: $logs"
echo "${#targets[@]} targets, ${SECONDS_EACH}s each, $crashed with crashes"
[ "$crashed" -eq 0 ]
