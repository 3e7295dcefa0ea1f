#!/usr/bin/env bash
# Makes (once) the JAX environment bench/peers uses and prints its python:
# ${TRAINSTEP_CACHE:-~/.cache/trainstep}/jax-<hash of requirements-jax.txt>.
# A sibling of the torch 2.x venv rather than inside it: scripts/torch2-env.sh
# owns that one and rebuilds it from scratch when its pins change (which
# would drop JAX unnoticed), and JAX's dependencies must not move the numpy
# that the torch test matrix pins. The peers run as separate processes, so
# nothing needs torch and JAX in one interpreter. A re-run installs nothing.
set -euo pipefail
cd "$(dirname "$0")"
REQ=requirements-jax.txt
ROOT=${TRAINSTEP_CACHE:-$HOME/.cache/trainstep}
# Named by the pins (comments aside), so a changed pin makes a new venv.
HASH=$(grep -v "^#" "$REQ" | sha256sum | cut -c1-12)
VENV=$ROOT/jax-$(sed -n "s/^jax==//p" "$REQ")-$HASH
PY=$VENV/bin/python
STAMP=$VENV/.complete

# --path: print where the venv is and whether it is made (exit 1 if not); install nothing.
if [ "${1:-}" = "--path" ]; then echo "$PY"; [ -f "$STAMP" ]; exit; fi

ok() { "$PY" -c "import jax, optax; jax.numpy.ones(2).sum().block_until_ready()" >/dev/null 2>&1; }
if [ -f "$STAMP" ] && ok; then echo "$PY"; exit 0; fi

{
  echo "making the JAX environment in $VENV"
  rm -rf "$VENV"
  mkdir -p "$ROOT"
  /usr/bin/python3 -m venv "$VENV"
  # --no-deps: the file pins every dependency, so pip resolves nothing itself.
  "$PY" -m pip install -q --no-input --no-deps -r "$REQ"
  ok || { echo "jax does not import in $VENV"; exit 1; }
  touch "$STAMP"
} >&2
echo "$PY"
