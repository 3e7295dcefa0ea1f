"""bench/dp_two_hosts.sh: two ranks in two network namespaces joined by a
shaped veth pair, over TCP. A short run checks that the script still sets
the link up, launches a rank in each namespace and tears it all down."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BIN, ROOT

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not all(shutil.which(t) or shutil.which(t, path="/usr/sbin:/sbin")
                               for t in ("ip", "tc", "mpirun")), reason="no ip, tc or mpirun"),
]


def _namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_two_ranks_train_over_a_shaped_tcp_link():
    before = _namespaces()
    p = subprocess.run([os.path.join(ROOT, "bench", "dp_two_hosts.sh"), "1gbit", "mnist"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, ROUNDS="1", STEPS="3", TRAINSTEP_BIN=BIN))
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^link: 1gbit \(tbf\), TCP round trip \d+ us$", p.stdout, re.M), p.stdout
    # samples/s at 1 and 2 ranks, speedup, --no-overlap speedup, ms/step
    # communicating, % hidden; then --shard-optimizer's speedup, ms and %.
    line = re.search(r"^mnist 1gbit" + r" ([\d.]+)" * 9 + "$", p.stdout, re.M)
    assert line and all(float(line.group(i)) > 0 for i in (1, 2, 3, 4, 5, 7, 8)), p.stdout
    assert _namespaces() == before  # the script removed its namespaces
