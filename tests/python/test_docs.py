"""The docs stay true: docs/ops.md matches the registry, every `trainstep`
command line shown in README.md and docs/*.md names a real subcommand and
real flags, every relative link resolves, and the README stays short."""
import functools
import glob
import os
import re
import subprocess
import sys

from conftest import BIN, ROOT


def test_ops_doc_is_current():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_ops_doc.py"), "--check"],
                       capture_output=True, text=True, env=dict(os.environ, TRAINSTEP_BIN=BIN))
    assert p.returncode == 0, p.stderr


def test_required_docs_exist():
    for d in ("ARCHITECTURE.md", "format.md", "ops.md"):
        assert os.path.getsize(os.path.join(ROOT, "docs", d)) > 500, d


# --- reading the docs

README = os.path.join(ROOT, "README.md")
CLI_DOC = os.path.join(ROOT, "docs", "cli.md")
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
# Fenced blocks in these languages hold shell commands (or error output).
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "text"}
LONG_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def _docs():
    return [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _rel(path):
    return os.path.relpath(path, ROOT)


def _split_fences(text):
    """(prose lines, [(lang, [(line number, line)])]): the fenced code
    blocks apart, prose lines blanked so line numbers still count."""
    prose, blocks, block = [], [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if block is None and m:
            block = (m.group(2).lower(), [])
            prose.append("")
        elif block is not None and m and not m.group(2):
            blocks.append(block)
            block = None
            prose.append("")
        elif block is not None:
            block[1].append((n, line))
            prose.append("")
        else:
            prose.append(line)
    return prose, blocks


# --- the binary's own account of its subcommands and flags

@functools.lru_cache(maxsize=None)
def _help(sub=None):
    """(exit status, stdout) of `BIN [sub] --help`, run once per subcommand."""
    p = subprocess.run([BIN] + ([sub] if sub else []) + ["--help"], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout


def _option_flags(help_text):
    # CLI11 prints each option at two spaces' indent ("  -o,--out TEXT");
    # descriptions, which name other commands' flags too, are indented more.
    return set(re.findall(r"^  (?:-\w,)?(--[a-z0-9][\w-]*)", help_text, re.M))


@functools.lru_cache(maxsize=None)
def _subcommands():
    text = _help()[1]
    return frozenset(re.findall(r"^  (\S+)", text.split("Subcommands:", 1)[1], re.M))


def _flags(sub=None):
    """Long flags `trainstep [sub]` takes, the binary's own (--version, --debug) included."""
    flags = _option_flags(_help()[1])
    if sub:
        rc, text = _help(sub)
        assert rc == 0, f"trainstep {sub} --help exited {rc}"
        flags |= _option_flags(text)
    return flags


# --- command lines shown in fenced code blocks

# The binary as docs call it: trainstep, build/trainstep, ./build/trainstep,
# $TRAINSTEP_BIN; `python -m trainstep` takes the same arguments.
BINARY = re.compile(r"^(?:[\w.~/-]*/)?trainstep$|^\"?\$\{?TRAINSTEP_BIN\}?\"?$")
SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]*$")


def _shell_commands(lines):
    """Each simple command of a block's lines: continuations joined, error
    output and comments dropped, $(...) taken out as commands of their own,
    then split at pipes, &&, || and ;, so another program's flags stay its
    own."""
    joined, cur, first = [], "", None
    for n, line in lines:
        first = n if first is None else first
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        joined.append((first, cur + line))
        cur, first = "", None
    if cur:
        joined.append((first, cur))
    for n, line in joined:
        if re.match(r"\s*trainstep( [\w-]+)?: ", line):
            continue  # the output of one: "trainstep: FILE: error"
        line = re.sub(r"(^|\s)#.*", "", line)
        parts = [line]
        while True:  # innermost $(...) first
            m = re.search(r"\$\(([^()]*)\)", parts[0])
            if not m:
                break
            parts.append(m.group(1))
            parts[0] = parts[0][:m.start()] + "_" + parts[0][m.end():]
        for part in parts:
            for cmd in re.split(r"\s*(?:&&|\|\||;)\s*|\s\|\s", part):
                yield n, cmd.split()


def _invocation(words):
    """(subcommand or None, its flags) when `words` runs trainstep, else None.
    Words before the binary (env assignments, mpirun -np 4, python -m) are
    another program's; `trainstep:` or `trainstep export:` (error output)
    is not a command line."""
    for i, w in enumerate(words):
        if not BINARY.match(w):
            continue
        rest = words[i + 1:]
        j = 0
        while j < len(rest) and rest[j].startswith("-"):  # the binary's own options
            j += 1
        if j < len(rest) and SUBCOMMAND.match(rest[j]):
            return rest[j], LONG_FLAG.findall(" ".join(rest[:j] + rest[j + 1:]))
        if j and j == len(rest):  # trainstep --version
            return None, LONG_FLAG.findall(" ".join(rest))
        return None
    return None


def _invocations():
    """(where, subcommand or None, flags) for every trainstep command line
    in the fenced shell blocks of README.md and docs/*.md."""
    found = []
    for path in _docs():
        for lang, lines in _split_fences(open(path).read())[1]:
            if lang not in SHELL_LANGS:
                continue
            for n, words in _shell_commands(lines):
                inv = _invocation(words)
                if inv:
                    found.append((f"{_rel(path)}:{n}", *inv))
    return found


def test_the_command_line_parser_finds_the_examples():
    """A parser that finds nothing would pass everything below."""
    inv = _invocations()
    assert len(inv) >= 30, inv
    subs = {s for _, s, _ in inv}
    assert {"export", "train", "verify", "bench", "plot"} <= subs, subs
    train = [f for _, s, f in inv if s == "train"]
    assert any("--distributed" in f for f in train)  # the mpirun line
    assert not any("-np" in f for _, _, f in inv)
    assert not any("--logdir" in f for _, _, f in inv)  # tensorboard's


def test_documented_subcommands_exist():
    bad = []
    for sub in sorted({s for _, s, _ in _invocations() if s}):
        if sub not in _subcommands():
            bad += [f"{where}: trainstep {sub}: no such subcommand"
                    for where, s, _ in _invocations() if s == sub]
        elif _help(sub)[0] != 0:
            bad.append(f"trainstep {sub} --help exited {_help(sub)[0]}")
    assert not bad, "\n".join(bad)


def test_documented_flags_exist():
    bad = []
    for where, sub, flags in _invocations():
        if sub is not None and sub not in _subcommands():
            continue  # reported above
        known = _flags(sub)
        bad += [f"{where}: trainstep {sub or ''} {f}: not in its --help"
                for f in flags if f not in known]
    assert not bad, "\n".join(bad)


# --- docs/cli.md: a section per subcommand, its flag tables true to --help

def _cli_sections():
    """{heading: (subcommands it names, its text)} of docs/cli.md; a heading
    names a subcommand as `trainstep SUB` or `SUB` in backticks."""
    prose, _ = _split_fences(open(CLI_DOC).read())
    sections, heading = {}, None
    for line in prose:
        if line.startswith("#"):
            heading = line
            named = set(re.findall(r"`(?:trainstep )?([a-z][a-z0-9-]*)`", line))
            sections[heading] = (named & _subcommands(), [])
        elif heading:
            sections[heading][1].append(line)
    return {h: (subs, "\n".join(lines)) for h, (subs, lines) in sections.items()}


def test_cli_doc_flag_tables_match_help():
    bad = []
    for heading, (subs, text) in _cli_sections().items():
        for row in re.findall(r"^\|([^|\n]*)\|", text, re.M):
            for flag in LONG_FLAG.findall(row):
                # A table under a heading that names subcommands holds flags
                # each of them takes; elsewhere, some subcommand's.
                owners = subs or _subcommands()
                have = [s for s in owners if flag in _flags(s)]
                if (subs and len(have) < len(subs)) or not have:
                    bad.append(f"{heading}: {flag}: not in --help of "
                               f"{sorted(set(owners) - set(have))}")
    assert not bad, "\n".join(bad)


def test_cli_doc_covers_every_subcommand_and_flag():
    sections = _cli_sections()
    bad = []
    for sub in sorted(_subcommands()):
        text = "\n".join(t for subs, t in sections.values() if sub in subs)
        if not text:
            bad.append(f"trainstep {sub}: no section in docs/cli.md")
            continue
        written = set(LONG_FLAG.findall(text))
        bad += [f"trainstep {sub} {f}: not in its docs/cli.md section"
                for f in sorted(_flags(sub) - _flags() - written)]
    assert not bad, "\n".join(bad)


# --- links and length

def _slug(heading):
    # GitHub's anchors: lower case, punctuation dropped, spaces to hyphens.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=None)
def _anchors(path):
    prose, _ = _split_fences(open(path).read())
    seen, out = {}, set()
    for line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)
        if m:
            s = _slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def test_relative_links_resolve():
    bad = []
    for path in _docs():
        prose, _ = _split_fences(open(path).read())
        text = re.sub(r"`[^`\n]*`", "", "\n".join(prose))  # inline code is no link
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                bad.append(f"{_rel(path)}: {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
                bad.append(f"{_rel(path)}: {target}: no such heading")
    assert not bad, "\n".join(bad)


def test_readme_is_a_front_door():
    lines = open(README).read().count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail into docs/"


def test_readme_links_every_doc():
    readme = open(README).read()
    missing = [d for d in _docs()[1:] if f"(docs/{os.path.basename(d)})" not in readme]
    assert not missing, missing


def test_documented_make_targets_exist():
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    targets = set(re.findall(r"^([\w-]+)\s*:(?!=)", makefile, re.M))
    bad = []
    for path in _docs():
        text = open(path).read()
        # Only in code (spans and blocks), where `make X` is a command.
        code = re.findall(r"`[^`\n]+`", text)
        code += [line for _, lines in _split_fences(text)[1] for _, line in lines]
        for target in re.findall(r"(?<![\w/-])make ([a-z][\w-]*)", "\n".join(code)):
            if target not in targets:
                bad.append(f"{_rel(path)}: make {target}")
    assert not bad, "\n".join(bad)
