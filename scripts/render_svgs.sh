#!/usr/bin/env bash
# Regenerates docs/curves.png, docs/graph.png and docs/memory.png (docs/training.md,
# "Watching a run"): exports the MNIST example, trains it briefly with
# --log-dir, draws the three SVGs (plot, inspect --graph, inspect --memory)
# and screenshots each with headless Chromium (scripts/install-deps.sh
# installs it). Needs a built build/trainstep (or TRAINSTEP_BIN).
#   scripts/render_svgs.sh [OUT_DIR]   (default docs/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${TRAINSTEP_BIN:-$ROOT/build/trainstep}")
mkdir -p "${1:-$ROOT/docs}"
OUT=$(realpath "${1:-$ROOT/docs}")
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "render_svgs.sh: no chromium (run scripts/install-deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN" export "$ROOT/examples/mnist/spec.py" --out "$tmp/mnist.tstep"
cd "$tmp"  # so the curves' title reads runs/mnist
"$BIN" train mnist.tstep --data fashion-mnist --epochs 3 --max-batches 150 --seed 1 \
  --log-dir runs/mnist > /dev/null 2>&1
"$BIN" plot runs/mnist --out "$tmp/curves.svg"
"$BIN" inspect "$tmp/mnist.tstep" --graph "$tmp/graph.svg" --memory "$tmp/memory.svg"

# The graph is wider and taller than a window, its legend at the far left,
# so its PNG is a window-sized region at full scale (1 pt = 4/3 px): the top
# of the graph, centred on the topmost fused group's cluster.
python3 - "$tmp/graph.svg" "$tmp/graph_top.svg" 1050 1200 <<'PY'
import re, sys
import xml.etree.ElementTree as ET
src, dst, w, h = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
text = open(src).read()
NS = "{http://www.w3.org/2000/svg}"
root = ET.fromstring(text)
width = float(root.get("viewBox").split()[2])
tx, ty = map(float, re.search(r"translate\(([-\d.]+) ([-\d.]+)\)", text).groups())
tops = []  # (top, centre x) of each cluster, in viewBox units
for g in root.iter(NS + "g"):
    if "cluster" in g.get("class", "").split():
        v = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", g.find(NS + "path").get("d"))]
        tops.append((min(v[1::2]) + ty, (min(v[0::2]) + max(v[0::2])) / 2 + tx))
cx = min(tops)[1] if tops else w / 2
x0 = min(max(cx - w / 2, 0), max(width - w, 0))
text = re.sub(r'<svg width="[^"]*" height="[^"]*"\s+viewBox="[^"]*"',
              f'<svg width="{w:g}pt" height="{h:g}pt" viewBox="{x0:.1f} 0 {w:g} {h:g}"', text,
              count=1)
open(dst, "w").write(text)
PY

# WIDTH,HEIGHT is the window.
shot() {
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$tmp/chromium" --window-size="$3" --screenshot="$2" "$1" 2> /dev/null
}
shot "$tmp/curves.svg" "$OUT/curves.png" 1000,760
shot "$tmp/graph_top.svg" "$OUT/graph.png" 1400,1600
shot "$tmp/memory.svg" "$OUT/memory.png" 1200,800
echo "wrote $OUT/curves.png $OUT/graph.png $OUT/memory.png"
