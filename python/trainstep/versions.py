"""Whether this exporter and a trainstep binary belong together: the same
trainstep version (one string, trainstep.__version__, which CMake compiles
into the binary) and the same artifact format. A mismatch is refused, not
warned about: an exporter and a runtime from different trees may disagree
on ops, the artifact format or checkpoints in ways no later check names."""
import os

from . import FORMAT_VERSION, __version__

HERE = os.path.dirname(os.path.abspath(__file__))


def mismatch(binary, version, format_version=None):
    """None when `binary` (its path), reporting `version` and
    `format_version` (None: not reported), fits this exporter; else the
    one-line message saying both sides and what to do."""
    if version == __version__ and format_version in (None, FORMAT_VERSION):
        return None
    theirs = f"version {version}" if version else "older than 0.1.0 (it reports no version)"
    if version == __version__:
        theirs += f", artifact format {format_version}"
        ours = f"{__version__}, artifact format {FORMAT_VERSION}"
    else:
        ours = __version__
    return (f"the trainstep binary {binary} is {theirs} but the exporter in {HERE} is "
            f"{ours}: use a binary and an exporter from one source tree (reinstall with "
            f"`pip install ./python` from the binary's tree, or set TRAINSTEP_BIN or "
            f"TRAINSTEP_PYTHONPATH to a matching one)")
