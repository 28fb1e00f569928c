#!/usr/bin/env bash
# The Debian package (issue 22), built, checked, installed and used:
#  1. `dpkg-buildpackage -us -uc -b` builds it from a copy of the source tree;
#  2. lintian reports no error (warnings are printed, not failed);
#  3. `dpkg -i` installs it: the programs, the conffile (every option
#     commented out: --check-config resolves it exactly as no file at all),
#     the unit (systemd-analyze verify), the logrotate file, the rspamd
#     plugins, the manual pages (man renders each one, shingled.conf(5) by
#     name), the _shingled user and its 0750 /var/lib/shingled;
#  4. the installed daemon, started the way the unit starts it (its
#     ExecStart, as its User, in its WorkingDirectory), after the conffile
#     was edited as an admin would (private loopback ports), answers a
#     real rspamd: a
#     learned message is found on the next scan; the installed shinglectl,
#     run from elsewhere, finds its control socket; SIGTERM exits cleanly;
#  5. `dpkg --purge` removes it and its state.
# Root only (it installs a package). The machine must not have shingled
# installed already, except by an interrupted run of this test (a marker in
# /var/lib/shingled says so; that install is purged first).
# Usage: debian_package_test.sh --build BUILD_DIR   (the build is not used:
# the package builds its own)
set -u
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_rspamd.sh"
MODE=cmd; SHINGLED_CONF_EXTRA=""; SERVER_CMD=""
SYNC=1; WRITE_WAIT=0; VECTORS="${SHINGLED_VECTORS:-}"
START_TIMEOUT=30; RT=8; TRACE=0; KEEP=0; FUZZY_TIMEOUT=1s
while [ $# -gt 0 ]; do
    case "$1" in
        --build) shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown argument: $1" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "debian_package_test.sh installs a package: run it as root"
lib_check_env dpkg-buildpackage lintian setpriv systemd-analyze man
lib_setup debian-package-test
read -r P_NORMAL P_CTRL P_FUZZY P_RL P_CNT <<<"$(free_ports 5)"
lib_make_mails
MARKER=/var/lib/shingled/.installed-by-debian_package_test
STATE=/var/lib/shingled

installed() { dpkg-query -W -f='${Status}' shingled 2>/dev/null | grep -q 'install ok installed'; }
if installed || [ -e /lib/systemd/system/shingled.service ]; then
    if [ -e "$MARKER" ]; then
        dpkg --purge shingled >/dev/null 2>&1
    else
        die "the shingled package is installed on this machine; this test installs and purges its own"
    fi
