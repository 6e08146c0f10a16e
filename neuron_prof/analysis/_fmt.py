"""Human-readable numbers for finding titles (plain text: views add their own styling)."""

from __future__ import annotations


def fmt_ns(ns: float, us_digits: int = 1) -> str:
    """1234 -> "1.2 µs", 45_000_000 -> "45.0 ms", 3.2e9 -> "3.20 s" (`us_digits`: decimals of µs)."""
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.{us_digits}f} µs"
    return f"{int(ns)} ns"


def fmt_bytes(b: float) -> str:
    """1536 -> "1.5 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(b) < 1024 or unit == "TiB":
            return f"{int(b)} B" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b} B"
