#!/usr/bin/env bash
# The fuzzy tables in reserved huge pages (`huge_pages`), as an operator
# would run them: with 2 MiB hugetlb pages reserved for the test, the daemon
# maps its tables from that pool (the pool's free count drops by the tables'
# size, and the mapping's page size is 2 MiB), stores, finds exact and near
# duplicates, syncs and loads them again after a restart. With too few
# pages for `huge_pages = 1g` it stops at start and says how many it needs
# and how to reserve them; a bad word is refused with file and line.
# Needs root (it reserves pages in the 2 MiB pool and gives them back).
# Usage: huge_pages_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
locate_tools

pool=/sys/kernel/mm/hugepages/hugepages-2048kB
pool_1g=/sys/kernel/mm/hugepages/hugepages-1048576kB
if [ "$(id -u)" != 0 ] || [ ! -w "$pool/nr_hugepages" ]; then
  fail "root with a writable 2 MiB hugetlb pool" "uid $(id -u), $pool/nr_hugepages not writable"
  finish
  exit 1
fi

tmp=$(mktemp -d)
pid=""
reserved_before=$(cat "$pool/nr_hugepages")
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  echo "$reserved_before" >"$pool/nr_hugepages"
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
write_conf() {  # write_conf PAGES MAX_HASHES
  cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 1;
max_hashes = $2;
huge_pages = $1;
hashfile = "$tmp/db";
sync = 1h;
control_socket = "$tmp/ctl.sock";
EOF
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$2'])" "$1"; }
expect() {  # expect NAME JSON KEY VALUE
  local got
  got=$(field "$2" "$3")
  if [ "$got" = "$4" ]; then pass "$1"; else fail "$1" "$3 = $got, expected $4 ($2)"; fi
}

# --- a bad word names the file and line ---------------------------------------
write_conf 3m 100k
out=$("$shingled" --check-config --config "$tmp/shingled.conf" 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "shingled.conf:6: huge_pages: '3m' is not" <<<"$out"; then
  pass "huge_pages = 3m refused with file and line"
else
  fail "huge_pages = 3m refused with file and line" "rc=$rc: $out"
fi

# --- 2 MiB pages: the tables come from the pool ---------------------------------
# 100k hashes: ~44 MiB of tables. Reserve 64 pages (128 MiB) more than the
# pool had; the daemon must take exactly the pages of the mapping it logs.
echo $((reserved_before + 64)) >"$pool/nr_hugepages"
reserved=$(cat "$pool/nr_hugepages")
if [ "$reserved" -lt $((reserved_before + 64)) ]; then
  fail "64 pages of 2 MiB reserved" "the kernel gave $reserved (had $reserved_before)"
  finish
  exit 1
fi
free_before=$(cat "$pool/free_hugepages")
write_conf 2m 100k
start_daemon "$tmp" || { fail "daemon starts with huge_pages = 2m" "$(tail -5 "$tmp/daemon.log")"; finish; exit 1; }
pass "daemon starts with huge_pages = 2m"
free_after=$(cat "$pool/free_hugepages")
taken=$((free_before - free_after))
mapped_mib=$(sed -n 's/.*fuzzy tables: \([0-9]*\) MiB in 2m pages.*/\1/p' "$tmp/daemon.log" | tail -1)
if [ -n "$mapped_mib" ] && [ "$mapped_mib" -ge 40 ] && [ "$taken" = $((mapped_mib / 2)) ]; then
  pass "the tables took $taken pages of 2 MiB from the pool, the $mapped_mib MiB mapping logged"
else
  fail "the tables took the logged mapping's pages from the pool" \
    "free $free_before -> $free_after, logged '${mapped_mib:-nothing}' MiB"
fi
if awk '/^Size:/ {size=$2} /^KernelPageSize:/ && $2 == 2048 && size >= 40000 {found=1} END {exit !found}' \
  "/proc/$pid/smaps"; then
  pass "a mapping of at least 40 MiB in 2 MiB kernel pages"
else
  fail "a mapping of at least 40 MiB in 2 MiB kernel pages" "none in /proc/$pid/smaps"
fi

out=$("$probe" write --port "$port" --from 0 --count 20000 --flag 3 --value 11)
expect "20,000 writes acknowledged" "$out" answered 20000
out=$("$probe" check --port "$port" --from 0 --count 20000 --flag 3 --value 11)
expect "every one hits exactly" "$out" hits 20000
out=$("$probe" check --port "$port" --from 0 --count 2000 --flag 3 --value 11 --near 20)
expect "near-duplicates (20 of 32 shingles) hit" "$out" hits 2000
out=$("$probe" check --port "$port" --from 50000 --count 2000)
expect "unknown digests miss" "$out" hits 0

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
check "SIGTERM stops it cleanly (exit 0)" test "$rc" = 0
check "its pages went back to the pool" test "$(cat "$pool/free_hugepages")" = "$free_before"
start_daemon "$tmp" || { fail "restarts with huge_pages = 2m" "$(tail -5 "$tmp/daemon.log")"; finish; exit 1; }
out=$("$probe" check --port "$port" --from 0 --count 20000 --flag 3 --value 11)
expect "after a restart every write is loaded into the reserved pages" "$out" hits 20000
out=$("$probe" check --port "$port" --from 0 --count 2000 --flag 3 --value 11 --near 20)
expect "and near-duplicates hit through the rebuilt index" "$out" hits 2000
kill -TERM "$pid"
wait "$pid"
pid=""

# --- too few 1 GiB pages: a clear refusal at start ------------------------------
# 40M hashes need ~16 GiB of tables: more 1 GiB pages than are free here.
free_1g=$( [ -r "$pool_1g/free_hugepages" ] && cat "$pool_1g/free_hugepages" || echo 0)
write_conf 1g 40m
out=$(timeout 60 "$shingled" --config "$tmp/shingled.conf" 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "huge_pages = 1g: cannot map" <<<"$out" &&
  grep -Eq "pages of 1 GiB|no pool of that page size" <<<"$out"; then
  pass "too few 1 GiB pages ($free_1g free) stop the start with the pages needed"
else
  fail "too few 1 GiB pages stop the start with the pages needed" "rc=$rc: $out"
fi
if [ -r "$pool_1g/free_hugepages" ]; then
  check "and say how to reserve them" grep -q "hugepagesz=1G" <<<"$out"
fi
finish