fi
# With systemd running, the package's scripts would start the service on
# its default ports; tests keep to private ports, so the start is refused
# for the duration (policy-rc.d, which deb-systemd-invoke honours).
POLICY=""
if [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    POLICY=/usr/sbin/policy-rc.d
fi
purge_at_exit() {
    [ -n "$POLICY" ] && rm -f "$POLICY"
    installed && dpkg --purge shingled >/dev/null 2>&1
    cleanup
}
trap purge_at_exit EXIT

echo "== 1. dpkg-buildpackage"
SRC="$TMP/src/shingled"
mkdir -p "$SRC"
# The tracked files (and, in a working copy, the new ones not ignored).
(cd "$REPO_DIR" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$SRC" ||
    die "cannot copy the source tree"
t0=$(date +%s)
if (cd "$SRC" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -us -uc -b) >"$TMP/build.log" 2>&1; then
    DEB=$(ls "$TMP"/src/shingled_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -1)
    pass package_builds "$(basename "$DEB") in $(( $(date +%s) - t0 )) s"
else
    fail package_builds "dpkg-buildpackage failed:"
    tail -n 25 "$TMP/build.log" | indent
    finish
fi

echo "== 2. lintian"
lintian --allow-root --pedantic "$TMP"/src/shingled_*.changes >"$TMP/lintian.out" 2>&1
if grep -q '^E:' "$TMP/lintian.out"; then
    fail lintian_no_errors "$(grep '^E:' "$TMP/lintian.out" | head -10)"
else
    pass lintian_no_errors "$(grep -c '^W:' "$TMP/lintian.out") warnings, $(grep -c '^[IP]:' "$TMP/lintian.out") notes"
    grep '^W:' "$TMP/lintian.out" | indent
fi

echo "== 3. dpkg -i"
if dpkg -i "$DEB" >"$TMP/install.log" 2>&1 && installed; then
    touch "$MARKER"
    pass package_installs "$(dpkg-query -W -f='${Package} ${Version}' shingled)"
else
    fail package_installs "$(tail -n 15 "$TMP/install.log")"
    finish
fi
missing=""
for f in /usr/sbin/shingled /usr/bin/shinglectl /usr/bin/shingle-load /etc/shingled/shingled.conf \
         /lib/systemd/system/shingled.service /etc/logrotate.d/shingled \
         /usr/share/shingled/rspamd/shingled_ratelimit.lua /usr/share/shingled/rspamd/shingled_counters.lua \
         /usr/share/shingled/grafana/shingled.json /usr/share/doc/shingled/copyright; do
    [ -e "$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then pass files_in_place; else fail files_in_place "missing:$missing"; fi
if dpkg-query -W -f='${Conffiles}\n' shingled | grep -q '^ /etc/shingled/shingled.conf '; then
    pass conffile "/etc/shingled/shingled.conf is a conffile"
else
    fail conffile "$(dpkg-query -W -f='${Conffiles}' shingled)"
fi
with_file=$(/usr/sbin/shingled --check-config --config /etc/shingled/shingled.conf 2>&1 | tail -n +2)
embedded=$(/usr/sbin/shingled --check-config 2>&1 | tail -n +2)
settings=$(grep -cE '^[a-z_]+ *=' /etc/shingled/shingled.conf)
if [ "$with_file" = "$embedded" ] && [ "$settings" = 0 ] && [ -n "$embedded" ]; then
    pass conffile_equals_embedded_defaults "$(grep -cE '^#[a-z_]+ ' /etc/shingled/shingled.conf) options, all commented out"
else
    fail conffile_equals_embedded_defaults "$settings active settings; $(diff <(echo "$with_file") <(echo "$embedded") | head -5)"
fi
perm=$(stat -c '%U:%G %a' /etc/shingled/shingled.conf)
[ "$perm" = "root:_shingled 640" ] && pass conffile_not_world_readable "$perm" || fail conffile_not_world_readable "$perm"
if getent passwd _shingled >/dev/null && [ "$(stat -c '%U:%G %a' "$STATE")" = "_shingled:_shingled 750" ]; then
    pass service_user_and_state "_shingled owns $STATE (0750)"
else
    fail service_user_and_state "$(getent passwd _shingled) / $(stat -c '%U:%G %a' "$STATE" 2>&1)"
fi
if out=$(systemd-analyze verify /lib/systemd/system/shingled.service 2>&1) &&
   ! grep -qi "error\|unknown\|invalid\|failed" <<<"$out"; then
    pass installed_unit_verifies "${out:-no complaint}"
else
    fail installed_unit_verifies "$out"
fi
bad=""
for page in /usr/share/man/man8/shingled.8.gz /usr/share/man/man8/shinglectl.8.gz \
            /usr/share/man/man1/shingle-load.1.gz /usr/share/man/man5/shingled.conf.5.gz; do
    lines=$(MANWIDTH=80 man -l "$page" 2>"$TMP/man.err" | wc -l)
    { [ "$lines" -gt 20 ] && [ ! -s "$TMP/man.err" ]; } || bad="$bad $(basename "$page") ($lines lines: $(head -c 200 "$TMP/man.err"))"
done
if [ -z "$bad" ] && MANWIDTH=80 man 5 shingled.conf 2>/dev/null | grep -q 'bind_socket'; then
    pass man_pages_render "4 pages; man 5 shingled.conf lists bind_socket"
else
    fail man_pages_render "${bad:-man 5 shingled.conf does not find the page}"
fi

echo "== 4. the installed daemon, as the unit starts it, with rspamd"
unit=/lib/systemd/system/shingled.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
user=$(sed -n 's/^User=//p' "$unit")
workdir=$(sed -n 's/^WorkingDirectory=//p' "$unit")
# As an admin would: edit the conffile (here: private ports), then start.
{
    echo "# the test's private ports"
    echo "bind_socket = \"127.0.0.1:$P_FUZZY\";"
    echo "ratelimit_bind_socket = \"127.0.0.1:$P_RL\";"
    echo "counters_bind_socket = \"127.0.0.1:$P_CNT\";"
} >>/etc/shingled/shingled.conf
if [ "$exec_start" = "/usr/sbin/shingled --config /etc/shingled/shingled.conf" ] && [ "$user" = _shingled ] &&
   [ "$workdir" = "$STATE" ]; then
    pass unit_runs_the_packaged_paths "ExecStart=$exec_start, User=$user, WorkingDirectory=$workdir"
else
    fail unit_runs_the_packaged_paths "ExecStart=$exec_start User=$user WorkingDirectory=$workdir"
fi
SERVER_CMD="setpriv --reuid=$user --regid=$user --init-groups --no-new-privs env -C '$workdir' $exec_start"
start_server pkg "$P_FUZZY" -
wait_server pkg "$P_FUZZY" || finish
RSPAMD_SYMBOLS='    FUZZY_PKG { weight = 1.0; }'
RSPAMD_RULES=$(plain_fuzzy_rule pkg "127.0.0.1:$P_FUZZY" FUZZY_PKG:1)
start_rspamd
expect_sym unknown_before_learning msg1.eml FUZZY_PKG absent
fuzzy_op rspamd_learns fuzzy_add 1 10 msg1.eml
expect_sym found_after_learning msg1.eml FUZZY_PKG present
if [ -S "$STATE/data/shingled.sock" ] && [ -d "$STATE/data/shingled.lmdb" ] &&
   [ "$(stat -c %U "$STATE/data/shingled.lmdb")" = _shingled ]; then
    pass state_in_the_working_directory "$STATE/data: the database and the control socket, owned by _shingled"
else
    fail state_in_the_working_directory "$(ls -la "$STATE/data" 2>&1 | head -5)"
fi
if out=$(cd "$TMP" && /usr/bin/shinglectl stats --json 2>&1) && grep -q '"totals"' <<<"$out"; then
    pass installed_shinglectl_finds_the_service "shinglectl stats from $TMP reached $STATE/data/shingled.sock"
else
    fail installed_shinglectl_finds_the_service "$(head -c 300 <<<"$out")"
fi
kill -TERM "$SERVER_PID_pkg"
wait "$SERVER_PID_pkg"; rc=$?
[ $rc = 0 ] && pass sigterm_clean_exit || fail sigterm_clean_exit "exit code $rc"

echo "== 5. dpkg --purge"
if dpkg --purge shingled >"$TMP/purge.log" 2>&1 && ! installed && [ ! -e /usr/sbin/shingled ] &&
   [ ! -e /etc/shingled/shingled.conf ] && [ ! -e "$STATE" ]; then
    pass purge_removes_everything "programs, conffile and $STATE gone"
else
    fail purge_removes_everything "$(tail -n 5 "$TMP/purge.log"; ls -d /usr/sbin/shingled /etc/shingled "$STATE" 2>&1)"
fi
finish
