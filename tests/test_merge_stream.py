"""The streaming merge (`neuron-prof merge`): one rank in memory at a time, the same result as merging in memory."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neuron_prof.cli import main
from neuron_prof.errors import UsageError
from neuron_prof.exporters import write_trace
from neuron_prof.exporters.merged import write_merged
from neuron_prof.loaders import load
from neuron_prof.merge import CROSS_RANK_FLOW_BASE, StreamingMerge, merge_traces, rank_of
from neuron_prof.model import Trace
from tests._merge_ranks import SKEW
from tests._merge_ranks import rank_with as _rank
from tests.conftest import pftrace_check


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three ranks on disk, given out of rank order: rank 1 late (compiling) and 5 s ahead, rank 2 5 s behind."""
    d = tmp_path_factory.mktemp("ranks")
    out = []
    for r, kw in ((2, {"skew": -SKEW}), (0, {}), (1, {"skew": SKEW, "late_compile": True, "jitter": 20_000})):
        p = d / f"t.rank{r}.json"
        write_trace(_rank(r, **kw), p)
        out.append(p)
    return out


def _canon(t: Trace) -> tuple[Any, ...]:
    """A trace as sorted plain values: equal for equal traces whatever the row order."""
    s = t.slices

    def where(track: int) -> tuple[Any, ...]:
        tr = t.tracks[track]
        return t.processes[tr.process].pid, tr.name, tr.kind

    rows = [(int(s.ts_ns[i]), int(s.dur_ns[i]), where(int(s.track[i])), t.strings[int(s.name[i])],
             t.strings[int(s.cat[i])], sorted(t.slice_args(i).items())) for i in range(len(s))]
    flows = sorted((rows[a], rows[b], t.strings[int(c)], t.strings[int(n)])
                   for a, b, c, n in zip(t.flows.src, t.flows.dst, t.flows.cat, t.flows.name))
    counters = sorted(zip(t.counters.ts_ns.tolist(), t.counters.value.tolist(),
                          [where(int(x)) for x in t.counters.track]))
    procs = [(p.pid, p.name, p.rank, p.kind) for p in t.processes]
    tracks = [(x.name, x.kind, x.tid, t.processes[x.process].pid) for x in t.tracks]
    return sorted(rows, key=repr), flows, counters, procs, tracks


@pytest.mark.parametrize("name", ["merged.json", "merged.json.gz", "merged.pftrace"])
def test_streaming_equals_in_memory(rank_files: list[Path], tmp_path: Path, name: str) -> None:
    # GIVEN the same ranks merged in memory and written, and merged rank by rank straight into the file
    ref, al = merge_traces([load(p) for p in rank_files])
    write_trace(ref, tmp_path / f"ref.{name}")
    m = StreamingMerge(rank_files, load=load, rank_of=rank_of)
    write_merged(m, tmp_path / name)
    got, want = load(tmp_path / name), load(tmp_path / f"ref.{name}")
    # THEN both files hold the same events, processes, tracks and flows
    assert _canon(got) == _canon(want)
    if name.endswith((".json", ".gz")):  # JSON keeps row order: the very same tables
        assert np.array_equal(got.slices.ts_ns, ref.slices.ts_ns)
        assert sorted(zip(got.flows.src.tolist(), got.flows.dst.tolist())) == sorted(
            zip(want.flows.src.tolist(), want.flows.dst.tolist()))
    # processes come in rank order whatever the order on the command line
    assert [p.rank for p in got.processes] == [0, 1, 2]
    assert got.metadata["alignment"] == want.metadata["alignment"] == al.to_dict()
    # 6 collectives x 2 other ranks, linked from rank 0
    cross = got.flows.flow_id >= CROSS_RANK_FLOW_BASE if name.endswith("pftrace") else \
        np.array([got.strings[int(c)] == "neuron_prof.collective" for c in got.flows.cat])
    assert int(cross.sum()) == 12
    src_rank = {got.processes[got.tracks[int(got.slices.track[r])].process].rank for r in got.flows.src[cross]}
    assert src_rank == {0}
    # and the findings: each rank's own plus the straggler, whose cause was read while rank 1 was loaded
    kinds = [f["kind"] for f in got.findings]
    assert "straggler" in kinds and "first_call_compile" in kinds
    [st] = [f for f in got.findings if f["kind"] == "straggler"]
    assert st["rank"] == 1 and st["call_site"] == "train.py:42" and "compile stall" in st["title"]
    if name.endswith("pftrace"):
        assert pftrace_check(tmp_path / name).returncode == 0


def test_one_rank_in_memory_at_a_time(rank_files: list[Path], tmp_path: Path) -> None:
    """Memory grows with the largest rank, not the sum: no Trace is alive when the next rank is read."""
    alive_at_load: list[int] = []

    def counting_load(p: Path) -> Trace:
        gc.collect()
        alive_at_load.append(sum(type(o) is Trace for o in gc.get_objects()))
        return load(p)

    for name in ("m.pftrace", "m.json"):
        alive_at_load.clear()
        write_merged(StreamingMerge(rank_files, load=counting_load, rank_of=rank_of), tmp_path / name)
        # two passes over three ranks; each read finds no other rank's trace (nor its aligned copy) alive
        assert alive_at_load == [0] * 6


