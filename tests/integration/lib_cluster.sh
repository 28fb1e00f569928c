# Shared by the cluster tests (source after lib_check.sh and parse_build_arg):
# a three-server NATS JetStream cluster and shingled nodes on private
# loopback ports, in a temp dir the EXIT trap removes with every process.
#
#   cluster_init NODES...   ports for three NATS servers and each named node;
#                           sets tmp, servers, udp_port[NAME]
#   start_nats I            starts (or restarts, on its data) NATS server nI
#   stop_nats I             kill -9 of nI
#   nats_ready              waits until a stream of its own gets a leader
#   start_node NAME [MAX_HASHES] [EXTRA_CONF]   a node with 2 workers (expire
#                           $NODE_EXPIRE, default 90s; snapshot_period
#                           $NODE_SNAPSHOT_PERIOD, default 0: the tests take
#                           the snapshots they want; with NODE_COUNTERS=1 the
#                           counter service on counter_port[NAME], with
#                           NODE_RATELIMIT=1 the rate-limit service on
#                           rl_port[NAME]); waits for its socket
#   applied NAME / until_applied NAME COUNT     stream records the node applied
#   expect_right TEST NODE FIRST STORED COUNT   shingle-load's CHECK verifier
#   verdict JSON            "wrong lost answered" of a shingle-load report
#   cluster_figure NAME KEY one figure of the node's stats "cluster" section
#   caught_up NAME N        the node applied the stream to its end (>= N)
#   same_dumps NODE...      synced dumps identical; prints the record count
# KEEP_TMP=1 keeps the temp dir (logs, databases) for a look after a failure.
# For a test in network namespaces: NATS_HOST (default 127.0.0.1) is the
# address the NATS servers listen on, CLUSTER_NETNS the namespace they and
# the nodes run in, and node_netns[NAME] a node's own (its clients run
# there too, on 127.0.0.1).

shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
load=$(realpath "$build/tools/shingle-load")
probe=$(realpath "$build/tests/cluster_log_probe")

declare -a nats_pid=("" "" "")
declare -A node_pid=()
declare -A udp_port=()
declare -A counter_port=()
declare -A rl_port=()
declare -A node_netns=()
NATS_HOST=${NATS_HOST:-127.0.0.1}
CLUSTER_NETNS=${CLUSTER_NETNS:-}
in_netns() {  # NS COMMAND...: the command in namespace NS ("" = this one)
  local ns=$1
  shift
  if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}
