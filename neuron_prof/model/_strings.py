"""Interned strings: every name in a trace is an int32 id into one table."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class StringTable:
    """An append-only table of unique strings. Id 0 is always the empty string."""

    __slots__ = ("_strings", "_ids")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._strings: list[str] = [""]
        self._ids: dict[str, int] = {"": 0}
        for s in strings:
            self.intern(s)

    def intern(self, s: str) -> int:
        """Return the id of `s`, adding it if new."""
        i = self._ids.get(s)
        if i is None:
            i = len(self._strings)
            self._strings.append(s)
            self._ids[s] = i
        return i

    def get(self, s: str) -> int | None:
        """Return the id of `s` or None when it was never interned (no insertion)."""
        return self._ids.get(s)

    def __getitem__(self, i: int) -> str:
        return self._strings[int(i)]

    def __len__(self) -> int:
        return len(self._strings)

    def __iter__(self) -> Iterator[str]:
        return iter(self._strings)

    def __contains__(self, s: object) -> bool:
        return s in self._ids

    def as_list(self) -> list[str]:
        """The strings in id order (a copy)."""
        return list(self._strings)
