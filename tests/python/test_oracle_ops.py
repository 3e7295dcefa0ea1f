"""The per-op oracle suite: every registered op runs seeded random cases
(tests/python/oracle/cases_*.py) through `trainstep run-program`, plain and
with every pass on, and must match PyTorch eager; bad inputs must fail with
exactly the documented message. An op registered without cases fails here.
"""
import json

import numpy as np
import pytest

from conftest import BIN, run

pytestmark = [pytest.mark.asan]
from oracle import harness

CASES, NEGS = harness.collect()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """Builds every case, runs them all in one run-program call, and keeps
    torch's expected outputs next to ours."""
    d = tmp_path_factory.mktemp("oracle")
    case_path, out_path = str(d / "cases.safetensors"), str(d / "results.safetensors")
    built, expected = [], {}
    for c in CASES + NEGS:
        try:
            fn, ins, exp = harness.build(c, np.random.default_rng(harness.seed_of(c.name)))
        except Exception as e:  # noqa: BLE001 (a broken case fails its op's test only)
            expected[c.name] = e
            continue
        built.append((c.name, fn, ins))
        expected[c.name] = exp
    harness.write_case_file(case_path, built)
    results, tensors = harness.run_cases(BIN, case_path, out_path)
    return case_path, results, tensors, expected


def registered_ops():
    return {o["name"] for o in json.loads(run("ops", "--json").stdout)["ops"]}


def test_every_registered_op_has_oracle_cases():
    have = {c.op for c in CASES}
    missing = sorted(registered_ops() - have)
    assert not missing, ("ops registered without oracle cases (add them to "
                         f"tests/python/oracle/cases_*.py, see its README.md): {missing}")


def test_oracle_cases_name_registered_ops():
    stale = sorted(({c.op for c in CASES} | {c.op for c in NEGS}) - registered_ops())
    assert not stale, f"oracle cases for ops the registry does not have: {stale}"


def _by_op(cases):
    ops = {}
    for c in cases:
        ops.setdefault(c.op, []).append(c)
    return ops


POS, NEG = _by_op(CASES), _by_op(NEGS)


@pytest.mark.parametrize("op", sorted(POS))
def test_op_matches_torch(op, oracle):
    _, results, tensors, expected = oracle
    problems = []
    for c in POS[op]:
        if isinstance(expected[c.name], Exception):
            problems.append(f"{c.name}: cannot build the case: {expected[c.name]}")
            continue
        r = results[c.name]
        if "error" in r:
            problems.append(f"{c.name}: {r['stage']} failed: {r['error']}")
            continue
        for mode in harness.MODES:
            m = r[mode]
            if "error" in m:
                problems.append(f"{c.name} [{mode}]: {m['stage']} failed: {m['error']}")
                continue
            for need in c.expect_ops.get(mode, ()):
                if need not in m["ops"]:
                    problems.append(f"{c.name} [{mode}]: no {need} after the passes: {m['ops']}")
            for k, want in enumerate(expected[c.name]):
                bad = harness.close(tensors[f"{c.name}/{mode}/{k}"], want, c.tol, c.ulp, c.ulp_scale)
                if bad:
                    problems.append(f"{c.name} [{mode}] output {k}: {bad}")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


@pytest.mark.parametrize("op", sorted(NEG))
def test_op_rejects_bad_input(op, oracle):
    case_path, results, _, expected = oracle
    problems = []
    for c in NEG[op]:
        if isinstance(expected[c.name], Exception):
            problems.append(f"{c.name}: cannot build the case: {expected[c.name]}")
            continue
        r = results[c.name]
        err = r.get("error") or next((r[m]["error"] for m in harness.MODES
                                      if "error" in r.get(m, {})), None)
        tail = f"node 'n0' ({c.op}): {c.error}"
        allowed = (tail, f"{case_path}: function '{c.name}': {tail}")
        if err not in allowed:
            problems.append(f"{c.name}: expected error\n    {tail}\n  got\n    {err}")
        if not c.unsupported and c.torch_error is None:
            problems.append(f"{c.name}: torch accepts this input; mark the case unsupported='why'")
    assert not problems, "\n".join(problems)
