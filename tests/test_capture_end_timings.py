"""The end of a capture says what its exact-site walk and stack rewrite cost (issue 24 item 3: `bench capture`
reads them; the numbers are CPU time of the thread doing them, part of the conversion's `parse`)."""

from __future__ import annotations

from pathlib import Path

import torch

import neuron_prof


def test_walk_and_rewrite_times_are_in_the_trace(tmp_path: Path) -> None:
    lin = torch.nn.Linear(16, 16)
    with neuron_prof.profile(tmp_path / "t.json", quiet=True, probes=[]) as s:
        for _ in range(3):
            lin(torch.randn(4, 16)).sum().backward()
            s.step()
    md = s.trace.metadata
    t = md["capture_timings_ns"]
    assert md.get("stack_lines") == "exact"  # the walk ran and its stacks were written
    assert 0 < t["sites_cpu"] and 0 < t["rewrite_cpu"]
    assert t["sites_cpu"] + t["rewrite_cpu"] <= t["parse"] + t["export"]
