"""Passes over every row of a trace opened from the column cache hold a bounded part of it (issue 35): the args
are decoded and scanned window by window, and the pages of the memory-mapped columns they read are handed back
to the kernel (`Trace.drop_pages`), with the same values as one pass over everything."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_prof.analysis import Context
from neuron_prof.analysis import context as context_mod
from neuron_prof.analysis.context import ABSENT
from neuron_prof.analysis.steps import evaluation
from neuron_prof.loaders import coldir
from neuron_prof.model import Trace, TraceBuilder, number_pattern

KEYS = ("Sequence number", "Input Dims", "Call stack")


def _trace(n: int) -> Trace:
    b = TraceBuilder()
    b.process(1, name="p")
    track = b.thread_track(1, 1, "t")
    for i in range(n):
        args = None if i % 5 == 4 else {"Sequence number": i * 3 - 7 if i % 3 else None,
                                        "Input Dims": [[i, 2]], "pad": "x" * (i % 50), "Call stack": f"a.py({i}): f"}
        if i % 7 == 0 and args:
            args["Fwd thread id"] = i % 2  # a second key on some documents
            args["inner"] = {"Sequence number": 10**6 + i}  # a second hit in the document: the first counts
        b.add_slice(track, 1_000 * i, 10, f"op{i % 4}", "cpu_op", args)
    return b.build()


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    folder = tmp_path_factory.mktemp("cols")
    coldir.write_trace(folder, _trace(6_000), "key")
    return coldir.read_trace(folder)


def _rss_file_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_pick_columns_in_windows_gives_what_one_decode_gives(mapped: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    ascending = mapped.slices.args[::3].astype(np.int64)
    for idx in (np.r_[mapped.slices.args[::-1], mapped.slices.args[:50], -1].astype(np.int64), ascending):
        whole = Context(mapped).pick_columns(idx, KEYS)
        with monkeypatch.context() as m:
            m.setattr(context_mod, "PICK_CHUNK", 97)  # ~60 windows, the last one short
            m.setattr(context_mod, "PICK_SPAN", 5_000)  # ascending rows: also cut every 5 kB of the blob
            ctx = Context(mapped)
            windowed = ctx.pick_columns(idx, KEYS)
        assert windowed == whole
        for k, col in zip(KEYS, windowed, strict=True):
            assert col == [ctx.args(int(i)).get(k, ABSENT) for i in idx.tolist()]
    with monkeypatch.context() as m:
        m.setattr(context_mod, "PICK_CHUNK", 97)
        assert list(Context(mapped).iter_pick_args(idx, KEYS)) == Context(mapped).pick_args(idx, KEYS)
    have = ascending[ascending >= 0]
    assert context_mod._windows(mapped.args, have) == [(0, len(have))]
    monkeypatch.setattr(context_mod, "PICK_SPAN", 5_000)
    spans = context_mod._windows(mapped.args, have)
    _, off = mapped.args.buffers
    assert spans[0][0] == 0 and spans[-1][1] == len(have) and len(spans) > 20
    assert all(a < z and off[have[z - 1]] - off[have[a]] < 5_000 for a, z in spans)


def test_forward_op_numbers_in_windows_give_each_documents_first_hit(mapped: Trace,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The ops that build autograd's graph (a sequence number, no forward thread) and their numbers, read a window
    of the blob at a time, are what a regex reads document by document."""
    blob, off = mapped.args.buffers

    def first(key: bytes, doc: bytes) -> int | None:
        m = number_pattern(key).search(doc)
        return int(m.group(1)) if m else None

    want: dict[int, int] = {}
    for d in range(len(off) - 1):
        doc = bytes(blob[off[d]:off[d + 1]])
        seq, fwd = first(evaluation.SEQ_TEXT, doc), first(evaluation.FWD_TEXT, doc)
        if seq is not None and seq >= 0 and (fwd or 0) <= 0:
            want[d] = seq
    assert want
    for window in (1 << 25, 1000, 1):  # one window; a few documents a window; one document a window
        monkeypatch.setattr(evaluation, "SCAN_WINDOW", window)
        parts = list(evaluation.forward_op_numbers(mapped))
        assert len(parts) > 1 or window == 1 << 25
        docs = np.concatenate([d for d, _ in parts])
        vals = np.concatenate([v for _, v in parts])
        assert (np.diff(docs) > 0).all()
        assert dict(zip(docs.tolist(), vals.tolist(), strict=True)) == want
        probe = np.arange(-1, len(off) + 1)
        got = evaluation.value_at(docs, vals, probe, -99).tolist()
        assert got == [want.get(d, -99) for d in probe.tolist()]


