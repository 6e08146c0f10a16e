"""A trace bigger than the memory a process may use: read in pieces into memory-mapped columns (issue 35).

Each command runs in a subprocess whose memory is capped (RLIMIT_DATA: what it allocates; mapped trace columns
are files, not counted) below what loading the trace in memory needs. Loaded in memory under the cap it must
fail with one line naming the size and the way out; left to choose, the loader must see the cap, stream the
file into the column cache and give the summary an unlimited in-memory run gives."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_prof.loaders.pftrace import _scan as _pf_scan

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 260 << 20
"""Data limit of the streamed runs."""
HELD_LIMIT = 180 << 20
"""Data limit of the in-memory run: well below what the 114 MB trace loaded in memory needs (it passed under
260 MB in one run of four: the data a process reserves moves with its threads' malloc arenas), above what the
CLI needs to start and reach the loader (it fails there at 150 MB too, with the same one line)."""


def _run(args: list[str], env: dict[str, str], limit: int | None) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    code = "import sys; from neuron_prof.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("NEURON_PROF_STREAM", "NEURON_PROF_JSON"))},
           **env}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=120, preexec_fn=cap)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "trace.json"
    subprocess.run([sys.executable, "-m", "bench.gen_trace", "400000", str(path)], cwd=ROOT, check=True,
                   capture_output=True)
    return path


def test_summary_and_check_of_a_trace_bigger_than_the_memory_limit(big: Path, tmp_path: Path) -> None:
    env = {"NEURON_PROF_CACHE_DIR": str(tmp_path / "cache"), "NEURON_PROF_STREAM_PIECE_MB": "4"}
    free = _run(["summary", str(big)], {"NEURON_PROF_CACHE": "0", "NEURON_PROF_STREAM": "0"}, None)
    assert free.returncode == 0, free.stderr
    # the in-memory load does not fit under the cap: one line, the size and the way out, no traceback, for
    # every command; said before the parse (`stream.check_room`), with the compiled scanner too (an allocation
    # failing inside its orjson calls ended the process with SIGSEGV about 1 run in 3 at this cap)
    for cmd in ("summary", "check", "report"):
        held = _run([cmd, str(big), *(["-o", str(tmp_path / "r.html")] if cmd == "report" else [])],
                    {**env, "NEURON_PROF_STREAM": "0"}, HELD_LIMIT)
        assert held.returncode == 2, (cmd, held.returncode, held.stderr)
        line = held.stderr.strip()
        assert "\n" not in line and line.startswith("neuron-prof: error: out of memory"), line
        assert f"{big} is 0.1 GB" in line and "data limited to 0.2 GB" in line and "NEURON_PROF_STREAM=1" in line
        assert "loading it in memory needs about 0.2 GB" in line  # said before the parse
        assert "--max-events N" in line and "--steps A:B" in line  # or capture less
    # left to choose, the loader streams it into the column cache, and the summary is the same
    got = _run(["summary", str(big)], env, LIMIT)
    assert got.returncode == 0, got.stderr
    assert got.stdout == free.stdout
    assert list((tmp_path / "cache").glob("*.nprof/slices.ts_ns"))
    kept = list((tmp_path / "cache").glob("*.nprof/kept.*"))  # what summary kept: check computes it again
    assert kept
    for doc in kept:
        doc.unlink()
    checked = _run(["check", str(big)], env, LIMIT)  # from the memory-mapped columns
    assert checked.returncode == 0, checked.stderr


def _same_events(a, b) -> None:  # type: ignore[no-untyped-def]
    """Same processes, tracks, metadata, and row by row the same names, times, args; the same flows."""
    import numpy as np

    assert a.processes == b.processes and a.tracks == b.tracks and a.metadata == b.metadata
    sa, sb = np.array(a.strings.as_list(), dtype=object), np.array(b.strings.as_list(), dtype=object)
    for tab, cols in (("slices", ("ts_ns", "dur_ns", "track")), ("instants", ("ts_ns", "track"))):
        ta, tb = getattr(a, tab), getattr(b, tab)
        assert len(ta) == len(tb)
        for c in cols:
            assert np.array_equal(getattr(ta, c), getattr(tb, c)), (tab, c)
        assert (sa[ta.name] == sb[tb.name]).all() and (sa[ta.cat] == sb[tb.cat]).all()
        assert [a.args.get(int(i)) for i in ta.args] == [b.args.get(int(i)) for i in tb.args]

    def flows(t):  # type: ignore[no-untyped-def]
        s = np.array(t.strings.as_list(), dtype=object)
        return set(zip(t.flows.src.tolist(), t.flows.dst.tolist(), t.flows.flow_id.tolist(),
                       s[t.flows.cat].tolist(), s[t.flows.name].tolist()))

    assert flows(a) == flows(b) and len(a.flows) == len(b.flows)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_streamed_trace_holds_what_the_in_memory_load_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              name: str) -> None:
    from neuron_prof.loaders import coldir
    from neuron_prof.loaders.json import stream
    from neuron_prof.loaders.json.reader import load_kineto_json

    path = tmp_path / name
    subprocess.run([sys.executable, "-m", "bench.gen_trace", "60000", str(path)], cwd=ROOT, check=True,
                   capture_output=True)
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")  # ~17 MB of JSON: about 17 pieces
    folder = tmp_path / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    assert len(list(folder.iterdir())) == 24  # the columns and head: no temporary column left
    _same_events(load_kineto_json(path), coldir.read_trace(folder))


def test_a_piece_never_ends_inside_a_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Names and args holding the separator between two events ('}, {'): a cut there is found and moved."""
    from neuron_prof.loaders import coldir
    from neuron_prof.loaders.json import stream
    from neuron_prof.loaders.json.reader import load_kineto_json

    pad = "x}, {y" * 40
    events = ",\n".join(f'{{"ph": "X", "name": "op}}, {{{k % 7}", "pid": 1, "tid": 1, "ts": {k}, "dur": 1, '
                        f'"args": {{"s": "{pad}"}}}}' for k in range(12_000))
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + events + '\n], "baseTimeNanoseconds": 1000}')
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")
    folder = tmp_path / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    got = coldir.read_trace(folder)
    assert len(got.slices) == 12_000 and not got.metadata.get("load_warnings")
    _same_events(load_kineto_json(path), got)


