"""A .pftrace read in pieces into the column folder (`neuron_prof.loaders.pftrace.stream`) is the Trace the
whole-file read gives: our exporter's files from every real trace, foreign files with interned data, cleared
incremental state and BEGIN/END apart, merged ranks and cut files, with pieces and row steps small enough that
every packet and every table step crosses a boundary; the CLI's summary the same either way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.loaders import coldir, spill
from neuron_prof.loaders.pftrace import _scan
from neuron_prof.loaders.pftrace import stream as pf_stream
from neuron_prof.loaders.pftrace.reader import load_pftrace
from neuron_prof.merge import merge_traces
from neuron_prof.model import Meta, Trace
from tests._builders import foreign_trace
from tests._json_odd import assert_identical
from tests.conftest import kineto_traces, shared_kineto
from tests.test_pftrace_scan import _odd_packets

pytestmark = pytest.mark.skipif(_scan._pfscan is None, reason="the compiled scanner is not built")


def streamed(path: Path, folder: Path, piece: int) -> Trace:
    folder.mkdir()
    pf_stream.ingest(path, folder, "key", piece=piece)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(("slices", "instants", "counters",
                                                                              "flows"))) == [
        "args.bin", "args_off", "head", "str_len", "strings.bin"]  # no raw event column left
    return coldir.read_trace(folder)


def same(whole: Trace, got: Trace) -> None:
    """The same Trace to the byte: columns with their dtypes, args, strings, tracks, metadata, findings."""
    assert_identical(whole, got)
    assert whole.processes == got.processes and whole.tracks == got.tracks and whole.findings == got.findings
    for t, cls in coldir.TABLES.items():
        for c in cls.DTYPES:
            assert getattr(getattr(whole, t), c).dtype == getattr(getattr(got, t), c).dtype, (t, c)


@pytest.mark.parametrize("src", kineto_traces() or [pytest.param(None, marks=pytest.mark.skip("no ../shared"))],
                         ids=lambda p: p.name if p else "none")
def test_exported_real_traces_same_in_pieces(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write_trace(neuron_prof.load(src), tmp_path / "t.pftrace")
    monkeypatch.setattr(pf_stream, "_ROWS", 97)  # table steps end inside BEGIN/END pairs too
    monkeypatch.setattr(spill, "WINDOW", 53)  # flow endpoints paired in windows of ids
    same(load_pftrace(p), streamed(p, tmp_path / "cols", piece=2000))  # a piece every 20-odd packets


@pytest.mark.parametrize("piece", [1, 64, 300])
@pytest.mark.parametrize("rows", [1, 3])
def test_foreign_packets_same_in_pieces(piece: int, rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interned names, categories and annotations carried across pieces, state cleared with and without
    sequence flags, BEGIN/END apart (the pairing walk), unknown tracks, a late descriptor, times past int64."""
    monkeypatch.setattr(pf_stream, "_ROWS", rows)
    for name, data in (("foreign", foreign_trace()), ("odd", _odd_packets())):
        p = tmp_path / f"{name}.pftrace"
        p.write_bytes(data)
        whole = load_pftrace(p)
        got = streamed(p, tmp_path / f"{name}-cols", piece)
        same(whole, got)
        assert len(got.slices) and len(got.flows)
    assert any("beyond int64" in w for w in got.metadata[Meta.WARNINGS])


def test_merged_ranks_and_cut_files_same_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = [neuron_prof.load(shared_kineto(f"trace_filter_sampled_rank-{r}.json.gz")) for r in (0, 1)]
    for r, t in enumerate(real):
        t.metadata[Meta.RANK] = r
    merged, _ = merge_traces(real)
    p = write_trace(merged, tmp_path / "merged.pftrace")
    monkeypatch.setattr(pf_stream, "_ROWS", 1000)
    monkeypatch.setattr(spill, "WINDOW", 40)  # windows of flow ids: the two ranks' id schemes named in order
    same(load_pftrace(p), streamed(p, tmp_path / "m", piece=5000))
    data = p.read_bytes()
    for k, cut in enumerate((len(data) - 3, len(data) // 3)):  # cut inside a packet: whole packets, said partial
        p.write_bytes(data[:cut])
        whole = load_pftrace(p)
        got = streamed(p, tmp_path / f"cut{k}", piece=5000)
        same(whole, got)
        assert got.metadata[Meta.PARTIAL]["truncated"] and got.metadata[Meta.PARTIAL]["bytes_read"] < cut


def test_not_a_trace_in_pieces_is_the_same_format_error(tmp_path: Path) -> None:
    from neuron_prof.errors import TraceFormatError

    for k, data in enumerate((b"\x0f" * 5000, b"\x0a\xff\xff\xff\x0f", b"\x0a\x05abc")):
        p = tmp_path / f"bad{k}.pftrace"
        p.write_bytes(data)
        with pytest.raises(TraceFormatError) as whole:
            load_pftrace(p)
        folder = tmp_path / f"c{k}"
        folder.mkdir()
        with pytest.raises(TraceFormatError) as got:
            pf_stream.ingest(p, folder, "key", piece=2)
        assert str(got.value) == str(whole.value)


def test_summary_json_same_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    p = write_trace(neuron_prof.load(shared_kineto("nccl_parser_config_nccl_data.json.gz")), tmp_path / "t.pftrace")
    assert p.stat().st_size > 2 << 20  # three pieces of 1 MB
    monkeypatch.setenv("NEURON_PROF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")
    out = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("NEURON_PROF_STREAM", mode)
        assert main(["summary", "--json", str(p)]) == 0
        out[mode] = json.loads(capsys.readouterr().out)
    assert out["0"] == out["1"]
    assert list((tmp_path / "cache").glob("*.nprof/slices.ts_ns"))  # the streamed read went to the cache
    t = neuron_prof.load(p)  # and is read from it, memory-mapped
    assert isinstance(t.slices.ts_ns, np.memmap)
