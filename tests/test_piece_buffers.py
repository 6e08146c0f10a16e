"""The streamed JSON load reads each piece into the buffer of a piece already parsed and hands the text it parsed
back to the kernel (`_pieces._Source`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_prof.loaders.json._pieces import SPARE, _Source


def _source(tmp_path: Path) -> _Source:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [' + b" " * 4000 + b"]}")
    return _Source(open(path, "rb"), path, [])


def test_a_piece_is_read_into_a_buffer_given_back_at_the_size_it_asks(tmp_path: Path) -> None:
    src = _source(tmp_path)
    first, _ = src.read(0, 1000)
    src.give_back(first)
    again, end = src.read(16, 100)  # shorter: the same memory, cut to the piece
    assert again is first and len(again) == 101 and not end
    assert bytes(again) == b"[[" + b" " * 99
    src.give_back(again)
    longer, _ = src.read(0, 3000)  # longer: grown, its text the file's
    assert longer is first and len(longer) == 3001 and bytes(longer[1:18]) == b'{"traceEvents": ['
    src.f.close()


def test_a_buffer_something_still_views_is_never_written_into(tmp_path: Path) -> None:
    src = _source(tmp_path)
    held, _ = src.read(0, 1000)
    view = memoryview(held)  # a parse that kept a view of its text (a numpy array over it would do the same)
    src.give_back(held)
    other, _ = src.read(0, 10)
    assert other is not held and view[1:4] == b'{"t'
    view.release()
    for _ in range(SPARE + 3):
        src.give_back(bytearray(8))
    assert len(src.spare) == SPARE
    src.f.close()


def test_a_streamed_load_reads_its_pieces_into_a_few_buffers(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.gen_trace import write
    from neuron_prof.loaders.json import stream

    path = tmp_path / "t.json"
    write(20_000, path)  # about 5.5 MB: 5 pieces of 1 MB
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")
    made: list[bytearray] = []  # held: a buffer freed cannot pass for a new one at the same address
    buffer = _Source.buffer
    monkeypatch.setattr(_Source, "buffer", lambda self, size: made.append(got := buffer(self, size)) or got)
    folder = tmp_path / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    assert len(made) >= 6 and len({id(b) for b in made}) <= 3  # the head, then each piece into one of two or three


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise (not Linux)")
def test_the_text_parsed_leaves_the_page_cache_once_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each piece's text, once cut and parsed, is advised out of the page cache, the last up to the end: the ranges
    follow each other from 0 to the file's end (a read-once trace does not push the column cache out)."""
    from bench.gen_trace import write
    from neuron_prof.loaders.json import stream

    path = tmp_path / "t.json"
    write(20_000, path)
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")
    advised: list[tuple[int, int, int]] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: advised.append((off, n, advice)))
    folder = tmp_path / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    assert len(advised) >= 5 and {a for _, _, a in advised} == {os.POSIX_FADV_DONTNEED}
    assert advised[0][0] == 0 and all(o + n == nxt for (o, n, _), (nxt, _, _) in zip(advised, advised[1:]))
    assert advised[-1][0] + advised[-1][1] == path.stat().st_size
