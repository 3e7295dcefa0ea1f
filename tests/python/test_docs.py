"""docs/ops.md matches the registry, so the documented op list cannot drift."""
import os
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
