"""TUI layer 1: how table columns fit a width (`neuron_prof.tui.widgets.columns`) and the tree table's rows."""

from __future__ import annotations

import numpy as np
from textual.app import App, ComposeResult

from neuron_prof.tui.widgets.columns import Column, cell, fit_columns
from neuron_prof.tui.widgets.tree_table import TreeTable

COLS = [
    Column("name", "name", 0, min_width=30),
    Column("site", "call site", 20, clip_left=True, grow=10),
    Column("x", "x", 10, drop=1),
    Column("y", "y", 10, drop=2),
]


def widths(width: int) -> dict[str, int]:
    return {c.key: w for c, w in fit_columns(COLS, width)}


def test_narrow_tables_drop_columns_highest_first_and_wide_ones_grow() -> None:
    # 80 cells: 20 + 10 + 10 and 3 separators leave 37 >= 30 for the name: nothing leaves, nothing grows
    assert widths(80) == {"name": 37, "site": 20, "x": 10, "y": 10}
    # 70 cells: 27 left, then 38 with y gone (the highest drop)
    assert widths(70) == {"name": 38, "site": 20, "x": 10}
    # 60 cells: 17 left, then 28 (y gone), then 39 (x gone)
    assert widths(60) == {"name": 39, "site": 20}
    # 160 cells: the call site takes its 10 extra cells while the name keeps >= 45
    assert widths(160) == {"name": 107, "site": 30, "x": 10, "y": 10}


def test_paths_are_cut_from_the_left_so_the_line_stays() -> None:
    site = "some/long/project/train.py:123"
    got = cell(site, 12, False, clip_left=True)
    assert got == "…" + site[-11:] and got.endswith(":123") and len(got) == 12
    assert cell(site, 12, False) == site[:11] + "…"
    assert cell("a[b]\x1b", 8, True) == "a[b]\\x1b".rjust(8)[-8:]


class TreeApp(App[None]):
    def __init__(self, data: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.data = data

    def compose(self) -> ComposeResult:
        cols = [Column("name", "name", 0), Column("n", "n", 6, str, right=True)]
        yield TreeTable(cols, self.data, filter_key="name")


async def test_tree_rows_sort_within_their_group_and_expand_in_place() -> None:
    # two groups (rows 0 and 3) with two members each
    names = np.array(["a", "a1", "a2", "b", "b1", "b2"], dtype=object)
    data = {
        "parent": np.array([-1, 0, 0, -1, 3, 3]),
        "name": names,
        "n": np.array([5, 1, 4, 9, 7, 2]),
    }
    app = TreeApp(data)
    async with app.run_test(size=(40, 12)) as pilot:
        t = app.query_one(TreeTable)
        assert list(t.order) == [0, 3]  # collapsed, in data order
        t.sort_by("n")
        assert list(t.order) == [3, 0]
        t.move_to(1)
        await pilot.press("right")
        await pilot.pause()
        # members under their group, by n too; the cursor stays on the group
        assert list(t.order) == [3, 0, 2, 1] and t.row == 0
        assert t.visible_text("name") == ["▸ b", "▾ a", "    a2", "    a1"]
        # a filter shows the matching member under its group, whose own name does not match
        t.filter("b2")
        assert list(t.order) == [3, 5]
        t.filter("")
        t.move_to(3)  # a member: left collapses its group and the cursor goes to the group
        await pilot.press("left")
        await pilot.pause()
        assert list(t.order) == [3, 0] and t.row == 0


def test_fit_site_never_loses_the_line_and_fits() -> None:
    from neuron_prof.analysis.fmt import fit_site, short_site

    sites = ["/work/main/neuron_prof/demo/_train.py:118", "/home/alice/projects/language-model/training/train.py:42",
             "train.py:7", "model.py:88 (line unknown)"]
    for site in sites:
        for width in range(12, 60):
            got = fit_site(site, width)
            # GIVEN any width from 12 THEN at most that wide, ":LINE" always at the end, the file name whole
            # whenever it fits beside the ellipsis
            assert len(got) <= width, (site, width, got)
            if site.endswith((":118", ":42")):
                name = site.rsplit("/", 1)[1]
                assert got.endswith(name if len(name) + 1 < width else name[-(width - 1):]), (site, width, got)
    assert fit_site("aten::native_layer_norm_backward", 12) == "aten::nativ…"  # a name, cut at its end
    assert short_site("/work/p/train.py:3", cwd="/work/p") == "train.py:3"
    assert short_site("/work/other/train.py:3", cwd="/work/p") == "/work/other/train.py:3"
