"""The one formatter (analysis/fmt.py): every view's units and call sites, checked against hand-written text
(where fit_site cuts inside a path is the TUI's choice: tests/test_tui_columns.py)."""

from __future__ import annotations

import pytest

from neuron_prof.analysis.fmt import (
    clip,
    cut,
    fit_site,
    fmt_bytes,
    fmt_count,
    fmt_evidence,
    fmt_flops,
    fmt_gbps,
    fmt_ns,
    fmt_share,
    fmt_ts,
    fmt_value,
    printable,
    strip_site,
)


@pytest.mark.parametrize(("ns", "text"), [(999, "999 ns"), (1234, "1.2 µs"), (45_000_000, "45.0 ms"),
                                          (3.2e9, "3.20 s"), (-2_500, "-2.5 µs")])
def test_fmt_ns(ns: float, text: str) -> None:
    assert fmt_ns(ns) == text


def test_sizes_and_shares() -> None:
    assert [fmt_bytes(b) for b in (0, 1023, 1536, 5 * 2**20, 3 * 2**30, 2**50)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "3.0 GiB", "1024.0 TiB"]
    assert fmt_share(0.123) == "12.3%" and fmt_share(1) == "100.0%"


def test_missing_values_read_as_a_dash() -> None:
    for f in (fmt_ns, fmt_bytes, fmt_share, fmt_gbps):
        assert f(None) == "-" and f(float("nan")) == "-", f
    assert fmt_gbps(0) == "-" and fmt_gbps(12.345) == "12.35 GB/s"


def test_counts_timestamps_and_flops() -> None:
    assert fmt_count(12345) == "12,345" and fmt_count(7.9) == "7"
    assert fmt_ts(1_234_567_890 + 5, 5) == "1,234.568 ms"
    assert fmt_flops(1.2e9) == "1.2 GFLOP" and fmt_flops(2.5e15) == "2.5 PFLOP" and fmt_flops(12) == "12 FLOP"
    assert fmt_ns(250_000, us_digits=0) == "250 µs"  # a timeline's axis ticks


def test_printable_escapes_every_control_character() -> None:
    name = "\x1b]0;pwned\x07[bold]x[/]\x00\n\t\u2028\x9b"
    assert printable(name) == "\\x1b]0;pwned\\x07[bold]x[/]\\x00\\x0a\\x09\\u2028\\x9b"
    # a paragraph (a detail pane) keeps its lines and tabs, nothing else
    assert printable(name, newlines=True) == "\\x1b]0;pwned\\x07[bold]x[/]\\x00\n\t\\u2028\\x9b"
    assert printable(3) == "3" and printable("µs → ok") == "µs → ok"


@pytest.mark.parametrize(("text", "width", "want"), [
    ("abcdef", 10, "abcdef"), ("abcdef", 6, "abcdef"), ("abcdef", 4, "abc…"), ("abcdef", 1, "…"), ("abcdef", 0, ""),
])
def test_cut(text: str, width: int, want: str) -> None:
    assert cut(text, width) == want


def test_clip_escapes_then_cuts() -> None:
    assert clip("a\x1bb", 80) == "a\\x1bb" and clip("x" * 100) == "x" * 79 + "…"
    assert clip("ab\ncd", 5) == "ab\\x…"  # the escape counts in the width: the cell never grows


@pytest.mark.parametrize(("site", "width", "text"), [
    ("train.py:12", 20, "train.py:12"),                       # fits: unchanged
    ("a label without a path", 10, "a label w…"),              # no path, no line: cut at the right
    ("verylongfilename.py:118", 10, "…me.py:118"),             # a file name longer than the room: cut left
    ("/x/y/a_rather_long_name.py:7", 12, "…g_name.py:7"),
    ("anything", 1, "…"),
    ("anything", 0, ""),
])
def test_fit_site_keeps_the_line(site: str, width: int, text: str) -> None:
    got = fit_site(site, width)
    assert got == text and len(got) <= width


def test_fit_site_drops_middle_directories_first() -> None:
    site = "/home/me/project/src/pkg/sub/model.py:42"
    for width in range(len("…/model.py:42") + 1, len(site)):
        got = fit_site(site, width)
        assert len(got) <= width and got.endswith("/model.py:42") and "…" in got, (width, got)
        head, _, rest = got.partition("…")
        assert site.startswith(head) and site.endswith(rest), (width, got)  # a cut, never a rewrite


def test_strip_site_and_evidence() -> None:
    assert strip_site("Sync point at a.py:3", "a.py:3") == "Sync point"
    assert strip_site("CPU fallback (a.py:3) x", "a.py:3") == "CPU fallback x"
    assert strip_site("title at a.py:3", None) == "title at a.py:3"
    assert fmt_value("idle_ns", 12_850_000_000) == "12.85 s" and fmt_value("copy_bytes", 2048) == "2.0 KiB"
    assert fmt_value("share", 0.5) == "50.0%" and fmt_value("hit_frac", 0.25) == "25.0%"
    assert fmt_value("ratio", 1.23456) == "1.235" and fmt_value("gaps", 12345) == "12,345"
    assert fmt_value("flag", True) == "True" and fmt_value("op", "aten::mm") == "aten::mm"
    assert fmt_evidence({"idle_ns": 12_850_000_000, "gaps": 26, "largest": [1], "none": None}) == \
        "idle 12.85 s, gaps 26"
    assert fmt_evidence(None) == ""
