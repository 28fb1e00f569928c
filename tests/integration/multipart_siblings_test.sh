#!/usr/bin/env bash
# Multipart mails over UDP against a two-worker shingled (issue 24): rspamd
# learns a text/plain + text/html mail as two digests whose shingles differ
# in one position, written back to back; a near-duplicate of the mail must
# then hit one of them with that digest's true count, whatever order the two
# digests' shingle index entries reached each index shard in. shingle-load
# --parts writes the parts back to back and its verifier accepts a hit on
# any part only with that part's count: every miss is "wrong".
#  (a) one client: 500 two-part mails, then 500 near-duplicate CHECKs
#      sharing 27 of 32 shingles with part 0 (26 with part 1): 0 wrong;
#  (b) four client sockets on two threads in parallel, 500 more mails;
#  (c) three-part mails with two positions replaced per part;
#  (d) the same answers after a restart (the index rebuilt from LMDB) and
#      after deleting every mail's parts (then: misses, none wrong).
# Usage: multipart_siblings_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
. "$(dirname "$0")/lib_shingle_load.sh"

port=$((20000 + RANDOM % 20000))
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 2;
max_hashes = 100k;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
EOF
stop_daemon() {
  kill -TERM "$pid" && wait "$pid" 2>/dev/null
  pid=""
}
start_daemon "$tmp" || fail "daemon starts" "see above"
server="127.0.0.1:$port"

# (a) one client.
run_load write 500 --server "$server" --parts 2
expect "(a) 500 two-part mails: all 1000 WRITEs acknowledged" "$json" \
  "d['acks'] == 1000 and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"
run_load check --server "$server" --stored 500 --parts 2 --mix near:1 --near-shared 27 --count 500 --inflight 8
expect "(a) 500 near-duplicates of two-part mails: 500 shingle hits, 0 wrong" "$json" \
  "d['shingle_hits'] == 500 and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"
[ "$rc" -eq 0 ] || cat "$tmp/load.err" | head -5

# (b) several clients in parallel.
run_load write 500 --first 1000 --server "$server" --parts 2 --threads 2 --sockets 2
expect "(b) 500 more mails from 4 sockets on 2 threads: all acknowledged" "$json" \
  "d['acks'] == 1000 and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"
run_load check --server "$server" --first 1000 --stored 500 --parts 2 --mix near:1 --near-shared 27 \
  --count 2000 --threads 2 --sockets 2
expect "(b) 2000 near-duplicates from 4 sockets: all shingle hits, 0 wrong" "$json" \
  "d['shingle_hits'] == 2000 and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"

# (c) three parts, two positions replaced in each of parts 1 and 2.
run_load write 300 --first 2000 --server "$server" --parts 3 --part-differs 2
expect "(c) 300 three-part mails: all 900 WRITEs acknowledged" "$json" \
  "d['acks'] == 900 and d['wrong'] == 0 and $rc == 0"
run_load check --server "$server" --first 2000 --stored 300 --parts 3 --part-differs 2 \
  --mix near:1,stored:1 --near-shared 24 --count 1000
expect "(c) exact checks of any part and near-duplicates: right, none missed" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['shingle_hits'] == d['sent_by_kind']['near'] and d['exact_hits'] == d['sent_by_kind']['stored'] and $rc == 0"

# (d) restart: the index is rebuilt from LMDB (both parts' shingles).
stop_daemon
start_daemon "$tmp" || fail "daemon restarts" "see above"
run_load check --server "$server" --first 1000 --stored 500 --parts 2 --mix near:1 --near-shared 27 --count 1000
expect "(d) after a restart: near-duplicates still all hit, 0 wrong" "$json" \
  "d['shingle_hits'] == 1000 and d['wrong'] == 0 and $rc == 0"
run_load delete 500 --first 1000 --server "$server" --parts 2
expect "(d) DEL of both parts of 500 mails acknowledged" "$json" "d['acks'] == 1000 and $rc == 0"
run_load check --server "$server" --first 1000 --stored 500 --parts 2 --mix near:1 --near-shared 27 --count 500
expect "(d) after the deletes every near-duplicate misses (shingle-load counts them wrong)" "$json" \
  "d['shingle_hits'] == 0 and d['misses'] == 0 and d['wrong'] == 500"
stop_daemon
finish
