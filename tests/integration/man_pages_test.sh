#!/usr/bin/env bash
# The manual pages (issue 22): each renders with man -l and no groff
# warning, and shingled.conf(5), which the daemon generates from its option
# table (--help-config=man), names every option --help-config lists.
# Usage: man_pages_test.sh --build BUILD_DIR
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
. "$SCRIPT_DIR/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v man >/dev/null || { fail requirements "man not found (apt-get install man-db)"; finish; exit 1; }
"$shingled" --help-config=man >"$tmp/shingled.conf.5"
for page in "$REPO_DIR/man/shingled.8" "$REPO_DIR/man/shinglectl.8" "$REPO_DIR/man/shingle-load.1" "$tmp/shingled.conf.5"; do
  name=$(basename "$page")
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  lines=$(MANWIDTH=80 man -l "$page" 2>/dev/null | wc -l)
  if [ -z "$warnings" ] && [ "$lines" -gt 20 ]; then pass "renders_$name ($lines lines, no warning)"
  else fail "renders_$name" "$lines lines; warnings: $warnings"; fi
done
rendered=$(MANWIDTH=200 man -l "$tmp/shingled.conf.5" 2>/dev/null)
missing=()
total=0
while read -r option; do
  total=$((total + 1))
  grep -qE "^ +$option( |$)" <<<"$rendered" || missing+=("$option")
done < <("$shingled" --help-config | grep -E '^[a-z_]+' | cut -d' ' -f1)
if [ "$total" -ge 40 ] && [ ${#missing[@]} = 0 ]; then pass "config_page_lists_every_option ($total options)"
else fail config_page_lists_every_option "$total options; missing: ${missing[*]}"; fi
finish
