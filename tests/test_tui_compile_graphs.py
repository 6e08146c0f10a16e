"""A torch.compile frame's graphs in the compile view (and the report's compile waterfall): one row per frame,
its graphs (the first compile and each recompile) as children with their input shapes and the user's line, each
holding every compile of that graph, at 80x24 and 160x48.

`_trace()` is laid out as a capture of tests/userland/torch_compile_churn.py is (batch sizes 8, 12, 8, 20, 12
through one compiled `forward` at train.py:27, `loss.backward()` at train.py:30), from the documented run-time
spans (torch-facts: "Torch-Compiled Region: F/A" around "CompiledFunction"; autograd's
"CompiledFunctionBackward" linked by a fwdbwd flow) and the compile probe's schema: Dynamo's compile of each
graph (compile id "0/A", its recompile reason), the backend's NEFF compile of the forward graph at its first run
(no compile id: paid by the region), the lazy backward compile (compile id "0/A", kind backward, no line) and
the backward graph's NEFF (paid by CompiledFunctionBackward). Expected values come from this layout.
"""

from __future__ import annotations

import pytest

from neuron_prof.exporters import _report_data as report_data
from neuron_prof.model import Arg, Cat, KinetoCat, Trace, TraceBuilder, TrackKind
from neuron_prof.tui.app import NeuronProfApp
from tests._tui_pilot import ready, screen_text, shown, table

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
SIZES = (8, 12, 8, 20, 12)
GRAPHS = {8: 0, 12: 1, 20: 2}
"""Batch size -> the attempt that compiled it (0/0, then a recompile per new size)."""
SITE, BWD_SITE = "train.py:27", "train.py:30"
PARAMS = [[32, 16], [32], [4, 32], [4]]


def _inputs(bs: int) -> list[list[int]]:
    return [PARAMS[0], PARAMS[1], [bs, 16], PARAMS[2], PARAMS[3]]


def _trace() -> Trace:
    b = TraceBuilder()
    b.process(1, name="host")
    main = b.thread_track(1, 1, "MainThread")
    autograd = b.thread_track(1, 2, "pt_autograd_0")
    comp = b.track(0, "compile", TrackKind.COMPILE)
    compiled: set[int] = set()
    prev = 8
    for step, bs in enumerate(SIZES):
        t = T0 + step * 2000 * MS
        att = GRAPHS[bs]
        new = att not in compiled
        compiled.add(att)
        b.add_slice(main, t, 1900 * MS, f"ProfilerStep#{step}", KinetoCat.USER_ANNOTATION)
        if new:  # Dynamo compiles the frame for this shape before running it
            reason = {} if att == 0 else {Arg.RECOMPILE_REASON: f"0/0: tensor 'x' size mismatch at index 0. "
                                                                f"expected 8, actual {bs}"}
            b.add_slice(comp, t + MS, 300 * MS, "forward", Cat.COMPILE,
                        {Arg.COMPILE_KIND: "torch.compile", Arg.COMPILE_ID: f"0/{att}", Arg.CACHE: "miss",
                         Arg.CALL_SITE: SITE, **reason})
        r0 = t + 310 * MS
        region = b.add_slice(main, r0, 400 * MS, f"Torch-Compiled Region: 0/{att}", KinetoCat.CPU_OP)
        b.add_slice(main, r0 + MS, 398 * MS, "model.py(17): forward", "python_function")
        fwd = b.add_slice(main, r0 + 2 * MS, 396 * MS, "CompiledFunction", KinetoCat.CPU_OP,
                          {"Input Dims": _inputs(bs), "Sequence number": step, "Fwd thread id": 0})
        if new:  # the NEFF of the forward graph compiles at its first run, paid by the region
            neff = b.add_slice(comp, r0 + 3 * MS, 150 * MS, f"model_{att}_forward_{att}", Cat.COMPILE,
                               {Arg.COMPILE_KIND: "torch.compile", Arg.SIGNATURE: f"model_{att}_forward_{att}_ab",
                                Arg.CACHE: "miss", Arg.CALL_SITE: SITE})
            b.add_flow(region, neff)
        b0 = t + 800 * MS
        b.add_slice(autograd, b0, 400 * MS, "autograd::engine::evaluate_function: CompiledFunctionBackward",
                    KinetoCat.CPU_OP, {"Sequence number": step, "Fwd thread id": 1})
        bwd = b.add_slice(autograd, b0 + MS, 398 * MS, "CompiledFunctionBackward", KinetoCat.CPU_OP,
                          {"Input Dims": [[bs, 4]], "Sequence number": step, "Fwd thread id": 1})
        b.add_flow(fwd, bwd, cat="fwdbwd")
        if new:  # AOTAutograd compiles the backward lazily, then its NEFF compiles, paid by the backward op
            b.add_slice(comp, b0 + 2 * MS, 3 * MS, f"0/{att}", Cat.COMPILE,
                        {Arg.COMPILE_KIND: "backward", Arg.COMPILE_ID: f"0/{att}", Arg.CACHE: "miss"})
            neff = b.add_slice(comp, b0 + 6 * MS, 170 * MS, f"model_{att}_backward_{att}", Cat.COMPILE,
                               {Arg.COMPILE_KIND: "torch.compile", Arg.CACHE: "miss", Arg.CALL_SITE: BWD_SITE,
                                Arg.SIGNATURE: f"model_{att}_backward_{att}_cd"})
            b.add_flow(bwd, neff)
        # an eager op compiles per batch size too: it stays a row of its own
        if bs != prev or step == 0:
            b.add_slice(comp, t + 1500 * MS, 10 * MS, "aten::mul", Cat.COMPILE,
                        {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: f"[{bs}, 4]", Arg.CACHE: "miss",
                         Arg.CALL_SITE: "train.py:28"})
        prev = bs
    b.metadata["backend"] = "neuron"
    return b.build()


