"""Which dimension varied: parse Dynamo recompile reasons and eager op signatures into sizes.

parse_reason("0/0: tensor 'L['x']' size mismatch at index 0. expected 8, actual 16")
  -> Guard(frame_compile="0/0", name="L['x']", what="size", index=0, expected=8, actual=16)
shapes_of("aten::mm(f32[8, 128], f32[128, 64])") -> ((8, 128), (128, 64))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_REASON = re.compile(
    r"(?:(?P<cid>\d+/\d+):\s*)?tensor '(?P<name>.*?)' (?P<what>size|stride) mismatch at index (?P<idx>\d+)\."
    r"\s*expected (?P<exp>-?\d+), actual (?P<act>-?\d+)"
)
_DTYPE_REASON = re.compile(
    r"tensor '(?P<name>.*?)' dtype mismatch\.\s*expected (?P<exp>\S+), actual (?P<act>\S+)"
)
_VALUE_REASON = re.compile(
    r"^(?:\d+/\d+:)?\s*(?P<name>L\[.+?\](?:\[\d+\])?|[A-Za-z_][\w.]*(?:\[\d+\])?) == (?P<exp>-?\d+)\b", re.M
)
"""A guard on a Python int: "0/0: L['n'] == 3", "0/0: depth == 1   # for _ in range(depth): ..." (torch 2.13)."""
_BRACKET = re.compile(r"\[\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\]")


@dataclass(frozen=True)
class Guard:
    """One failed guard from a recompile reason."""

    name: str
    what: str
    """"size", "stride", "dtype" or "value"."""
    index: int
    expected: str
    actual: str
    frame_compile: str = ""

    @property
    def text(self) -> str:
        """The guard as Dynamo wrote it for a Python int ("depth == 1"), else what varied."""
        return f"{self.name} == {self.expected}" if self.what == "value" else self.dim

    @property
    def dim(self) -> str:
        """Human name of what varied: "L['x'] dim 0"."""
        return (
            f"{self.name} dim {self.index}" if self.what in ("size", "stride") else f"{self.name} {self.what}"
        )


def parse_reason(reason: str) -> list[Guard]:
    """Every failed guard in a recompile reason (one reason may list several, one per line)."""
    out = [
        Guard(m["name"], m["what"], int(m["idx"]), m["exp"], m["act"], m["cid"] or "")
        for m in _REASON.finditer(reason)
    ]
    out += [Guard(m["name"], "dtype", 0, m["exp"], m["act"]) for m in _DTYPE_REASON.finditer(reason)]
    return out + [Guard(m["name"], "value", 0, m["exp"], "") for m in _VALUE_REASON.finditer(reason)]


def shapes_of(sig: Any) -> tuple[tuple[int, ...], ...]:
    """The tensor shapes in a signature: a list of shapes, or a string with "[d0, d1]" groups."""
    if isinstance(sig, (list, tuple)):
        shapes = []
        for x in sig:
            if isinstance(x, (list, tuple)) and all(isinstance(v, int) for v in x):
                shapes.append(tuple(int(v) for v in x))
            elif isinstance(x, (list, tuple)):
                shapes.extend(shapes_of(x))
        return tuple(shapes)
    if isinstance(sig, str):
        return tuple(
            tuple(int(v) for v in m.group(1).split(",")) if m.group(1) else () for m in _BRACKET.finditer(sig)
        )
    return ()


@dataclass(frozen=True)
class VaryingDim:
    """A dimension that took several values across the signatures of one op."""

    tensor: int
    index: int
    values: tuple[int, ...]
    """One value per signature, in signature order."""

    @property
    def label(self) -> str:
        return f"input {self.tensor} dim {self.index}"


def varying_dims(signatures: Sequence[tuple[tuple[int, ...], ...]]) -> list[VaryingDim]:
    """Dimensions that differ across signatures of the same structure (most distinct values first)."""
    if len(signatures) < 2:
        return []
    # use the most common structure (number of tensors and their ranks) only
    structs: dict[tuple[int, ...], list[int]] = {}
    for i, sig in enumerate(signatures):
        structs.setdefault(tuple(len(s) for s in sig), []).append(i)
    struct, idx = max(structs.items(), key=lambda kv: len(kv[1]))
    out = []
    for t, rank in enumerate(struct):
        for d in range(rank):
            vals = tuple(signatures[i][t][d] for i in idx)
            if len(set(vals)) > 1:
                out.append(VaryingDim(t, d, vals))
    # the same dim repeated across inputs (x and mask both vary in dim 0): keep the first of each pattern
    seen: set[tuple[int, ...]] = set()
    uniq = []
    for v in sorted(out, key=lambda v: (-len(set(v.values)), v.tensor, v.index)):
        if v.values not in seen:
            seen.add(v.values)
            uniq.append(v)
    return uniq
