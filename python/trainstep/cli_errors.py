"""How the Python CLIs (trainstep.exporter, trainstep.torch_checkpoint) end on
an error: one line on stderr naming the file, and the line where one is
known, then exit 1 (130 on Ctrl-C). The full traceback only with --debug,
or TRAINSTEP_DEBUG=1 (what `trainstep --debug` sets for the Python side).
"""
import os
import signal
import sys
import sysconfig
import traceback

import torch

# The exit statuses of tools/exit_codes.h.
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
_MAX_MESSAGE = 240
_DEBUG_HINT = "(run with --debug for the full traceback)"
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIRS = {os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}


class SetupError(Exception):
    """What the command needs besides its input file is wrong (an output
    path, the trainstep binary); raised before the work starts, and shown
    as it is, not as being about the input file."""


class OutputError(SetupError):
    """An output path that cannot be written; raised before the work starts."""


def check_output(path):
    """Refuses `path` up front when its folder is missing (or it is a
    folder), so the error names it, not a temp file next to it, and comes
    before minutes of work."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"{path}: is a folder; give a file name to write")
    if not os.path.isdir(folder):
        raise OutputError(f"{path}: cannot write it: the folder {folder} does not exist")


def debug_requested(flag=False):
    return bool(flag) or os.environ.get("TRAINSTEP_DEBUG", "") not in ("", "0")


def _chain(e):
    """e, then what caused it, innermost last."""
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        out.append(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return out


def _in(path, *folders):
    return os.path.abspath(path).startswith(tuple(folders))


def locate(e, user_file=None, user_only=False):
    """'FILE:LINE' where `e` arose: the innermost frame in `user_file`, else
    the innermost one outside torch, trainstep and the standard library,
    else outside torch and trainstep (a loss_fn that is a torch function
    has no frame of the user's: trainstep's call of it is no place to point
    to, the spec is). The whole chain of causes counts (a wrapped error
    keeps the user's frame in its cause). None when no frame qualifies.
    user_only: the frame in `user_file` or None."""
    if isinstance(e, SyntaxError) and e.filename and e.lineno:
        return _shown(e.filename, user_file) + f":{e.lineno}"
    user = os.path.abspath(user_file) if user_file else None
    tests = [lambda f: user is not None and os.path.abspath(f) == user,
             lambda f: not _in(f, _TORCH_DIR, _OWN_DIR, *_STDLIB_DIRS),
             lambda f: not _in(f, _TORCH_DIR, _OWN_DIR)][:1 if user_only else 3]
    frames = [fr for ex in reversed(_chain(e))
              for fr in reversed(traceback.extract_tb(ex.__traceback__))
              if not fr.filename.startswith("<")]
    for test in tests:
        for fr in frames:
            if test(fr.filename):
                return f"{_shown(fr.filename, user_file)}:{fr.lineno}"
    return None


def _stated(e, user_file):
    """The 'FILE:LINE' an error states itself (capture_errors' `where`)."""
    where = getattr(e, "where", None)
    if not isinstance(where, str) or ":" not in where:
        return None
    path, _, line = where.rpartition(":")
    return f"{_shown(path, user_file)}:{line}"


def _shown(path, user_file):
    """The user's own spelling of their file."""
    if user_file and os.path.abspath(path) == os.path.abspath(user_file):
        return user_file
    return path


def one_line(e):
    """The first line of `e`'s text, trimmed; `e`'s type where it has none."""
    text = e.msg if isinstance(e, SyntaxError) and e.msg else str(e)
    lines = [s.strip() for s in text.strip().splitlines() if s.strip()]
    first = lines[0] if lines else ""
    if len(first) > _MAX_MESSAGE:
        first = first[:_MAX_MESSAGE - 3].rstrip() + "..."
    name = type(e).__name__
    return f"{name}: {first}" if first else name


def run(prog, body, where, debug=False, known=(), user_file=None, known_name_file=False):
    """Runs body() and returns its exit status; on an error prints ONE line
    `PROG: WHERE: MESSAGE` and returns 1. `known` are trainstep's own error
    types, whose text is the message (naming its file already where
    `known_name_file`); any other exception is shown as `Type: first line`,
    with the frame in `user_file` it arose in (see locate) for WHERE, and a
    pointer to --debug."""
    debug = debug_requested(debug)
    try:
        return body()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not add a traceback
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # whatever it is, the user gets one line, not a traceback
        if debug:
            traceback.print_exc()
        ours = isinstance(e, (SetupError, *known))
        # Our own errors say where they are from; a frame of ours (e.g.
        # export.py's op check) is no place to point the user to.
        at = _stated(e, user_file) or (locate(e, user_file, user_only=ours)
                                       if user_file else None)
        if isinstance(e, OSError) and e.filename and e.strerror:
            msg = f"{e.filename}: {e.strerror}"  # a missing or unwritable file, not a bug
            if at and user_file and at.startswith(f"{user_file}:"):
                msg = f"{at}: {msg}"
        elif ours:
            msg = str(e)
            # load_spec's errors about the file already start with its name.
            if not known_name_file and not isinstance(e, SetupError) \
                    and not msg.startswith(f"{where}:"):
                msg = f"{at or where}: {msg}"
        else:
            msg = f"{at or where}: {one_line(e)}" + ("" if debug else f" {_DEBUG_HINT}")
        print(f"{prog}: {msg}", file=sys.stderr)
        return EXIT_FAILURE
