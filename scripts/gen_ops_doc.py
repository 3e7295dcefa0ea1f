#!/usr/bin/env python3
"""Writes docs/ops.md from the runtime's registry (`trainstep ops --json`),
with each op's oracle cases (tests/python/oracle/cases_*.py, run against
PyTorch by tests/python/test_oracle_ops.py) and the other tests naming it.

Usage: scripts/gen_ops_doc.py [--check]   (--check: exit 1 if docs/ops.md is stale)
"""
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def tests_naming(op):
    """Test files that name the op, in full or (for tests that loop over an
    op family, e.g. "aten." + name + ".Tensor") by its base name."""
    base = op.split(".")[1] if op.count(".") >= 2 else op
    hits = []
    for sub in ("tests/cpp", "tests/python"):
        d = os.path.join(ROOT, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith((".cpp", ".py", ".h")):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    text = fh.read()
                    if f'"{op}"' in text or (f'"{base}"' in text and '"aten." +' in text):
                        hits.append(f"{sub}/{f}")
    return hits


def oracle_counts():
    """op -> (positive cases, negative cases, {case files}) from the oracle tables."""
    sys.path[:0] = [os.path.join(ROOT, "tests", "python"), os.path.join(ROOT, "python")]
    from oracle import harness
    cases, negs = harness.collect()
    out = {}
    for c in cases + negs:
        pos, neg, files = out.get(c.op, (0, 0, set()))
        files.add(os.path.basename(c.source))
        is_neg = isinstance(c, harness.Neg)
        out[c.op] = (pos + (not is_neg), neg + is_neg, files)
    return out


def render(binary):
    ops = json.loads(subprocess.run([binary, "ops", "--json"], check=True, capture_output=True,
                                    text=True).stdout)["ops"]
    lines = ["# Supported ops", "",
             "Generated from the runtime's op registry by `scripts/gen_ops_doc.py`; do not edit.",
             "`trainstep ops` prints the same list. The exporter refuses any op not listed here.",
             "Every op also runs inside the whole-step parity tests "
             "(`tests/python/test_parity.py`) when a model uses it.", "",
             "The oracle column counts each op's cases in `tests/python/oracle/` "
             "(positive + negative), compared with PyTorch eager by "
             "`tests/python/test_oracle_ops.py`.", "",
             f"{len(ops)} ops.", "", "| op | what it does | oracle cases | unit tests |",
             "|---|---|---|---|"]
    counts = oracle_counts()
    for op in sorted(ops, key=lambda o: o["name"]):
        tests = ", ".join(f"`{t}`" for t in tests_naming(op["name"])) or "—"
        doc = op["doc"].replace("|", "\\|")
        pos, neg, files = counts.get(op["name"], (0, 0, set()))
        oracle = (f"{pos} + {neg} (" + ", ".join(f"`{f}`" for f in sorted(files)) + ")") if pos + neg else "—"
        lines.append(f"| `{op['name']}` | {doc} | {oracle} | {tests} |")
    return "\n".join(lines) + "\n"


def main():
    binary = os.environ.get("TRAINSTEP_BIN", os.path.join(ROOT, "build", "trainstep"))
    text = render(binary)
    path = os.path.join(ROOT, "docs", "ops.md")
    if "--check" in sys.argv:
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if current != text:
            print("docs/ops.md is stale: run scripts/gen_ops_doc.py", file=sys.stderr)
            return 1
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
