#!/usr/bin/env bash
# Opens DIR/report.html (the page `duet compare --report DIR` writes through
# core/compare/report_page.py) in Debian's headless Chromium and checks that it
# renders: the page's own script, run on load, counts the chart images that
# decoded (naturalWidth > 0) into <body data-charts-rendered="N">, which must
# read 3 in the DOM Chromium dumps; and a 1280x3000 screenshot, kept as
# DIR/report-screenshot.png, must not be blank. Installs chromium through
# scripts/install-deps.sh when it is missing. Prints each check; exits 1 when
# one fails.
#   usage: bash scripts/check-report.sh DIR
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR   (checks DIR/report.html)" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
report="$dir/report.html"
shot="$dir/report-screenshot.png"
[ -f "$report" ] || { echo "check-report: $report not found" >&2; exit 1; }

command -v chromium >/dev/null || bash "$root/scripts/install-deps.sh" chromium
python=$(bash "$root/scripts/python-env.sh")

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# shellcheck disable=SC2054  # the comma in 1280,3000 is part of one argument
flags=(--headless --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$profile"
       --window-size=1280,3000 --virtual-time-budget=10000)
# Chromium's sandbox refuses to run as root.
[ "$(id -u)" -ne 0 ] || flags+=(--no-sandbox)
url="file://$report"

echo "check-report: $report in $(chromium --version 2>/dev/null | head -n1)"
status=0

dom=$(chromium "${flags[@]}" --dump-dom "$url" 2>/dev/null)
rendered=$(printf '%s' "$dom" | grep -o 'data-charts-rendered="[0-9]*"' | head -n1 | grep -o '[0-9]*' || true)
if [ "${rendered:-}" = 3 ]; then
  echo "ok   charts rendered in the browser: 3 of 3 (data-charts-rendered after load)"
else
  echo "FAIL charts rendered in the browser: ${rendered:-none} of 3"
  status=1
fi

rm -f "$shot"
chromium "${flags[@]}" --screenshot="$shot" "$url" >/dev/null 2>&1 || true
if [ ! -s "$shot" ]; then
  echo "FAIL screenshot: chromium wrote no $shot"
  exit 1
fi
if "$python" - "$shot" <<'EOF'
import sys
from PIL import Image

image = Image.open(sys.argv[1]).convert("RGB")
width, height = image.size
small = image.resize((width // 4, height // 4))
counts = small.getcolors(maxcolors=small.width * small.height)
background = max(counts)[1]
differing = sum(n for n, p in counts if sum(abs(a - b) for a, b in zip(p, background)) > 30)
colours = len(counts)
share = differing / (small.width * small.height)
ok = width == 1280 and height == 3000 and share > 0.05 and colours > 50
print(f"{'ok  ' if ok else 'FAIL'} screenshot {sys.argv[1]}: {width}x{height}, "
      f"{share:.1%} of pixels differ from the background, {colours} colours (not blank)")
sys.exit(0 if ok else 1)
EOF
then :; else status=1; fi
exit $status
