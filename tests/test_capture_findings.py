"""A capture writes its findings into trace.json and trace.pftrace, so every viewer shows them."""

from __future__ import annotations

import torch
import torch._dynamo

import neuron_prof
from neuron_prof.analysis import analyze


def _f(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 2


def test_findings_written_into_both_files(tmp_path) -> None:
    torch._dynamo.reset()
    cf = torch.compile(_f, dynamic=False, backend="eager")
    out = tmp_path / "trace.json"
    with neuron_prof.profile(out, quiet=True, with_stack=False, profile_memory=False) as p:
        for n in range(1, 6):
            cf(torch.randn(n, 8))
            p.step()
    assert p.trace is not None and p.trace.findings
    kinds = {f["kind"] for f in p.trace.findings}
    by_kind = {f["kind"]: f for f in p.trace.findings}
    # five sizes, dynamic=False: one first compile, then a recompile for each of the four new sizes
    assert {"first_call_compile", "recompile", "shape_churn"} <= kinds, kinds
    assert by_kind["first_call_compile"]["count"] == 1 and by_kind["recompile"]["count"] == 4
    assert by_kind["shape_churn"]["count"] == 5 and by_kind["shape_churn"]["evidence"]["values"] == [1, 2, 3, 4, 5]
    for path in (out, tmp_path / "trace.pftrace"):
        loaded = neuron_prof.load(path)
        assert [f["kind"] for f in loaded.findings] == [f["kind"] for f in p.trace.findings]
        assert [f["cost_ns"] for f in loaded.findings] == [f["cost_ns"] for f in p.trace.findings]
    # the stored findings are what the analysis says of the written trace
    again = analyze(neuron_prof.load(out))
    assert {f.kind for f in again} == kinds
