"""The one formatter: durations, sizes, shares, counts, call sites and trace text as plain text, for the
findings' titles and every view (summary, check, diff, report, TUI), which add their own styling.

Each quantity has one spelling ("1.5 KiB", "597.3 µs", "12.3%", "12,345"); a missing value (None, NaN) is "-".
"""

from __future__ import annotations

import math
import re

_LINE = re.compile(r":\d+\)?$")


def _missing(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_ns(ns: float | None, us_digits: int = 1) -> str:
    """1234 -> "1.2 µs", 45_000_000 -> "45.0 ms", 3.2e9 -> "3.20 s" (`us_digits`: decimals of µs, 0 for a
    timeline's axis ticks: "+250 µs")."""
    if ns is None or _missing(ns):
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.{us_digits}f} µs"
    return f"{int(ns)} ns"


def fmt_ts(ns: float, origin: int) -> str:
    """A timestamp as the time since `origin` (the trace's start) in ms with 3 decimals: "1,234.567 ms"."""
    return f"{(ns - origin) / 1e6:,.3f} ms"


def fmt_bytes(b: float | None) -> str:
    """Binary units, one decimal: 1536 -> "1.5 KiB", 512 -> "512 B"."""
    if b is None or _missing(b):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(b) < 1024 or unit == "TiB":
            return f"{int(b)} B" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b} B"


def fmt_share(x: float | None) -> str:
    """A fraction 0-1 as a percentage with one decimal: 0.123 -> "12.3%"."""
    if x is None or _missing(x):
        return "-"
    return f"{100 * x:.1f}%"


def brief_shapes(signature: str, keep: int = 3) -> str:
    """A signature's shape list for a one-line title: its first `keep` shapes and how many there are
    ("[100, 32], [32, 32], [32], ... (16 shapes)"); a signature without shape groups as it is."""
    groups = re.findall(r"\[[^\[\]]*\]", signature)
    if len(groups) <= keep:
        return signature
    return f"{', '.join(groups[:keep])}, ... ({len(groups)} shapes)"


def fmt_count(n: float) -> str:
    """A count with thousands separators: 12345 -> "12,345"."""
    return f"{int(n):,}"


def fmt_gbps(x: float | None) -> str:
    """A bandwidth in GB/s (bytes per ns) with two decimals; "-" for none or a non-positive one."""
    if x is None or _missing(x) or x <= 0:
        return "-"
    return f"{x:.2f} GB/s"


def fmt_rate(v: float) -> str:
    """A rate or ratio with 3 significant digits; "" for NaN (not measured: blank, not 0)."""
    return "" if math.isnan(v) else f"{v:.3g}"


def fmt_mfu(v: float) -> str:
    """A share of peak 0..1 as a percentage with two decimals ("0.35%": MFU is often small); "" for NaN (not
    measured: blank, not 0)."""
    return "" if math.isnan(v) else f"{100 * v:.2f}%"


def fmt_flops(f: float) -> str:
    """FLOPs with a decimal unit prefix and 3 significant digits: 1.2e9 -> "1.2 GFLOP"."""
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if f >= div:
            return f"{f / div:.3g} {unit}"
    return f"{f:.0f} FLOP"


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]} | {0x2028: "\\u2028", 0x2029: "\\u2029"}
_CONTROL_KEEP_LINES = {c: v for c, v in _CONTROL.items() if c not in (0x09, 0x0A)}


def printable(s: object, *, newlines: bool = False) -> str:
    """A trace string for a terminal or a Markdown file: control characters (ESC, NUL, BEL, newlines, line
    separators) shown as ``\\xNN`` / ``\\u2028``, so an op name can neither drive the terminal nor break a table
    row. `newlines` keeps newline and tab, for text shown as a paragraph (a detail pane, an error message)."""
    return str(s).translate(_CONTROL_KEEP_LINES if newlines else _CONTROL)


def cut(s: str, width: int) -> str:
    """`s` in at most `width` characters: cut at its right end with "…" when longer."""
    if len(s) <= width:
        return s
    return s[: width - 1] + "…" if width >= 1 else ""


def clip(s: object, width: int = 80) -> str:
    """Trace text on one line in at most `width` characters (long C++ kernel names for tables; JSON keeps
    them whole): control characters escaped (`printable`), then `cut`."""
    return cut(printable(s), width)


def fit_site(site: str, width: int) -> str:
    """A call site or path in at most `width` characters, never losing its ``:LINE``.

    "/work/main/neuron_prof/demo/_train.py:118" at 26 -> "/work/…/demo/_train.py:118": the middle
    directories go first, then the head; a file name too long for `width` is cut at its left
    ("…rain.py:118"). Text without a path separator is cut at its right end like any label.
    """
    if len(site) <= width:
        return site
    if width <= 1:
        return "…"[:width]
    slash = site.rfind("/")
    if slash < 0 and not _LINE.search(site):
        return cut(site, width)
    tail = site[slash:] if slash >= 0 else site  # "/_train.py:118"
    head = width - 1 - len(tail)
    # keep whole directories from the end while they fit, then the head of the path
    parts = site[:slash].split("/")
    kept_end = ""
    for part in reversed(parts[1:]):
        if len(kept_end) + len(part) + 1 + 2 > head:
            break
        kept_end = "/" + part + kept_end
    room = head - len(kept_end)
    if room < 8:  # "neuro…/x.py:1" reads worse than "…/demo/x.py:1": cut at the left, on a "/"
        end = site[len(site) - width + 1 :]
        k = end.find("/")
        return "…" + (end[k:] if k > 0 else end)
    return site[:room] + "…" + kept_end + tail


def short_site(site: str, cwd: str | None = None) -> str:
    """A call site relative to the working directory when it lies under it ("train.py:42" run from the project)."""
    import os

    base = (cwd or os.getcwd()).rstrip("/") + "/"
    return site[len(base) :] if site.startswith(base) else site


def strip_site(title: str, site: str | None) -> str:
    """`title` without its " at SITE" part where the call site is shown beside it anyway."""
    if not site:
        return title
    for form in (f" at {site}", f" ({site})"):
        title = title.replace(form, "")
    return title


def fmt_value(key: str, value: object) -> str:
    """An evidence value in the unit its key names: ``*_ns`` durations, ``*bytes*`` sizes, ``*share*`` as %."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith("_ns") or key == "ns":
        return fmt_ns(value)
    if "bytes" in key:
        return fmt_bytes(value)
    if "share" in key or key.endswith(("_frac", "_fraction")):
        return fmt_share(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return f"{value:,}"


def fmt_evidence(evidence: dict[str, object] | None) -> str:
    """A finding's scalar evidence as "key value" pairs in their units ("idle 12.85 s, gaps 26");
    lists and tables are left to the views that draw them."""
    out = []
    for k, v in (evidence or {}).items():
        if isinstance(v, (list, tuple, dict)) or v is None:
            continue
        name = k[: -len("_ns")] if k.endswith("_ns") else k
        out.append(f"{name.replace('_', ' ')} {fmt_value(k, v)}")
    return ", ".join(out)
