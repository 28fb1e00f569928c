#!/usr/bin/env bash
# Installs the Debian 12 packages shingled needs to build, test and benchmark.
# Idempotent: installs only what is missing, and runs `apt-get update` first
# only when something is missing.
set -euo pipefail

packages=(
  build-essential g++ meson ninja-build pkg-config
  liburing-dev liblmdb-dev libsodium-dev libxxhash-dev
  libsqlite3-dev sqlite3 nlohmann-json3-dev libhiredis-dev libsystemd-dev
  libmicrohttpd-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev llvm
  rspamd redis-server iproute2 procps python3
  gnuplot-nox util-linux
  # systemd_test.sh, man_pages_test.sh, metrics_test.sh: systemd-analyze,
  # man(1), promtool
  systemd man-db prometheus
  # debian_package_test.sh: the package's build and its checker
  debhelper lintian
  # the DPDK backend (io = dpdk) and its veth test: namespaces, ARP, ping,
  # turning off the veth's TX checksum offload on the client side
  dpdk libdpdk-dev iputils-ping iputils-arping ethtool
  # the cluster's replicated log (docs/cluster.md): the NATS C client, and
  # the JetStream servers its tests start on private ports
  libnats-dev nats-server
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# rspamd's package starts its own daemon; shingled's tests start their own
# instances with private configs and ports, so the system one must not hold
# the default ports (11333/11334/11335).
if [[ " ${missing[*]} " == *" rspamd "* ]]; then
  systemctl disable --now rspamd >/dev/null 2>&1 || service rspamd stop >/dev/null 2>&1 || true
fi
if [[ " ${missing[*]} " == *" redis-server "* ]]; then
  systemctl disable --now redis-server >/dev/null 2>&1 || service redis-server stop >/dev/null 2>&1 || true
fi
# The same for nats-server's packaged service (client port 4222).
if [[ " ${missing[*]} " == *" nats-server "* ]]; then
  systemctl disable --now nats-server >/dev/null 2>&1 || service nats-server stop >/dev/null 2>&1 || true
fi