def test_input_changed_between_passes_is_refused(rank_files: list[Path], tmp_path: Path) -> None:
    calls: list[Path] = []

    def load_then_shrink(p: Path) -> Trace:
        t = load(p)
        calls.append(p)
        if len(calls) > 3:  # the second pass sees fewer slices than the first
            t = t.replace(slices=t.slices.take(np.arange(len(t.slices) - 1)))
        return t

    m = StreamingMerge(rank_files, load=load_then_shrink, rank_of=rank_of)
    with pytest.raises(UsageError, match="changed while being merged"):
        write_merged(m, tmp_path / "m.pftrace")
    assert not list(tmp_path.iterdir())  # no half file


def test_merge_cli_streams_to_json_and_names_straggler(rank_files: list[Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "merged.json.gz"
    assert main(["merge", *map(str, rank_files), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "merged 3 rank(s)" in text and "(42 slices)" in text
    assert "straggler: rank 1 arrives last at 6 collective(s)" in text
    merged = load(out)
    assert sorted({p.rank for p in merged.processes}) == [0, 1, 2]


def test_split_ranks_gives_back_each_rank(rank_files: list[Path], tmp_path: Path) -> None:
    from neuron_prof.model import split_ranks

    out = tmp_path / "m.pftrace"
    write_merged(StreamingMerge(rank_files, load=load, rank_of=rank_of), out)
    merged = load(out)
    parts = split_ranks(merged)
    assert list(parts) == [0, 1, 2]
    for r, part in parts.items():
        alone = load(next(p for p in rank_files if f"rank{r}" in p.name))
        assert part.rank == r and len(part.slices) == len(alone.slices)
        # same names and durations as the rank's own file; times moved by the alignment only
        assert sorted(part.strings[int(n)] for n in part.slices.name) == sorted(
            alone.strings[int(n)] for n in alone.slices.name)
        assert sorted(part.slices.dur_ns.tolist()) == sorted(alone.slices.dur_ns.tolist())
        assert {p.rank for p in part.processes} == {r}
        assert all(f.get("rank") == r for f in part.findings)
        assert not len(part.flows)  # the cross-rank flows have their other end elsewhere
    assert split_ranks(parts[0]) == {}


async def test_tui_opens_merged_file_with_one_row_per_rank(rank_files: list[Path], tmp_path: Path) -> None:
    from neuron_prof.tui.app import NeuronProfApp
    from tests._tui_pilot import SIZE, ready, screen_text, table

    out = tmp_path / "merged.pftrace"
    assert main(["merge", *map(str, rank_files), "-o", str(out)]) == 0
    app = NeuronProfApp([out])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("8")
        await pilot.pause()
        assert table(app).visible_text("rank") == ["0", "1", "2"]
        # rank 1's overview leads with its late arrivals and their cause
        t = table(app)
        t.move_to(1)
        await pilot.press("enter")
        for _ in range(3):
            await pilot.pause()
        assert app.current_mode == "overview" and app.data.rank.trace.rank == 1
        assert "rank 1 arrives last at 6 collective(s)" in screen_text(app)
        await pilot.press("7")
        await pilot.pause()
        assert sorted(set(table(app).visible_text("rank"))) == ["0", "1", "2"]


def test_progress_names_each_pass_and_file(rank_files: list[Path]) -> None:
    import io

    from rich.console import Console

    from neuron_prof.cli._progress import steps

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    seen: list[str] = []
    with steps(2 * len(rank_files), console) as step:
        def on_rank(phase: str, i: int) -> None:
            step(f"{phase} {rank_files[i].name}")
            seen.append(f"{phase} {rank_files[i].name}")

        m = StreamingMerge(rank_files, load=load, rank_of=rank_of, on_rank=on_rank)
        for _ in m.segments():
            pass
    # pass 1 in the order given, pass 2 in rank order
    assert seen == [f"read {p.name}" for p in rank_files] + [f"write t.rank{r}.json" for r in (0, 1, 2)]
    assert "t.rank" in buf.getvalue()


@pytest.mark.parametrize("name", ["m.json", "m.pftrace"])
def test_ranks_from_the_column_cache_write_the_same_bytes(rank_files: list[Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Ranks opened from column folders (big traces: mapped columns) get their shifted timestamps and flow ids in
    mapped files written a window at a time; small windows and mapped arrays give the file merged in memory."""
    from neuron_prof.analysis import spill
    from neuron_prof.loaders.coldir import read_trace
    from neuron_prof.loaders.coldir import write_trace as write_columns
    from neuron_prof.merge import rank_trace
    from neuron_prof.model import windows

    folders = {}
    for p in rank_files:
        folders[p] = tmp_path / p.stem
        folders[p].mkdir()
        write_columns(folders[p], load(p), "k")
    write_merged(StreamingMerge(rank_files, load=load, rank_of=rank_of), tmp_path / f"ref.{name}")
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    monkeypatch.setattr(windows, "ROW_WINDOW", 7)
    shifted = rank_trace(read_trace(folders[rank_files[2]]), 1, 123)
    assert isinstance(shifted.slices.ts_ns, np.memmap) and len(shifted.slices) > 2 * windows.ROW_WINDOW
    write_merged(StreamingMerge(rank_files, load=lambda p: read_trace(folders[p]), rank_of=rank_of), tmp_path / name)
    assert (tmp_path / name).read_bytes() == (tmp_path / f"ref.{name}").read_bytes()
