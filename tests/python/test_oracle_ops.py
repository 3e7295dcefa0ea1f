"""The per-op oracle suite: every registered op runs seeded random cases
(tests/python/oracle/cases_*.py) through `trainstep run-program`, plain and
with every pass on, and must match PyTorch eager; bad inputs must fail with
exactly the documented message. An op registered without cases fails here.
"""
import json

import numpy as np
import pytest
import torch

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
        if not harness.runs_here(c):
            continue
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


# Ops that take bfloat16 but need no bfloat16 case of their own, and why.
BF16_EXEMPT = {
    "trainstep.philox_uniform.default": "draws float32 only; dropout casts its mask",
    "trainstep.philox_normal.default": "draws float32 only",
}


def _has_bf16(case):
    """A case with a bfloat16 input tensor or a bfloat16 dtype attr."""
    def bf16(v):
        if isinstance(v, (list, tuple)):
            return any(bf16(x) for x in v)
        return getattr(v, "dtype", None) in ("bfloat16", torch.bfloat16)
    return (any(bf16(v) for v in case.program.inputs.values()) or
            any(n.attrs.get("dtype") == "bfloat16" for n in case.program.nodes))


def registered_bf16_ops():
    return {o["name"] for o in json.loads(run("ops", "--json").stdout)["ops"] if o["bfloat16"]}


def test_every_bfloat16_op_has_bfloat16_oracle_cases():
    """Every op that takes bfloat16 is checked against torch's bfloat16 result
    (an op counts where it is the case's op, or a fused op the passes must
    make from it, expect_ops)."""
    have = set()
    for c in CASES:
        if _has_bf16(c):
            have.add(c.op)
            for ops in (c.expect_ops or {}).values():
                have.update(ops)
    missing = sorted(registered_bf16_ops() - have - set(BF16_EXEMPT))
    assert not missing, f"ops taking bfloat16 without a bfloat16 oracle case: {missing}"


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
    here = [c for c in POS[op] if harness.runs_here(c)]
    if not here:
        pytest.skip(f"{op}: its cases need torch >= {min(c.min_torch for c in POS[op])}")
    for c in here:
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
