# shellcheck shell=bash
# What every self-contained rspamd 3.4 of the integration tests shares
# (lib_rspamd.sh for the fuzzy tests, lib_rl_rspamd.sh for the rate-limit
# plugin). Source it; it only defines functions. Uses the caller's TMP (with
# TMP/tld.dat), ROOT_OPTS and PIDS.

# rspamd_conf_head DIR FILTERS NORMAL-PORT: prints the start of an rspamd
# config with no /etc/rspamd includes and no redis or DNS users: options
# (state under DIR/db and DIR/run, the C modules FILTERS, the tiny TLD list),
# logging to DIR/rspamd.log, one normal worker on 127.0.0.1:NORMAL-PORT.
rspamd_conf_head() {
    cat <<EOF
options {
  pidfile = "$1/run/rspamd.pid";
  filters = "$2";                   # C modules run only if listed here
  url_tld = "$TMP/tld.dat";
  hs_cache_dir = "$1/db";
  cache_file = "$1/db/symbols.cache";
  dynamic_conf = "$1/db/rspamd_dynamic";
  history_file = "$1/db/rspamd.history";
  stats_file = "$1/db/stats.ucl";
  local_addrs = [];
  task_timeout = 8s;
}
logging { type = "file"; filename = "$1/rspamd.log"; level = "info"; }
worker "normal" {
  bind_socket = "127.0.0.1:$3";
  count = 1;
  mime = true;
}
EOF
}

# rspamd_launch DIR: starts rspamd in the background on DIR/rspamd.conf
# (output in DIR/stdout.log), adds its PID to PIDS and leaves it in $!.
rspamd_launch() {
    rspamd -f "${ROOT_OPTS[@]}" -c "$1/rspamd.conf" --var DBDIR="$1/db" --var RUNDIR="$1/run" \
        --var LOGDIR="$1" >"$1/stdout.log" 2>&1 &
    PIDS+=("$!")
}
