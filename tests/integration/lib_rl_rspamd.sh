# shellcheck shell=bash
# The rspamd side of the rate-limit tests (rspamd_ratelimit_plugin_test.sh
# against the fake service, rspamd_ratelimit_test.sh against shingled). Source
# it; it only defines a function. Uses the caller's TMP (with TMP/tld.dat),
# PLUGIN (contrib/rspamd/shingled_ratelimit.lua), ROOT_OPTS and PIDS.

# rl_rspamd_start NAME PORT SERVER PLUGIN-OPTIONS [EXTRA-UCL]: starts an
# unmodified rspamd 3.4 in the background from TMP/rspamd-NAME/rspamd.conf, a
# self-contained config (no /etc/rspamd includes, no redis or DNS users,
# log TMP/rspamd-NAME/rspamd.log) with one normal worker on 127.0.0.1:PORT
# and the plugin installed as contrib/rspamd/README.md says: a user plugin
# from a modules path, enabled by its `shingled_ratelimit` section, whose
# `servers` is SERVER and whose other options are PLUGIN-OPTIONS (UCL lines).
# EXTRA-UCL goes at the top level. Adds the PID to PIDS and sets RSPAMD_PID_NAME.
rl_rspamd_start() {
    local d="$TMP/rspamd-$1" port=$2
    mkdir -p "$d/db" "$d/run" "$d/plugins.d"
    cp "$PLUGIN" "$d/plugins.d/"
    cat >"$d/rspamd.conf" <<EOF
# Self-contained rspamd 3.4 config: no /etc/rspamd includes, no redis/DNS users.
options {
  pidfile = "$d/run/rspamd.pid";
  filters = "";
  url_tld = "$TMP/tld.dat";
  hs_cache_dir = "$d/db";
  cache_file = "$d/db/symbols.cache";
  dynamic_conf = "$d/db/rspamd_dynamic";
  history_file = "$d/db/rspamd.history";
  stats_file = "$d/db/stats.ucl";
  local_addrs = [];
  task_timeout = 8s;
}
logging { type = "file"; filename = "$d/rspamd.log"; level = "info"; }
worker "normal" {
  bind_socket = "127.0.0.1:$port";
  count = 1;
  mime = true;
}
modules { path = "$d/plugins.d/"; }
actions { reject = 15; add_header = 6; }
shingled_ratelimit {
  servers = "$3";
$4
}
${5:-}
EOF
    rspamd -f "${ROOT_OPTS[@]}" -c "$d/rspamd.conf" --var DBDIR="$d/db" --var RUNDIR="$d/run" \
        --var LOGDIR="$d" >"$d/stdout.log" 2>&1 &
    PIDS+=("$!")
    printf -v "RSPAMD_PID_$1" '%s' "$!"
}
