"""The first pass (`analysis.overview`) works out the call sites of the few host slices its findings name, not
every host slice's (`Sites._host_of`): the same Sites as the whole table (`host_sites`), the same findings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.analysis import Context, overview, sites_of
from neuron_prof.analysis.sites import callsites as _sites
from neuron_prof.model import Trace
from tests._demo_trace import demo_like_trace


def lazy_matches_full(trace: Trace, monkeypatch: pytest.MonkeyPatch, seed: int = 0) -> int:
    """Every host row's Site asked in small batches of random rows (never building the whole table) equals its
    Site in the whole table; returns the number of host rows."""
    monkeypatch.setattr(_sites, "_LAZY_SHARE", 0)
    monkeypatch.setattr(_sites, "_LAZY_BATCHES", 10**9)
    full = sites_of(Context(trace)).host_sites()
    sites = sites_of(Context(trace))
    rng = np.random.default_rng(seed)
    rows = rng.permutation(full.rows)
    at = 0
    while at < len(rows):
        k = int(rng.integers(1, 40))
        batch = rows[at:at + k].tolist()
        got = sites.of_rows(batch) if k > 1 else [sites.of_row(batch[0])]
        want = [full.of(r) for r in batch]
        assert got == want, (batch, got, want)
        assert [s.function for s in got] == [s.function for s in want]  # not compared by Site's ==
        at += k
    assert sites._full is None  # the lazy path answered every row
    return len(rows)


@pytest.fixture(scope="module")
def training_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """A generated GPU training trace (bench.gen_trace): NCCL kernels, [memory] instants, torch.profiler's
    function-entry call stacks (the backward rule is checked on real captures in test_backward_sites)."""
    from bench.gen_trace import write

    return neuron_prof.load(write(30_000, Path(tmp_path_factory.mktemp("gen")) / "t.json"))


def test_lazy_sites_match_the_whole_table_training(training_trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lazy_matches_full(training_trace, monkeypatch) > 5000
    full = sites_of(Context(training_trace)).host_sites()
    assert any(s.function for s in full.sites)  # torch.profiler's frames (function entry lines)


def test_lazy_sites_match_the_whole_table_kineto(kineto_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lazy_matches_full(neuron_prof.load(kineto_trace), monkeypatch)


def test_lazy_sites_match_the_whole_table_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    lazy_matches_full(demo_like_trace(), monkeypatch)


def test_first_pass_names_the_same_sites_without_the_whole_table(training_trace: Trace) -> None:
    """The overview asks about its collectives' and memory peak's rows alone; its findings and totals are the
    ones it makes over a context whose whole table was built first."""
    ctx = Context(training_trace)
    first = overview(training_trace, ctx).to_dict()
    assert sites_of(ctx)._full is None and "host_sites" not in ctx._memo
    whole = Context(training_trace)
    sites_of(whole).host_sites()
    assert overview(training_trace, whole).to_dict() == first
    kinds = {f["kind"] for f in first["findings"]}
    assert {"collective", "memory_peak"} <= kinds, kinds
    (peak,) = [f for f in first["findings"] if f["kind"] == "memory_peak"]
    assert peak["evidence"]["function"] == "model.py forward", peak  # a host site the first pass worked out
