"""Number formatting shared by the views: durations, bytes, shares. Pure functions, no Textual."""

from __future__ import annotations

import math
import re

from rich.text import Text

from neuron_prof.analysis import fmt_ns as _fmt_ns


def fmt_ns(ns: float) -> str:
    """A duration in the largest unit that keeps it >= 1: "1.23 s", "45.6 ms", "789 µs", "12 ns"; "-" for none.

    The findings' own format (`neuron_prof.analysis.fmt.fmt_ns`), with whole µs to fit table columns."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    return _fmt_ns(round(ns) if abs(ns) < 1e3 else ns, us_digits=0)


def fmt_ts(ns: float, origin: int) -> str:
    """A timestamp as a time since `origin` (the trace start), in ms with 3 decimals."""
    return f"{(ns - origin) / 1e6:,.3f} ms"


def fmt_bytes(n: float) -> str:
    """Bytes in binary units: "512 B", "1.5 KiB", "3.25 GiB"."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    a = abs(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_share(x: float) -> str:
    """A fraction 0-1 as a percentage with one decimal."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:.1f}%"


def fmt_gbps(x: float) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x) or x <= 0)):
        return "-"
    return f"{x:.2f} GB/s"


def fmt_int(n: float) -> str:
    return f"{int(n):,}"


def clip(s: str, width: int) -> str:
    """`s` cut to `width` cells with an ellipsis (width counted in characters)."""
    if len(s) <= width:
        return s
    return s[: max(0, width - 1)] + "…"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(s: object) -> str:
    """`s` as text with control characters shown as ``\\xNN``.

    A trace string reaches the terminal verbatim through Segments; an op name holding ESC could
    otherwise move the cursor or retitle the terminal.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s if isinstance(s, str) else str(s))


def literal(s: object, style: str = "") -> Text:
    """A trace string as literal rich Text: never parsed as markup, control characters escaped."""
    return Text(printable(s), style=style, no_wrap=False)
