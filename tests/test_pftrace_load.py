"""The .pftrace loader on files it did not write (built here with the perfetto package's protos) and on bad input."""

from __future__ import annotations

import random

import pytest

import neuron_prof
from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.pftrace.reader import load_pftrace
from neuron_prof.model import TrackKind
from tests._builders import foreign_trace

T0 = 1_790_000_000_000_000_000


def test_foreign_trace_loads_with_inferred_tracks(tmp_path):
    f = tmp_path / "foreign.pftrace"
    f.write_bytes(foreign_trace())
    t = neuron_prof.load(f)  # dispatch by content: not JSON, so the .pftrace reader
    got = sorted((int(t.slices.ts_ns[i]) - T0, int(t.slices.dur_ns[i]), t.slice_name(i)) for i in range(len(t.slices)))
    assert got == [(0, 90, "outer"), (5, 3, "compile mm"), (10, 30, "inner"), (50, 30, "kernel"),
                   (95, 0, "never ends")]  # left open: closed at the last event
    inner = next(i for i in range(len(t.slices)) if t.slice_name(i) == "inner")
    assert t.slice_args(inner) == {"shape": "float32", "dims": [2, 3]}
    assert t.s(t.slices.cat[inner]) == "cpu_op"
    kinds = {tr.name: tr.kind for tr in t.tracks}
    assert kinds == {"main": TrackKind.THREAD, "compile": TrackKind.COMPILE, "hbm used": TrackKind.MEMORY,
                     "queue 0": TrackKind.OTHER}
    assert [p.name for p in t.processes] == ["trainer"] and t.processes[0].pid == 99
    assert sorted(t.counters.value.tolist()) == [float(1 << 20), 2.5e6]
    assert len(t.instants) == 1 and t.s(t.instants.name[0]) == "marker"
    assert len(t.flows) == 1
    assert t.slice_name(int(t.flows.src[0])) == "inner" and t.slice_name(int(t.flows.dst[0])) == "kernel"
    assert t.metadata["source_format"] == "pftrace"


@pytest.mark.parametrize("content", [random.Random(0).randbytes(4096), b"hello, this is not a trace\n", b"\x0a\xff\xff\xff\x0f"])
def test_garbage_is_a_format_error_with_one_line(tmp_path, content):
    f = tmp_path / "bad.pftrace"
    f.write_bytes(content)
    with pytest.raises(TraceFormatError) as ei:
        load_pftrace(f)
    msg = str(ei.value)
    assert "\n" not in msg and str(f) in msg


def test_truncated_own_file_reads_its_whole_packets_as_partial(tmp_path):
    """A .pftrace cut short (a job killed while writing) gives the events of its whole packets and says it is
    partial (`check` exits 3 on it); cut before its first packet ends, it is no trace at all."""
    from neuron_prof.exporters.perfetto import write_pftrace
    from neuron_prof.model import Meta, TraceBuilder

    b = TraceBuilder()
    t = b.thread_track(1, 1, "main")
    for i in range(200):
        b.add_slice(t, T0 + i * 10, 5, f"op{i % 7}", "cpu_op", {"i": i})
    p = write_pftrace(b.build(), tmp_path / "t.pftrace")
    data = p.read_bytes()
    assert Meta.PARTIAL not in load_pftrace(p).metadata
    p.write_bytes(data[: len(data) - 7])
    tr = load_pftrace(p)
    part = tr.metadata[Meta.PARTIAL]
    assert part["truncated"] and "file ends inside a packet" in part["problems"][0]
    assert part["problems"][0] in tr.metadata[Meta.WARNINGS]
    assert len(tr.slices) == 200  # the last packets hold no slice
    p.write_bytes(data[: len(data) * 6 // 10])
    tr = load_pftrace(p)
    assert tr.metadata[Meta.PARTIAL]["truncated"] and 0 < len(tr.slices) < 200
    p.write_bytes(data[:3])
    with pytest.raises(TraceFormatError):
        load_pftrace(p)


def test_missing_file_is_a_load_error(tmp_path):
    with pytest.raises(TraceLoadError, match="no such file"):
        neuron_prof.load(tmp_path / "nope.pftrace")


def test_concatenated_rank_files_read_as_one_trace_with_each_ranks_flows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Per-rank .pftrace files use disjoint sequence ids, uuids and flow ids, so `cat` joins them (Perfetto
    reads that too): every section's processes, tracks and flows come back, flow names decoded per section."""
    from neuron_prof.exporters.perfetto import write_pftrace
    from neuron_prof.loaders.pftrace.reader import load_pftrace
    from neuron_prof.model import Meta, TraceBuilder

    parts = []
    for rank, (cat, name) in enumerate((("ac2g", "launch"), ("fwdbwd", "fwd->bwd"))):
        b = TraceBuilder()
        t = b.thread_track(100 + rank, 1, "main")
        a = b.add_slice(t, 1_000 + rank, 10, "op_a")
        z = b.add_slice(t, 2_000 + rank, 10, "op_b")
        b.add_flow(a, z, 7, cat=cat, name=name)  # the same model id on both ranks
        b.metadata[Meta.RANK] = rank
        p = tmp_path / f"r{rank}.pftrace"
        write_pftrace(b.build(), p)
        parts.append(p.read_bytes())
    both = tmp_path / "both.pftrace"
    both.write_bytes(b"".join(parts))
    tr = load_pftrace(both)
    assert [p.pid for p in tr.processes] == [100, 101]
    flows = sorted((tr.processes[tr.tracks[int(tr.slices.track[s])].process].pid, tr.strings[int(c)],
                    tr.strings[int(n)], int(i)) for s, c, n, i in zip(tr.flows.src, tr.flows.cat, tr.flows.name,
                                                                     tr.flows.flow_id))
    assert flows == [(100, "ac2g", "launch", 7), (101, "fwdbwd", "fwd->bwd", 7)]


def test_unreadable_paths_are_said_as_the_json_loader_says_them(tmp_path):
    """The one rule for an OSError (TraceLoadError.from_os_error), called straight: not through neuron_prof.load."""
    with pytest.raises(TraceLoadError) as missing:
        load_pftrace(tmp_path / "absent.pftrace")
    assert missing.value.problem == "no such file"
    with pytest.raises(TraceLoadError) as folder:
        load_pftrace(tmp_path)
    assert folder.value.problem == "is a directory, not a trace file"


@pytest.mark.parametrize("name", ["rank1.pftrace", "rank1.trace"])
@pytest.mark.parametrize("size", [0x7B, 0x5B])
def test_a_first_packet_of_123_or_91_bytes_is_not_json(tmp_path, name, size):
    """Issue 34: a Perfetto trace starts with 0x0a (a newline to bytes.lstrip) and its first packet's length;
    a packet of 123 bytes ("{") or 91 ("[") made the loader read a rank's .pftrace as damaged JSON, on every
    load. Such a file loads whole and without a warning, by its name and by its content."""
    import warnings

    pad = size - 3  # an unknown field (900, length-delimited): 2 bytes of tag, 1 of length, then its bytes
    first = b"\x0a" + bytes([size]) + b"\xa2\x38" + bytes([pad]) + b"x" * pad
    f = tmp_path / name
    f.write_bytes(first + foreign_trace())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = neuron_prof.load(f)
    assert len(t.slices) == 5 and t.metadata["source_format"] == "pftrace"
