"""TreeTable: a VirtualTable of groups that expand to their members (one level).

The data holds both levels as rows; column ``parent`` is -1 for a group and the group's data row for a
member. A group lists first, then, when expanded, its members. Sorting orders groups, and members within
their group; a filter shows a group when it or a member matches, and the matching members of a group
that does not match itself.

    t = TreeTable(cols, {"parent": ..., "name": ...}, id="compiles")
    t.toggle()            # expand or collapse the highlighted group
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from textual.binding import Binding, BindingType

from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

OPEN, CLOSED, LEAF = "▾ ", "▸ ", "    "
"""Prefixes of the first column: an expanded group, a collapsed one, a member."""


class TreeTable(VirtualTable):
    """A VirtualTable whose groups (parent -1) expand to their members (parent = the group's row)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "expand", "Expand", show=False),
        Binding("left,h", "collapse", "Collapse", show=False),
    ]

    def __init__(self, columns: list[Column], data: dict[str, np.ndarray] | None = None, **kw: Any) -> None:
        self.expanded: set[int] = set()
        """Data rows of the groups whose members are shown."""
        self._members: dict[int, np.ndarray] = {}
        self._open: set[int] = set()
        """Groups shown with members under them (▾)."""
        super().__init__(columns, data, **kw)

    @property
    def parents(self) -> np.ndarray:
        """Column ``parent``: -1 for a group, the group's data row for a member."""
        p = self.data.get("parent")
        return p if p is not None else np.full(self.n_rows, -1, dtype=np.int64)

    def set_data(self, data: dict[str, np.ndarray]) -> None:
        self.expanded = set()
        parent = data.get("parent")
        self._members = {}
        if parent is not None and len(kids := np.flatnonzero(parent >= 0)):
            kids = kids[np.argsort(parent[kids], kind="stable")]  # by group, in data order within one
            groups, starts = np.unique(parent[kids], return_index=True)
            self._members = {int(g): m for g, m in zip(groups, np.split(kids, starts[1:]), strict=True)}
        super().set_data(data)
        if not self.filter_text:  # a filter arranged the rows already
            self.order = self._arrange(self.order)
            self._resize()

    def members(self, row: int) -> np.ndarray:
        """Data rows of group `row`'s members, in data order."""
        return self._members.get(row, np.zeros(0, dtype=np.int64))

    def _sorted(self, rows: np.ndarray) -> np.ndarray:
        if self.sort_key is not None and len(rows):
            col = self.data[self.sort_key][rows]
            if col.dtype != object:
                return rows[np.argsort(-col, kind="stable")]
        return rows

    def _arrange(self, rows: np.ndarray) -> np.ndarray:
        n = self.n_rows
        if not n:
            return rows
        parent = self.parents
        hit = np.zeros(n, dtype=bool)
        hit[rows] = True
        filtering = len(rows) < n
        roots = np.flatnonzero(parent < 0)
        if filtering:
            matched_groups = parent[rows][parent[rows] >= 0]
            roots = roots[hit[roots] | np.isin(roots, matched_groups)]
        out: list[np.ndarray] = []
        self._open = set()
        for g in self._sorted(roots):
            out.append(np.array([g], dtype=np.int64))
            kids = self.members(int(g))
            if filtering and not hit[g]:
                kids = kids[hit[kids]]
            elif int(g) not in self.expanded:
                continue
            if len(kids):
                self._open.add(int(g))
                out.append(self._sorted(kids))
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def sort_by(self, key: str, descending: bool = True) -> None:
        """Order the groups, and the members within each group, by column `key` (numbers: descending)."""
        self.sort_key = key
        row = self.row
        self._apply_filter()
        self._keep(row)

    def cell_text(self, col: Column, row: int) -> str:
        text = super().cell_text(col, row)
        if col is not self.columns[0]:
            return text
        if self.parents[row] >= 0:
            return LEAF + text
        if not len(self.members(row)):
            return "  " + text
        return (OPEN if row in self._open else CLOSED) + text

    # ---- expand and collapse ------------------------------------------------------------------------
    def group_of(self, row: int) -> int:
        """The group data row of `row` (itself for a group)."""
        p = int(self.parents[row]) if row >= 0 else -1
        return p if p >= 0 else row

    def toggle(self, row: int | None = None) -> None:
        """Expand group `row` (default: the highlighted row's group), or collapse it when expanded."""
        g = self.group_of(self.row if row is None else row)
        if g < 0:
            return
        if g in self.expanded:
            self.collapse(g)
        else:
            self.expand_group(g)

    def expand_group(self, group: int) -> None:
        """Show the members of `group`, keeping the cursor on the row it was on."""
        if group >= 0 and len(self.members(group)):
            self.expanded.add(group)
            self._rearrange()

    def collapse(self, group: int) -> None:
        """Hide the members of `group`; a cursor on one of them moves to the group."""
        if group in self.expanded:
            self.expanded.discard(group)
            row = self.row
            self._rearrange(group if self.group_of(row) == group else row)

    def _rearrange(self, keep: int | None = None) -> None:
        row = self.row if keep is None else keep
        self._apply_filter()
        self._keep(row)

    def reveal(self, row: int) -> None:
        """Put the cursor on data row `row`, expanding its group when it is a member."""
        g = self.group_of(row)
        if g != row and g not in self.expanded:
            self.expanded.add(g)
            self._apply_filter()
        self._keep(row)

    def _keep(self, row: int) -> None:
        at = np.flatnonzero(self.order == row)
        self.move_to(int(at[0]) if len(at) else 0)
        self.refresh()

    def action_expand(self) -> None:
        self.expand_group(self.group_of(self.row))

    def action_collapse(self) -> None:
        self.collapse(self.group_of(self.row))
