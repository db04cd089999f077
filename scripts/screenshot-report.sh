#!/usr/bin/env bash
# Look at a run's report the way a user does: open report.html in a real browser (headless
# Chromium) and save a full-page PNG next to it.
#
#   scripts/screenshot-report.sh runs/demo/run/report.html            # → runs/demo/run/report.png
#   scripts/screenshot-report.sh runs/demo/run/report.html out.png 1400 9000
#
# Installs Debian's `chromium` when it is missing (about 100 MB). The report is self-contained
# (inline SVG plots, no scripts, no network), so the page renders offline.
set -euo pipefail
report="${1:?usage: scripts/screenshot-report.sh REPORT.html [OUT.png] [WIDTH] [HEIGHT]}"
out="${2:-${report%.html}.png}"
width="${3:-1280}"
# Chromium's --screenshot shoots the window, not the whole page: make the window as tall as the
# part of the report you want (the demo's report is about 6,000 px at 1280 wide).
height="${4:-6000}"
if [ ! -f "$report" ]; then
    echo "error: $report: no such report (run \`prod demo\`, \`prod eval\` or \`prod rl\` first)" >&2
    exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core >&2
    browser="$(command -v chromium)"
fi
abs="$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
"$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
    --force-device-scale-factor=1 --window-size="$width,$height" \
    --screenshot="$out" "file://$abs" >&2 2>/dev/null
echo "$out (${width}x${height})"
