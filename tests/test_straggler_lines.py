"""A late rank's cause is charged to the line that cost the time (issue 34): the ``time.sleep`` inside
``load_batch``, not the def line of ``load_batch`` that its frame span is named by."""

from __future__ import annotations

from neuron_prof.analysis.collectives.stragglers import straggler_findings
from neuron_prof.merge import merge_traces
from neuron_prof.model import KinetoCat, Meta, Trace, TraceBuilder, TrackKind

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def _rank(rank: int, late_ms: int, steps: int = 6) -> Trace:
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    rows = []
    for k in range(steps):
        s = T0 + k * 40 * MS
        b.add_slice(main_t, s, 12 * MS, "aten::mm", KinetoCat.CPU_OP)
        if late_ms:  # the loop's line 30 calls load_batch (def at 22), whose line 24 sleeps
            b.add_slice(main_t, s + 12 * MS, late_ms * MS, "ddp_train.py(22): load_batch", KinetoCat.PYTHON,
                        {"call_site": "ddp_train.py:30"})
            b.add_slice(main_t, s + 12 * MS + 100, late_ms * MS - 200, "<built-in function sleep>",
                        KinetoCat.PYTHON, {"call_site": "ddp_train.py:24"})
        b.add_slice(coll, s + (13 + late_ms) * MS, (19 - late_ms) * MS, "all_reduce",  # all leave at s + 32 ms
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
        rows.append([k, s, s + 40 * MS])
    b.metadata.update({Meta.RANK: rank, Meta.WORLD_SIZE: 2, Meta.STEPS: rows, Meta.WALL: [T0, T0 + steps * 40 * MS]})
    return b.build()


def test_data_loading_is_charged_to_the_line_that_sleeps() -> None:
    (f,) = straggler_findings(merge_traces([_rank(0, 0), _rank(1, 15)])[0])
    assert f.rank == 1 and f.call_site == "ddp_train.py:24", (f.call_site, f.title)
    assert "data loading (load_batch)" in f.title and "(22)" not in f.title
