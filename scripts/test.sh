#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test shingled has:
#   1. unit suites (release build)
#   2. the same suites under AddressSanitizer + UndefinedBehaviorSanitizer
#   3. the concurrency suites under ThreadSanitizer
#   4. integration: the daemon's command line and control socket, and real
#      rspamd adding, checking and deleting fuzzy hashes through shingled
#   5. each libFuzzer target for a bounded time: FUZZ_SECONDS each if set,
#      else a total of FUZZ_BUDGET seconds (default 140) shared evenly, at
#      least 20 s per target, so the suite stays bounded as decoders are added
# The last line is "N passed, M failed" summed over all of them; the exit
# code is non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

FUZZ_BUDGET=${FUZZ_BUDGET:-140}
export SHINGLED_VECTORS=${SHINGLED_VECTORS:-$root/../shared/spec/vectors}
jobs=$(nproc)

passed=0
failed=0
failures=()
log_dir=$(mktemp -d /tmp/shingled-test.XXXXXX)

section() { printf '\n=== %s ===\n' "$*"; }
record() {  # record NAME PASSED FAILED
  passed=$((passed + $2))
  failed=$((failed + $3))
  if [ "$3" -gt 0 ]; then failures+=("$1 ($3 failed)"); fi
  printf '%-44s %4d passed, %d failed\n' "$1" "$2" "$3"
}

# Runs a GoogleTest binary and records its counts. A crash or a binary that
# runs no test counts as one failure: it must never look like success.
run_gtest() {  # run_gtest LABEL BINARY [ARGS...]
  local label=$1 bin=$2
  shift 2
  local out="$log_dir/$(echo "$label" | tr ' /' '__').log"
  if [ ! -x "$bin" ]; then
    echo "missing test binary $bin" >"$out"
    record "$label" 0 1
    return
  fi
  timeout 900 "$bin" "$@" >"$out" 2>&1
  local rc=$?
  local p f
  p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$out" | grep -Eo '[0-9]+$' || echo 0)
  f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$out" | grep -Eo '[0-9]+' | head -1 || echo 0)
  p=${p:-0}
  f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -gt 0 ]; then
    grep -E 'Failure|FAILED|ERROR|Sanitizer|runtime error|WARNING: ThreadSanitizer' "$out" | head -40
    echo "(full log: $out)"
  fi
  record "$label" "$p" "$f"
}

# build DIR [MESON OPTIONS...]: sets up DIR once and builds the targets in
# `build_targets` (every target when empty: the sanitizer builds name only
# the suites they run, a full sanitizer build costs minutes).
build_targets=()
build() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$log_dir/setup-$(basename "$dir").log" 2>&1 || {
      tail -30 "$log_dir/setup-$(basename "$dir").log"
      return 1
    }
  fi
  ninja -C "$dir" -j "$jobs" "${build_targets[@]}" >"$log_dir/build-$(basename "$dir").log" 2>&1 || {
    grep -E 'error|FAILED' "$log_dir/build-$(basename "$dir").log" | head -40
    return 1
  }
}

section "dependencies"
scripts/install-deps.sh || { record "install-deps" 0 1; echo "$passed passed, $failed failed"; exit 1; }

unit_suites=(common_test config_test wire_test store_test io_test engine_test persist_test concurrency_test shingle_load_test)

section "unit tests (release build)"
# The release build carries the DPDK backend (tests/integration/dpdk_veth_test.sh
# runs it); the sanitizer and fuzz builds test the pure layers without it.
if build build -Dbuildtype=release -Ddpdk=enabled; then
  for s in "${unit_suites[@]}"; do run_gtest "unit: $s" "build/tests/$s"; done
else
  record "release build" 0 1
fi

section "unit tests under ASan + UBSan"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
build_targets=()
for s in "${unit_suites[@]}"; do build_targets+=("tests/$s"); done
if build build-asan -Doptimization=1 -Ddebug=true -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=false -Ddpdk=disabled; then
  for s in "${unit_suites[@]}"; do run_gtest "asan+ubsan: $s" "build-asan/tests/$s"; done
else
  record "asan build" 0 1
fi

section "concurrency tests under ThreadSanitizer"
# tests/tsan.supp: liblmdb's own publication of commits, which TSan cannot see.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}
build_targets=(tests/concurrency_test tests/engine_test tests/persist_test)
if build build-tsan -Doptimization=1 -Ddebug=true -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=false -Ddpdk=disabled; then
  run_gtest "tsan: concurrency_test" build-tsan/tests/concurrency_test
  run_gtest "tsan: engine_test (rings, two workers over UDP)" build-tsan/tests/engine_test
  run_gtest "tsan: persist_test (feeds, persister threads, parallel load)" build-tsan/tests/persist_test
else
  record "tsan build" 0 1
fi

build_targets=()
section "integration"
for t in tests/integration/*_test.sh; do
  out="$log_dir/$(basename "$t").log"
  timeout 600 bash "$t" --build build >"$out" 2>&1
  rc=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
  p=$(echo "$line" | awk '{print $1}')
  f=$(echo "$line" | awk '{print $3}')
  p=${p:-0}
  f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  [ "$f" -gt 0 ] && { grep -E '^FAIL' "$out" | head -20; echo "(full log: $out)"; }
  record "integration: $(basename "$t" .sh)" "$p" "$f"
done

section "fuzzing"
if CC=clang CXX=clang++ build build-fuzz -Dbuildtype=debugoptimized -Dfuzzing=true \
     -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false -Dbenchmarks=false -Ddpdk=disabled; then
  targets=0
  for target in build-fuzz/tests/fuzz/fuzz_*; do [ -f "$target" ] && [ -x "$target" ] && targets=$((targets + 1)); done
  if [ -z "${FUZZ_SECONDS:-}" ]; then
    FUZZ_SECONDS=$((FUZZ_BUDGET / (targets > 0 ? targets : 1)))
    [ "$FUZZ_SECONDS" -lt 20 ] && FUZZ_SECONDS=20
  fi
  echo "$targets targets, ${FUZZ_SECONDS}s each"
  for target in build-fuzz/tests/fuzz/fuzz_*; do
    [ -f "$target" ] && [ -x "$target" ] || continue
    name=$(basename "$target")
    corpus_seed="tests/fuzz/corpus/${name#fuzz_}"
    work="$log_dir/corpus-$name"
    mkdir -p "$work"
    [ -d "$corpus_seed" ] && cp -r "$corpus_seed"/. "$work"/
    if timeout $((FUZZ_SECONDS + 120)) "$target" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
         -rss_limit_mb=4096 -artifact_prefix="$log_dir/$name-" "$work" >"$log_dir/$name.log" 2>&1; then
      record "fuzz: $name" 1 0
    else
      tail -30 "$log_dir/$name.log"
      record "fuzz: $name" 0 1
    fi
    # Inputs that once crashed a target (scripts/fuzz.sh keeps them): each
    # must now run through it cleanly.
    for crash in tests/fuzz/crashes/"$name"-*; do
      [ -f "$crash" ] || continue
      if timeout 60 "$target" "$crash" >"$log_dir/$name-replay.log" 2>&1; then
        record "fuzz replay: $(basename "$crash")" 1 0
      else
        tail -20 "$log_dir/$name-replay.log"
        record "fuzz replay: $(basename "$crash")" 0 1
      fi
    done
  done
else
  record "fuzz build" 0 1
fi

section "summary"
for f in "${failures[@]:-}"; do [ -n "$f" ] && echo "FAILED: $f"; done
echo "logs: $log_dir"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
