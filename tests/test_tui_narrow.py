"""80x24 with nothing cut: totals wrap by whole items, table columns drop whole."""

from __future__ import annotations

from neuron_prof.tui.app import NeuronProfApp
from tests._demo_trace import demo_like_trace
from tests._tui_pilot import ready, screen_text


async def test_overview_totals_wrap_by_whole_items_at_80_columns() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        lines = screen_text(app).splitlines()
        totals = [ln for ln in lines if "(" in ln and "x)" in ln and ("compile" in ln or "sync" in ln)]
        # GIVEN four probe totals wider than 80 columns, THEN they take two lines, each item whole
        assert len(totals) == 2, totals
        assert all(ln.rstrip().endswith("x)") for ln in totals), totals
        assert "sync 5.0 ms (0.8%, 10x)" in "\n".join(totals)


async def test_overview_headlines_fit_80_columns_whole() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        heads = [ln for ln in screen_text(app).splitlines() if ln.lstrip().startswith(("top compile", "top CPU"))]
        # GIVEN findings whose titles are longer than a line, THEN each headline is whole statements and its
        # call site, never "…" (issue 25: the overview's top compile stall was cut)
        assert len(heads) == 2, heads
        assert not any("…" in ln.split(" at ")[0] for ln in heads), heads
        assert all(":" in ln.rstrip().rsplit(" at ", 1)[1] for ln in heads), heads
        assert "510.0 ms" in heads[0] and "train.py:42" in heads[0], heads


async def test_ranks_header_drops_whole_columns_at_80_columns() -> None:
    app = NeuronProfApp([demo_like_trace(0), demo_like_trace(1, slow=1.5)])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        app.show_view("ranks")
        await pilot.pause()
        header = next(ln for ln in screen_text(app).splitlines() if ln.lstrip().startswith("rank "))
        words = header.split()
        # every header is a whole word (no "colle"); the dropped ones are gone entirely
        assert "collectives" in words and "compile" in words and "file" in words, header
        assert "fallback" not in words and "sync" not in words
        assert len(header.rstrip()) <= 80


async def test_the_detail_pane_scrolls_to_the_end_of_the_advice_at_80x24() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        f = app.data.rank.findings[0]
        last = f.advice.split()[-1]
        # GIVEN advice longer than the pane, THEN its end is below, and shift+↓ brings it up
        assert last not in screen_text(app).splitlines()[-2]
        for _ in range(4):
            await pilot.press("shift+down")
        text = " ".join(screen_text(app).split())
        assert " ".join(f.advice.split()[-4:]) in text, text[-600:]


def test_a_graphs_recompiles_are_its_rows_with_their_guard_and_line() -> None:
    from neuron_prof.tui.screens._compile_table import compile_table
    from tests._workload import Workload

    # GIVEN torch.compile's graph `forward` compiled six times (0/0..0/5), with no signature recorded
    t = compile_table(Workload().build())
    op = next(i for i, (p, n) in enumerate(zip(t["parent"], t["name"], strict=True)) if p < 0 and n == "forward")
    kids = [i for i, p in enumerate(t["parent"]) if p == op]
    # THEN the graph lists one row per attempt, each with its compile id, the guard that failed and its line
    assert t["n_sigs"][op] == 6 and t["count"][op] == 6
    labels = [t["label"][i] for i in kids]
    assert labels[0] == "0/0 (first compile)"
    assert labels[1] == "0/1: x dim 0: 100 → 120", labels
    assert [lab.split(":")[0].split()[0] for lab in labels] == [f"0/{k}" for k in range(6)]
    assert all(t["where"][i] == "train.py:30" and t["count"][i] == 1 for i in kids)
    assert "size mismatch at index 0. expected 100, actual 120" in t["reasons"][kids[1]]
