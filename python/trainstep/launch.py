"""`python -m trainstep.launch MODULE ARGS...`: how the C++ CLI runs the
Python side. It imports MODULE (and with it torch) itself, so that a
missing torch or a Ctrl-C during the seconds torch takes to import is one
line too, not a traceback; then it returns MODULE.main(ARGS). Imports
nothing heavy at the top."""
import importlib
import os
import sys


def main(argv):
    if not argv:
        print("usage: python -m trainstep.launch MODULE ARGS...", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(argv[0])
    except KeyboardInterrupt:
        print(f"trainstep: {argv[0]}: interrupted", file=sys.stderr)
        return 130
    except ImportError as e:
        if os.environ.get("TRAINSTEP_DEBUG", "") not in ("", "0"):
            raise
        print(f"trainstep: {sys.executable} cannot import {e.name or argv[0]}: {e} (set "
              "TRAINSTEP_PYTHON to a Python that has torch)", file=sys.stderr)
        return 1
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
