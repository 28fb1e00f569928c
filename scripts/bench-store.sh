#!/usr/bin/env bash
# Store micro-benchmarks (Google Benchmark): CHECK throughput on one core at
# 100k, 1M and 10M stored hashes, and table RAM per stored hash. Pinned to
# the last allowed CPU so a load generator or the rest of the machine can
# have the others. SHINGLED_BENCH_MAX caps the largest size (default 10M,
# which needs about 4 GiB of RAM and a minute or two to load).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build bench/fuzzy_check_bench >/dev/null
cpu=$(taskset -pc $$ | awk -F': ' '{print $2}' | tr ',' '\n' | tail -1 | awk -F- '{print $NF}')
exec taskset -c "$cpu" build/bench/fuzzy_check_bench --benchmark_counters_tabular=true "$@"