@pytest.fixture(scope="module")
def big_pftrace(big: Path) -> Path:
    """The big trace as our exporter writes it (about 31 MB of packets for 400k events)."""
    path = big.with_suffix(".pftrace")
    done = _run(["export", "--format", "pftrace", "-o", str(path), str(big)], {"NEURON_PROF_CACHE": "0"}, None)
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.skipif(not _pf_scan.ENABLED, reason="a .pftrace is read in pieces by the compiled walk only")
def test_a_pftrace_bigger_than_the_memory_limit_is_read_in_pieces(big_pftrace: Path, tmp_path: Path) -> None:
    env = {"NEURON_PROF_CACHE_DIR": str(tmp_path / "cache"), "NEURON_PROF_STREAM_PIECE_MB": "4"}
    free = _run(["summary", "--json", str(big_pftrace)], {"NEURON_PROF_CACHE": "0", "NEURON_PROF_STREAM": "0"}, None)
    assert free.returncode == 0, free.stderr
    # in memory under the cap: one line before the parse (`pftrace.stream.check_room`)
    held = _run(["summary", str(big_pftrace)], {**env, "NEURON_PROF_STREAM": "0"}, HELD_LIMIT)
    assert held.returncode == 2, (held.returncode, held.stderr)
    line = held.stderr.strip()
    assert "\n" not in line and line.startswith("neuron-prof: error: out of memory"), line
    assert f"{big_pftrace} is 31 MB" in line and "loading it in memory needs about 0.1 GB" in line, line
    assert "NEURON_PROF_STREAM=1 reads a JSON or Perfetto trace in pieces" in line
    # left to choose, the loader sees the cap and streams it into the column cache: the same summary
    got = _run(["summary", "--json", str(big_pftrace)], env, HELD_LIMIT)
    assert got.returncode == 0, got.stderr
    assert got.stdout == free.stdout
    assert list((tmp_path / "cache").glob("*.nprof/slices.ts_ns"))
    checked = _run(["check", str(big_pftrace)], env, HELD_LIMIT)  # from the memory-mapped columns
    assert checked.returncode == 0, checked.stderr


def test_every_real_trace_streamed_gives_the_in_memory_summary(kineto_trace: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`NEURON_PROF_STREAM=1` on a small trace: all its columns fit in the writer's buffers, which must reach the
    files before they are mapped (they did not: "mmap length is greater than file size" on 4 of the 9)."""
    from neuron_prof.cli import main

    monkeypatch.setenv("NEURON_PROF_CACHE_DIR", str(tmp_path / "cache"))
    docs = []
    for stream in ("0", "1"):
        monkeypatch.setenv("NEURON_PROF_STREAM", stream)
        monkeypatch.setenv("NEURON_PROF_CACHE", "0" if stream == "0" else "1")
        assert main(["summary", "--json", str(kineto_trace)]) == 0
        docs.append(capsys.readouterr().out)
    assert docs[0] == docs[1]


def test_a_small_trace_streamed_holds_what_the_in_memory_load_holds(tmp_path: Path) -> None:
    """One piece, without flows: its columns smaller than a write buffer are mapped all the same."""
    from neuron_prof.loaders import coldir
    from neuron_prof.loaders.json import stream
    from neuron_prof.loaders.json.reader import load_kineto_json

    events = [{"ph": "X", "name": f"op{k % 3}", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 10.5 + k, "dur": 0.5,
               "args": {"k": k}} for k in range(50)]
    events += [{"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 12, "s": "t"},
               {"ph": "C", "name": "mem", "pid": 1, "ts": 13, "args": {"bytes": 7}}]
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1_000_000}))
    folder = tmp_path / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    got = coldir.read_trace(folder)
    assert len(got.slices) == 50 and len(got.instants) == 1 and len(got.counters) == 1
    _same_events(load_kineto_json(path), got)
    assert got.counters.ts_ns.tolist() == load_kineto_json(path).counters.ts_ns.tolist() == [1_013_000]


def test_columns_written_by_a_thread_are_the_columns_given(tmp_path: Path) -> None:
    """More than the thread may hold unwritten (it waits), read back between appends and after close."""
    import numpy as np

    from neuron_prof.loaders import coldir

    w = coldir.ColumnWriter(tmp_path, background=True)
    parts = [np.arange(k, k + (3 << 20), dtype=np.int64) for k in range(0, 24 << 20, 3 << 20)]  # 8 x 24 MB
    for a in parts[:4]:
        w.append("c", a)
        w.append("b", a[:5].tobytes())
    assert np.array_equal(w.mapped("c"), np.concatenate(parts[:4]))
    for a in parts[4:]:
        w.append("c", a)
    w.close({})
    cols = coldir.read_head(tmp_path)["columns"]
    assert cols["c"][1] == 24 << 20 and cols["b"][1] == 4 * 40
    assert np.array_equal(np.fromfile(tmp_path / "c", np.int64), np.concatenate(parts))
    assert (tmp_path / "b").read_bytes() == b"".join(a[:5].tobytes() for a in parts[:4])