def test_drop_pages_hands_back_what_a_pass_read(tmp_path: Path) -> None:
    folder = tmp_path / "cols"
    folder.mkdir()
    coldir.write_trace(folder, _trace(60_000), "key")
    trace = coldir.read_trace(folder)
    assert isinstance(trace.slices.ts_ns, np.memmap)
    before = _rss_file_kb()
    blob, _ = trace.args.buffers
    touched = int(np.frombuffer(blob, dtype=np.uint8)[::4096].sum()) + int(trace.slices.ts_ns.sum())
    read = _rss_file_kb() - before
    assert touched and read > 3_000  # the args blob (~6 MB) and a column are resident now
    trace.drop_pages()
    assert _rss_file_kb() - before < read / 4
    assert int(trace.slices.ts_ns.sum()) == int(np.arange(60_000).sum() * 1_000)  # read again: the same values
    in_memory = _trace(10)
    in_memory.drop_pages()  # nothing mapped: nothing to do


def test_args_read_row_by_row_keep_a_bounded_cache(mapped: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context_mod, "ARGS_CACHED", 5)
    ctx = Context(mapped)
    idx = mapped.slices.args[:40].tolist()
    first = [ctx.args(int(i)) for i in idx]
    assert 0 < len(ctx._args_cache) <= 5
    assert [ctx.args(int(i)) for i in idx] == first == [mapped.args.get(int(i)) for i in idx]


def test_args_read_row_by_row_keep_a_cache_bounded_in_bytes(mapped: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few documents but long ones (a collective's args): the cache is bounded by their text too."""
    idx = mapped.slices.args[:40].tolist()
    size = max(len(mapped.args.raw(int(i))) for i in idx)
    monkeypatch.setattr(context_mod, "ARGS_CACHED_BYTES", 3 * size)
    ctx = Context(mapped)
    first = [ctx.args(int(i)) for i in idx]
    assert 0 < sum(map(len, ctx._args_cache)) <= 4 * size and len(ctx._args_cache) < len(set(idx))
    assert [ctx.args(int(i)) for i in idx] == first == [mapped.args.get(int(i)) for i in idx]


def test_find_all_in_windows_finds_what_one_scan_finds(mapped: Trace) -> None:
    from neuron_prof.model import ArgsStore

    texts = (b'"Call stack"', b'"pad"', b"xx")  # "xx" repeats back to back: occurrences do not overlap
    blob, off = mapped.args.buffers
    data = bytes(blob)

    def scan(text: bytes) -> list[int]:
        out, at = [], data.find(text)
        while at >= 0:
            out.append(at)
            at = data.find(text, at + len(text))
        return out

    want = np.array([p for t in texts for p in scan(t)], dtype=np.int64)
    assert len(want) > 1000
    for window in (1 << 25, 4099):  # windows that cut texts in two
        assert np.array_equal(mapped.args.find_all(texts, window), want)
        assert np.array_equal(ArgsStore(data, off).find_all(texts, window), want)  # a blob in memory
    # windows of a few bytes, a Python step each: over the first documents that hold every text 3 times
    k = next(k for k in range(64, len(off), 64) if all(data[:off[k]].count(t) >= 3 for t in texts))
    head = data[:off[k]]
    want = np.array([p for t in texts for p in scan(t) if p + len(t) <= len(head)], dtype=np.int64)
    for window in (5, 1):
        assert np.array_equal(ArgsStore(head, off[:k + 1]).find_all(texts, window), want)
    assert len(mapped.args.find_all((), 7)) == 0 and len(ArgsStore.empty().find_all(texts)) == 0


def test_args_read_row_by_row_do_not_keep_a_mapped_blob_resident(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cols"
    folder.mkdir()
    coldir.write_trace(folder, _trace(60_000), "key")
    grew = {}
    for every in (1 << 30, 64):
        trace = coldir.read_trace(folder)
        monkeypatch.setattr(context_mod, "ARGS_READS_HELD", every)
        ctx = Context(trace)
        before = _rss_file_kb()
        for i in trace.slices.args[::7].tolist():
            ctx.args(int(i))
        grew[every] = _rss_file_kb() - before
        trace.drop_pages()
    assert grew[1 << 30] > 2_000 and grew[64] < grew[1 << 30] / 4, grew
