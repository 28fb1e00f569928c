# shellcheck shell=bash
# The rspamd side of the rate-limit tests (rspamd_ratelimit_plugin_test.sh
# against the fake service, rspamd_ratelimit_test.sh and
# rspamd_ratelimit_rules_test.sh against shingled). Source it; it only
# defines functions. Uses the caller's TMP (with TMP/tld.dat), PLUGIN
# (contrib/rspamd/shingled_ratelimit.lua), ROOT_OPTS, PIDS and CHILD_PIDS.

# rl_parse_args HELP-LINES "$@": the tests' options --build DIR, --keep,
# --start-timeout SEC (-h prints lines HELP-LINES, e.g. 2,26, of the script);
# sets build, KEEP and START_TIMEOUT.
rl_parse_args() {
    local help=$1; shift
    build=build; KEEP=0; START_TIMEOUT=20
    while [ $# -gt 0 ]; do
        case "$1" in
            --build) build=${2:?--build needs a directory}; shift 2 ;;
            --keep) KEEP=1; shift ;;
            --start-timeout) START_TIMEOUT=${2:?}; shift 2 ;;
            -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
            *) echo "unknown argument: $1" >&2; exit 2 ;;
        esac
    done
}

# rl_cleanup: the EXIT trap. SIGTERM to PIDS, SIGKILL to whatever of PIDS
# and CHILD_PIDS (rspamd's workers) is left after 5 s; TMP is removed
# unless KEEP=1.
rl_cleanup() {
    local pid alive
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 50); do
        alive=0
        for pid in "${PIDS[@]}" "${CHILD_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${PIDS[@]}" "${CHILD_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    if [ "$KEEP" = 1 ]; then echo "kept temp dir: $TMP" >&2; else rm -rf "$TMP"; fi
}

# rl_rspamd_start NAME PORT SERVER PLUGIN-OPTIONS [EXTRA-UCL]: starts an
# unmodified rspamd 3.4 in the background from TMP/rspamd-NAME/rspamd.conf, a
# self-contained config (no /etc/rspamd includes, no redis or DNS users,
# log TMP/rspamd-NAME/rspamd.log) with one normal worker on 127.0.0.1:PORT
# and the plugin installed as contrib/rspamd/README.md says: a user plugin
# from a modules path, enabled by its `shingled_ratelimit` section, whose
# `servers` is SERVER and whose other options are PLUGIN-OPTIONS (UCL lines).
# EXTRA-UCL goes at the top level. Adds the PID to PIDS and sets RSPAMD_PID_NAME.

# RSPAMD_PREFIX=DIR runs another rspamd build (DIR/bin/rspamd, rspamc), e.g.
# a current release built from source (docs/rspamd-versions.md); CI uses
# Debian's 3.4 from PATH.
if [ -n "${RSPAMD_PREFIX:-}" ]; then
    export PATH="$RSPAMD_PREFIX/bin:$PATH"
fi
# shellcheck source=tests/integration/lib_rspamd_conf.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd_conf.sh"

rl_rspamd_start() {
    local d="$TMP/rspamd-$1" port=$2
    mkdir -p "$d/db" "$d/run" "$d/plugins.d"
    cp "$PLUGIN" "$d/plugins.d/"
    {
        echo "# Self-contained rspamd 3.4 config: no /etc/rspamd includes, no redis/DNS users."
        rspamd_conf_head "$d" "" "$port"
        cat <<EOF
modules { path = "$d/plugins.d/"; }
actions { reject = 15; add_header = 6; }
shingled_ratelimit {
  servers = "$3";
$4
}
${5:-}
EOF
    } >"$d/rspamd.conf"
    rspamd_launch "$d"
    printf -v "RSPAMD_PID_$1" '%s' "$!"
}

# rl_rspamd_wait NAME PORT RCPT: waits up to START_TIMEOUT seconds until the
# rspamd started as NAME answers a scan (to RCPT, through the caller's `rc`)
# and its log says the plugin loaded. Returns 0 then, 1 if it died or the
# time ran out; RL_RSPAMD_LOADED gets the plugin's log line.
rl_rspamd_wait() {
    local d="$TMP/rspamd-$1" port=$2 pidvar="RSPAMD_PID_$1" deadline
    RL_RSPAMD_LOADED=""
    deadline=$(( $(date +%s) + START_TIMEOUT ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        kill -0 "${!pidvar}" 2>/dev/null || return 1
        if rc "$d/ready.json" -h "127.0.0.1:$port" --json -r "$3" "$TMP/mail/plain.eml" &&
           grep -q '"action"' "$d/ready.json"; then
            RL_RSPAMD_LOADED=$(grep -o 'shingled_ratelimit: shingled at.*' "$d/rspamd.log" | head -1)
            [ -n "$RL_RSPAMD_LOADED" ]
            return
        fi
        sleep 0.2
    done
    return 1
}
