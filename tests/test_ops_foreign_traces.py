"""Op accounting on the real Kineto traces of other machines (../shared/traces/kineto): what a user's own
GPU/AMD/MTIA/CPU trace shows as its top ops."""

from __future__ import annotations

from pathlib import Path

from neuron_prof.analysis import op_table
from neuron_prof.loaders import load


def test_the_profilers_own_window_is_not_an_op(kineto_trace: Path) -> None:
    t = op_table(load(str(kineto_trace)))
    names = [str(n) for n in t.name]
    assert not [n for n in names if n.startswith("PyTorch Profiler (")], "Kineto's capture span listed as an op"
    # every host entry's self time fits in its total (a call's self time is part of it)
    host = t.where == "host"
    assert (t.self_ns[host] <= t.total_ns[host]).all()
