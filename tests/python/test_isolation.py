"""Two sessions in one process do not interfere: the C++ test
Isolation.ConcurrentSessionsMatchSequentialRuns trains the exported MNIST
models (Adadelta and SGD, at 1 and 2 threads) concurrently on four threads
and compares every loss and state tensor, bit for bit, with sequential runs."""
import os
import subprocess

import pytest

from conftest import BIN, ROOT, SPECS

pytestmark = [pytest.mark.runtime]


def test_concurrent_sessions_match_sequential_runs(mnist_adadelta, artifacts):
    sgd = artifacts("mnist_sgd", os.path.join(SPECS, "mnist_sgd.py"))
    tests = os.path.join(os.path.dirname(BIN), "trainstep_tests")
    env = dict(os.environ, TRAINSTEP_ISOLATION_ARTIFACTS=f"{mnist_adadelta},{sgd}")
    p = subprocess.run([tests, "--gtest_filter=Isolation.*"], capture_output=True, text=True,
                       env=env, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    for art in (mnist_adadelta, sgd):
        for threads in (1, 2):
            assert f"isolation: {art}, {threads} threads" in p.stdout, p.stdout
