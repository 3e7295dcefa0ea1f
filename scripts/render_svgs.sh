#!/usr/bin/env bash
# Regenerates docs/curves.png, docs/graph.png and docs/memory.png (README
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

# WIDTH,HEIGHT is the window: the graph is taller than it, so its PNG is the
# top (the legend and the forward pass) at full scale.
shot() {
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$tmp/chromium" --window-size="$3" --screenshot="$2" "$1" 2> /dev/null
}
shot "$tmp/curves.svg" "$OUT/curves.png" 1000,760
shot "$tmp/graph.svg" "$OUT/graph.png" 1400,1600
shot "$tmp/memory.svg" "$OUT/memory.png" 1200,800
echo "wrote $OUT/curves.png $OUT/graph.png $OUT/memory.png"
