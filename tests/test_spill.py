"""The arrays analyses share, moved to mapped files for a big trace from the column cache (issue 35 item 1):
the summary is the same, the arrays are mapped (not in the process's memory), a trace in memory keeps its own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.gen_trace import write
from neuron_prof.analysis import spill
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.rows import device_work_nesting
from neuron_prof.analysis.ops import op_table
from neuron_prof.analysis.pipeline import report
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.loaders import load
from neuron_prof.model import Trace
from tests._column_folder import mapped_copy


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Trace]:
    """(in memory, from a column folder) of one generated trace."""
    tmp = tmp_path_factory.mktemp("spill")
    held = load(write(30_000, tmp / "t.json"))
    return held, mapped_copy(held, tmp / "cols")


def _doc(trace: Trace, ctx: Context) -> str:
    return json.dumps(report(trace, context=ctx).to_dict(), sort_keys=True, default=str)


def test_spilled_arrays_give_the_same_summary(traces: tuple[Trace, Trace], monkeypatch: pytest.MonkeyPatch) -> None:
    held, mapped = traces
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    trims: list[int] = []
    trim = spill.trim_heap
    monkeypatch.setattr(spill, "trim_heap", lambda: (trims.append(1), trim())[1])
    plain = Context(held)
    ctx = Context(mapped)
    assert _doc(mapped, ctx) == _doc(held, plain)
    assert len(trims) >= 10  # the freed heap handed back between the analyses of a spilled trace, only there
    n = len(trims)
    plain.drop_pages()
    assert len(trims) == n
    # the shared arrays lie in mapped files, read-only; the in-memory trace's do not
    nest, ops = host_nesting(ctx), op_table(mapped, ctx)
    for a in (nest.rows, nest.parent, nest.self_ns, ops.call_row, ops.call_self_ns, device_work_nesting(ctx).rows):
        assert len(a) and spill._mapped(a) and not a.flags.writeable
    assert not spill._mapped(host_nesting(plain).rows)
    np.testing.assert_array_equal(nest.parent, host_nesting(plain).parent)
    ctx.drop_pages()  # pages handed back: the values come back from the files
    np.testing.assert_array_equal(op_table(mapped, ctx).call_row, op_table(held, plain).call_row)


def test_a_small_trace_keeps_its_arrays_in_memory(traces: tuple[Trace, Trace]) -> None:
    held, mapped = traces
    assert len(mapped.slices) < spill.SPILL_ROWS
    assert not spill._mapped(host_nesting(Context(mapped)).rows)


def test_a_folder_it_cannot_write_keeps_the_arrays_in_memory(traces: tuple[Trace, Trace],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    held, mapped = traces
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    ctx = Context(mapped)
    ctx._spill.folder = Path("/nonexistent/neuron-prof-spill")  # as a read-only or vanished cache folder
    rows = host_nesting(ctx).rows
    assert len(rows) and not spill._mapped(rows)
    np.testing.assert_array_equal(rows, host_nesting(Context(held)).rows)


TRIM_PROBE = """
import ctypes, sys
from neuron_prof.analysis.spill import trim_heap

def rss_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(64 << 10) for _ in range(3000)]  # 192 MB from the heap, under glibc's mmap threshold
for b in blocks:
    ctypes.memset(b, 1, 64 << 10)
for b in blocks[:-1]:
    libc.free(b)  # the last block pins the heap's top: the heap cannot shrink from its end
held = rss_kb()
trim_heap() if sys.argv[1] == "trim" else None
print(held - rss_kb())
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists() or spill._glibc() is None, reason="glibc on Linux only")
def test_trim_heap_hands_freed_heap_back_under_a_live_top() -> None:
    """Between analyses the freed temporaries go back to the kernel (`trim_heap`), even below a live block at the
    heap's top, which ordinary trimming from the end cannot release."""
    import subprocess
    import sys

    def freed_mb(how: str) -> float:
        out = subprocess.run([sys.executable, "-c", TRIM_PROBE, how], capture_output=True, text=True, check=True)
        return int(out.stdout) / 1024

    assert freed_mb("none") < 20  # without it the freed 190 MB stay resident
    assert freed_mb("trim") > 150


def test_a_result_written_a_window_at_a_time_lies_in_a_mapped_file(traces: tuple[Trace, Trace],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`Context.empty` (what the host nesting writes its arrays into, never whole in memory): a mapped file;
    the values written survive their pages being handed back, and the shared result is read-only."""
    held, mapped = traces
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    ctx = Context(mapped)
    a = ctx.empty(1000, np.int32)
    assert spill._mapped(a) and a.flags.writeable and not a.any()
    a[:] = np.arange(1000)
    ctx.drop_pages()
    kept = ctx.memo("written", lambda: a)
    assert spill._mapped(kept) and not kept.flags.writeable
    np.testing.assert_array_equal(kept, np.arange(1000))
    assert not spill._mapped(Context(held).empty(1000, np.int32))  # a trace in memory: an ordinary array


def test_a_shared_result_of_a_spilled_trace_is_built_and_kept_with_the_pages_handed_back(
        traces: tuple[Trace, Trace], monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo of a big cached trace starts with the pages its caller read handed back (a nested pass does not
    add its own to them: the TUI's lines table peaked 250 MB lower at 20 GB) and ends the same way; a trace in
    memory has nothing to hand back."""
    held, mapped = traces
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    events: list[str] = []
    ctx = Context(mapped)
    monkeypatch.setattr(ctx, "drop_pages", lambda: events.append("drop"))
    ctx.memo("outer", lambda: (events.append("outer"), ctx.memo("inner", lambda: events.append("inner")))[0])
    assert events == ["drop", "outer", "drop", "inner", "drop", "drop"]
    plain = Context(held)
    monkeypatch.setattr(plain, "drop_pages", lambda: events.append("plain drop"))
    plain.memo("x", lambda: 1)
    assert "plain drop" not in events
