"""`python -m trainstep.launch MODULE ARGS...`: how the C++ CLI runs the
Python side (and `python -m trainstep`, trainstep/__main__.py). It imports
MODULE (and with it torch) itself, so that a missing torch or a Ctrl-C
during the seconds torch takes to import is one line too, not a traceback;
then it returns MODULE.main(ARGS). Imports nothing heavy at the top.

The binary names its version in TRAINSTEP_BIN_VERSION (and itself in
TRAINSTEP_BIN); an exporter of another version refuses to run for it."""
import importlib
import os
import sys


def main(argv):
    if not argv:
        print("usage: python -m trainstep.launch MODULE ARGS...", file=sys.stderr)
        return 2
    from . import versions
    bin_version = os.environ.get("TRAINSTEP_BIN_VERSION")
    if bin_version is not None:
        msg = versions.mismatch(os.environ.get("TRAINSTEP_BIN", "trainstep"), bin_version)
        if msg:
            print(f"trainstep: {msg}", file=sys.stderr)
            return 1
    try:
        module = importlib.import_module(argv[0])
    except KeyboardInterrupt:
        print(f"trainstep: {argv[0]}: interrupted", file=sys.stderr)
        return 130
    except ImportError as e:
        if os.environ.get("TRAINSTEP_DEBUG", "") not in ("", "0"):
            raise
        print(f"trainstep: {sys.executable} cannot import {e.name or argv[0]}: {e} (install it "
              "there, or set TRAINSTEP_PYTHON to a Python that has torch)", file=sys.stderr)
        return 1
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
