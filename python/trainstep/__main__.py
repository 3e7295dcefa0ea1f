"""`python -m trainstep COMMAND ...`: the exporter's commands where the
package is installed into an environment (`pip install ./python`), without
going through the trainstep binary. The binary's `export`,
`import-checkpoint` and `export-checkpoint` run these same modules
(tools/cmd_export.cpp, tools/cmd_torch.cpp). Imports nothing heavy: launch
imports the module, and torch with it."""
import os
import sys

from . import __version__, launch

# command -> (module, the arguments its main() takes first)
COMMANDS = {
    "export": ("trainstep.exporter", []),
    "import-checkpoint": ("trainstep.torch_checkpoint", ["import"]),
    "export-checkpoint": ("trainstep.torch_checkpoint", ["export"]),
}

USAGE = """usage: python -m trainstep COMMAND ARGS...

  export SPEC.py --out NAME.tstep [--grads] [--golden-steps N] [--seed S] [--trace-values]
  import-checkpoint NAME.tstep TORCH_FILE --out NAME.ckpt [--seed S] [--step N]
  export-checkpoint NAME.tstep NAME.ckpt --out TORCH_FILE
  --version

COMMAND --help lists its options. export asks the trainstep binary for its
op list: $TRAINSTEP_BIN, else `trainstep` on PATH."""


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"trainstep {__version__} (exporter, {os.path.dirname(os.path.abspath(__file__))})")
        return 0
    if argv[0] not in COMMANDS:
        print(f"trainstep: unknown command '{argv[0]}' (see 'python -m trainstep --help')",
              file=sys.stderr)
        return 2
    module, first = COMMANDS[argv[0]]
    return launch.main([module, *first, *argv[1:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
