#!/usr/bin/env bash
# Check that a Snakemake HTML report renders in headless Chromium and lists what it should.
#
#   scripts/check-report.sh REPORT.html SCREENSHOT.png [NAME ...]
#
# Renders REPORT.html (its JavaScript included) in headless Chromium (Debian: apt-get install
# chromium), writes a screenshot of the start page to SCREENSHOT.png and checks that
#   * the rendered page shows the report's menu (the "Tables" and "Figures" categories),
#   * the screenshot is not blank (a blank 1400×1000 PNG is a few kB),
#   * every NAME (e.g. table1.html, cost_ratio.png) is among the report's embedded results.
# Exit status: 0 all good, 1 a check failed, 2 usage error or no Chromium. Needs no network.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html SCREENSHOT.png [NAME ...]" >&2
  exit 2
fi
report="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shot="$2"
shift 2
[ -f "$report" ] || { echo "error: $report not found; make it with snakemake --report $report" >&2; exit 2; }

browser="${CHROMIUM:-}"
if [ -z "$browser" ]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null; then browser="$candidate"; break; fi
  done
fi
[ -n "$browser" ] || { echo "error: no chromium found; on Debian: apt-get install -y chromium (or set CHROMIUM)" >&2; exit 2; }

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars
       --window-size=1400,1000 --virtual-time-budget=15000)

timeout 120 "$browser" "${flags[@]}" --screenshot="$shot" "file://$report" >/dev/null 2>&1 || true
[ -s "$shot" ] || { echo "FAIL: Chromium wrote no screenshot of $report" >&2; exit 1; }
size=$(stat -c %s "$shot")
[ "$size" -gt 20000 ] || { echo "FAIL: $shot is $size bytes: the page looks blank" >&2; exit 1; }

dom="$profile/dom.html"
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$report" >"$dom" 2>/dev/null || true
status=0
for needle in Tables Figures; do
  grep -q ">$needle<" "$dom" || { echo "FAIL: the rendered report shows no '$needle' category" >&2; status=1; }
done
for name in "$@"; do
  grep -qF "$name" "$report" || { echo "FAIL: $name is not in the report" >&2; status=1; }
done
[ "$status" = 0 ] && echo "ok: $report renders (screenshot $shot, $size bytes)${*:+; lists $# results}"
exit "$status"
