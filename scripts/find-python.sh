#!/usr/bin/env bash
# Prints a Python interpreter that can import torch: $TRAINSTEP_PYTHON, else
# python3 on PATH, else /usr/bin/python3 (Debian's python3-torch).
for py in "${TRAINSTEP_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && "$py" -c "import torch" 2>/dev/null && { echo "$py"; exit 0; }
done
echo "/usr/bin/python3"