# netns_prefix NS: sets `pre` to the words that run a command in NS, for a
# process started in the background whose $! must be its own pid (`ip netns
# exec` execs it), not a subshell's.
netns_prefix() {
  pre=()
  [ -n "$1" ] && pre=(ip netns exec "$1")
  return 0
}
ns_of() { echo "${node_netns[$1]:-$CLUSTER_NETNS}"; }
cluster_cleanup() {
  for p in "${node_pid[@]}"; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  for p in "${nats_pid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}

cluster_init() {
  command -v nats-server >/dev/null || { echo "nats-server not found (scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
  tmp=$(mktemp -d)
  trap cluster_cleanup EXIT
  local names=("$@")
  read -r -a nats_ports <<<"$(python3 "$here/free_ports.py" $((6 + 3 * ${#names[@]})))"
  local h=$NATS_HOST
  routes="nats-route://$h:${nats_ports[3]},nats-route://$h:${nats_ports[4]},nats-route://$h:${nats_ports[5]}"
  servers="nats://$h:${nats_ports[0]},nats://$h:${nats_ports[1]},nats://$h:${nats_ports[2]}"
  local k=6
  for n in "${names[@]}"; do
    udp_port[$n]=${nats_ports[$k]}
    counter_port[$n]=${nats_ports[$((k + ${#names[@]}))]}
    rl_port[$n]=${nats_ports[$((k + 2 * ${#names[@]}))]}
    k=$((k + 1))
  done
}

start_nats() {
  local i=$1
  mkdir -p "$tmp/n$i"
  netns_prefix "$CLUSTER_NETNS"
  "${pre[@]}" nats-server -n "n$i" -a "$NATS_HOST" -p "${nats_ports[$i]}" -js -sd "$tmp/n$i" \
    --cluster_name shingled-nodes --cluster "nats://$NATS_HOST:${nats_ports[$((i + 3))]}" --routes "$routes" \
    -l "$tmp/n$i.log" &
  nats_pid[$i]=$!
}
stop_nats() {
  kill -9 "${nats_pid[$1]}" 2>/dev/null && wait "${nats_pid[$1]}" 2>/dev/null
  nats_pid[$1]=""
}

json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2" 2>/dev/null; }
# nats_ready [STREAM]: the cluster is ready once a stream gets a leader;
# prints the probe's answer.
nats_ready() {
  local out
  for _ in $(seq 100); do
    out=$(in_netns "$CLUSTER_NETNS" "$probe" --servers "$servers" --stream "${1:-READY}" state 2>&1)
    [ -n "$(json_field "$out" leader)" ] && { echo "$out"; return 0; }
    sleep 0.2
  done
  echo "$out"
  return 1
}

start_node() {  # name [max_hashes] [extra config lines]
  local n=$1
  mkdir -p "$tmp/$n"
  cat >"$tmp/$n/shingled.conf" <<CONF
bind_socket = "127.0.0.1:${udp_port[$n]}";
counters_bind_socket = $([ -n "${NODE_COUNTERS:-}" ] && echo "\"127.0.0.1:${counter_port[$n]}\"" || echo "[]");
ratelimit_service_bind_socket = $([ -n "${NODE_RATELIMIT:-}" ] && echo "\"127.0.0.1:${rl_port[$n]}\"" || echo "[]");
max_hashes = ${2:-1000000};
expire = ${NODE_EXPIRE:-90s};
workers = 2;
hashfile = "$tmp/$n/db";
control_socket = "$tmp/$n/ctl.sock";
${3:-}
cluster {
  servers = "$servers";
  node = "$n";
  snapshot_period = ${NODE_SNAPSHOT_PERIOD:-0};
}
CONF
  netns_prefix "$(ns_of "$n")"
  "${pre[@]}" "$shingled" --config "$tmp/$n/shingled.conf" >>"$tmp/$n/daemon.log" 2>&1 &
  node_pid[$n]=$!
  for _ in $(seq 600); do
    "$ctl" --socket "$tmp/$n/ctl.sock" ping >/dev/null 2>&1 && return 0
    kill -0 "${node_pid[$n]}" 2>/dev/null || break
    sleep 0.05
  done
  tail -5 "$tmp/$n/daemon.log"
  return 1
}

node_stats() { "$ctl" --socket "$tmp/$1/ctl.sock" stats --json; }
applied() {  # name: updates the node applied from the stream, all workers
  node_stats "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"].get("cluster_applied", -1))'
}
# until_applied name count [seconds]: waits (10 s by default) for the node to
# have applied count updates, and to answer CHECKs (it drops them until a
# look at the stream, once a second, finds it caught up: ready_lag).
until_applied() {
  local i
  for i in $(seq $((${3:-10} * 20))); do
    [ "$(applied "$1")" -ge "$2" ] 2>/dev/null && [ "$(cluster_figure "$1" ready)" = 1 ] && return 0
    sleep 0.05
  done
  return 1
}
caught_up() {  # name at_least: the node applied the stream to its last sequence, at least at_least, and serves
  local last applied
  last=$(cluster_figure "$1" stream_last_sequence)
  applied=$(cluster_figure "$1" last_applied)
  [ "$last" -ge "$2" ] 2>/dev/null && [ "$applied" = "$last" ] && [ "$(cluster_figure "$1" ready)" = 1 ]
}
# same_dumps NODE...: syncs each node and dumps its database to $tmp/NODE.dump;
# true when all are identical (prints the record count, or what differs).
same_dumps() {
  local n first=$1
  for n in "$@"; do
    "$ctl" --socket "$tmp/$n/ctl.sock" sync >/dev/null
    "$ctl" --db "$tmp/$n/db" dump --output "$tmp/$n.dump" >/dev/null 2>&1
  done
  for n in "$@"; do
    cmp -s "$tmp/$first.dump" "$tmp/$n.dump" || {
      echo "$first: $(wc -l <"$tmp/$first.dump") records, $n: $(wc -l <"$tmp/$n.dump"); $(diff "$tmp/$first.dump" "$tmp/$n.dump" | head -2 | cut -c1-200)"
      return 1
    }
  done
  wc -l <"$tmp/$first.dump"
}
cluster_figure() {  # name key
  node_stats "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"][sys.argv[1]])' "$2"
}
total_figure() {  # name key: a worker counter summed over the node's workers
  node_stats "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"].get(sys.argv[1], -1))' "$2"
}
verdict() {  # json: "wrong lost answered"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["wrong"], d["lost"], d["answered"])' "$1" 2>/dev/null
}
# expect_right NAME NODE FIRST STORED COUNT: shingle-load's CHECK mix of ids
# FIRST..FIRST+STORED-1 against NODE, every answer right.
expect_right() {
  local out wrong lost answered
  out=$(in_netns "$(ns_of "$2")" "$load" check --first "$3" --stored "$4" --count "$5" --server "127.0.0.1:${udp_port[$2]}" --json -q 2>&1)
  read -r wrong lost answered <<<"$(verdict "$out")"
  if [ "$wrong" = 0 ] && [ "$lost" = 0 ] && [ "$answered" = "$5" ]; then
    pass "$1 ($5 checks; applied $(applied "$2"))"
  else
    fail "$1" "applied $(applied "$2"): ${out:0:400}"
  fi
}
