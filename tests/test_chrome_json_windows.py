"""The Chrome JSON writer over a big trace (issue 35 item 1): chunks of rows, each chunk's args documents copied
out of the blob a span at a time and its flows' ends read a window of the table at a time, the mapped pages let
go after each. With chunks, windows and spans small enough that every boundary is crossed, from memory and from
the column cache, the file is byte for byte the one written in one chunk."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.exporters import _reads as reads
from neuron_prof.exporters import chrome_json
from neuron_prof.exporters.chrome_json import write_chrome_json
from neuron_prof.loaders import load
from neuron_prof.model import Trace, windows
from tests._column_folder import mapped_copy
from tests.test_pftrace_windows import BIG
from tests.test_pftrace_windows import _trace as windowed_trace


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, bytes]:
    """The trace (tracks interleaved, args of many shapes, flows) and its file written in one chunk and window."""
    trace = windowed_trace()
    mp = pytest.MonkeyPatch()
    mp.setattr(chrome_json, "CHUNK", BIG)
    mp.setattr(windows, "ROW_WINDOW", BIG)
    mp.setattr(reads, "ARGS_SPAN", BIG)
    try:
        path = tmp_path_factory.mktemp("whole") / "t.json"
        write_chrome_json(trace, path)
    finally:
        mp.undo()
    return trace, path.read_bytes()


def test_the_file_reads_back(whole: tuple[Trace, bytes], tmp_path: Path) -> None:
    trace, data = whole
    (tmp_path / "t.json").write_bytes(data)
    back = load(tmp_path / "t.json")
    assert np.array_equal(back.slices.ts_ns, trace.slices.ts_ns) and len(back.flows) == len(trace.flows) > 100
    assert back.slice_args(5) == trace.slice_args(5)


@pytest.mark.parametrize(("chunk", "row_window", "span"), [(7, 5, 40), (64, 300, 300), (1000, 64, 1 << 12)])
def test_small_chunks_write_the_same_bytes(whole: tuple[Trace, bytes], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, chunk: int, row_window: int,
                                           span: int) -> None:
    trace, want = whole
    monkeypatch.setattr(chrome_json, "CHUNK", chunk)
    monkeypatch.setattr(windows, "ROW_WINDOW", row_window)
    monkeypatch.setattr(reads, "ARGS_SPAN", span)
    write_chrome_json(trace, tmp_path / "t.json")
    assert (tmp_path / "t.json").read_bytes() == want


def test_from_the_column_cache(whole: tuple[Trace, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace from a column folder (mapped columns and blob, pages let go after each chunk and window)."""
    trace, want = whole
    mapped = mapped_copy(trace, tmp_path / "cols")
    monkeypatch.setattr(chrome_json, "CHUNK", 50)
    monkeypatch.setattr(windows, "ROW_WINDOW", 20)
    monkeypatch.setattr(reads, "ARGS_SPAN", 200)
    write_chrome_json(mapped, tmp_path / "t.json.gz")
    assert gzip.decompress((tmp_path / "t.json.gz").read_bytes()) == want