def _graph_rows(trace: Trace) -> set[int]:
    """Every compile of the frame's graphs: all compile slices but the eager op's."""
    return {int(r) for r in trace.slices_on(TrackKind.COMPILE) if trace.slice_name(int(r)) != "aten::mul"}


LABELS = ["0/0 [8, 16] (first compile)", "0/1 [12, 16]: x dim 0: 8 → 12", "0/2 [20, 16]: x dim 0: 8 → 20"]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_frames_graphs_and_their_compiles_fold_under_the_frame(size: tuple[int, int]) -> None:
    trace = _trace()
    app = NeuronProfApp([trace])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        t = table(app)
        # GIVEN 12 compiles of the frame's 3 graphs (Dynamo's, the forward and backward NEFFs, the lazy backward)
        # THEN two top rows: the frame (first: most compile time) and the eager op; no NEFF or "0/N" row of its own
        assert shown(t, "parent") == [-1, -1]
        assert shown(t, "label") == ["forward (frame 0)", "aten::mul"]
        frame = int(t.order[0])
        assert set(t.data["rows"][frame]) == _graph_rows(trace) and t.data["count"][frame] == 12
        assert t.data["n_sigs"][frame] == 3
        assert "forward (frame 0)" in screen_text(app).splitlines()[2]
        # WHEN enter expands it, THEN one row per graph: compile id, the input shape that changed, the guard,
        # and the user's line; each holds the 4 compiles of its graph
        await pilot.press("enter")
        await pilot.pause()
        assert shown(t, "label")[1:4] == LABELS
        assert shown(t, "where")[1:4] == [SITE] * 3 and shown(t, "count")[1:4] == [4] * 3
        lines = screen_text(app).splitlines()
        for label in LABELS:
            assert any(label in line and "train.py:27" in line for line in lines), (label, lines)
        # the detail pane of a recompile: its whole signature, its line, and each of its compiles
        await pilot.press("down", "down")
        await pilot.pause()
        text = ""
        for _ in range(8):  # the pane scrolls: read it page by page
            text += " " + " ".join(screen_text(app).split())
            await pilot.press("shift+down")
        assert "signature: [32, 16], [32], [12, 16], [4, 32], [4]" in text
        assert f"call site: {SITE}" in text
        for part in ("model_1_forward_1", "model_1_backward_1", "in the backward: CompiledFunctionBackward"):
            assert part in text, part


def test_the_report_waterfall_puts_a_frames_compiles_on_its_row() -> None:
    trace = _trace()
    w = report_data.compile_waterfall(trace)
    # GIVEN the same trace, THEN the waterfall's first row is the frame with its 12 compiles, and no NEFF row
    assert w.rows[0].startswith("forward (frame 0) · 12 compiles")
    assert not any(r.startswith(("model_", "0/")) for r in w.rows), w.rows
    assert len(w.rows) == 2
    # each bar still says which graph and compile it is
    assert sum("graph 0/1: model_1_backward_1" in d for d in w.detail) == 1
