#!/usr/bin/env bash
# Installs what is missing, builds shingled, and runs it in the foreground on
# its embedded defaults: UDP 127.0.0.1:11335 (rspamd's fuzzy port), updates
# allowed from loopback, hashes persisted in ./data/shingled.lmdb (synced every
# 60 s and on Ctrl-C), control socket in ./data. Extra arguments go to the
# daemon (e.g. scripts/run.sh --config shingled.conf). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build -Dbuildtype=release >/dev/null
fi
ninja -C build src/daemon/shingled tools/shinglectl tools/shingle-load >/dev/null
mkdir -p data
echo "shingled: starting; figures with: build/tools/shinglectl stats" >&2
exec build/src/daemon/shingled "$@"
