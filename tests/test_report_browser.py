"""The HTML report in headless Chromium: no console errors, every plot drawn, nothing fetched, nothing
from the trace executed, a non-blank screenshot and a PDF print. One browser process for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_prof.exporters.html_report import write_html_report
from tests._report_trace import XSS, demo_like_trace
from tests.browser import Chromium, PageResult, find_chromium
from tests.conftest import kineto_traces

READY = "window.__np_ready === true"
PLOTS = (
    "Array.from(document.querySelectorAll('.plot')).map(d => ({id: d.id,"
    " svgs: d.querySelectorAll('svg.main-svg').length, traces: d.querySelectorAll('g.trace').length,"
    " paths: Array.from(d.querySelectorAll('g.trace path'))"
    ".filter(p => (p.getAttribute('d') || '').length > 2).length,"
    " height: d.getBoundingClientRect().height,"
    " xtitle: (d.querySelector('.g-xtitle text') || {textContent: ''}).textContent,"
    " yticks: Array.from(d.querySelectorAll('.ytick text')).map(t => t.textContent)}))"
)
WIDTH = 1400
"""The window the report is checked at: a laptop browser, where a table wider than the page scrolls sideways."""
# Kineto traces for the browser (each page costs seconds): collectives, the largest device trace, and a
# CPU-only one (empty sections). tests/test_report.py renders every Kineto trace without a browser.
BROWSER_KINETO = (
    "nccl_parser_config_nccl_data.json.gz",
    "mtia_inference_trace_mtia_inference_rank_0.json.gz",
    "cpu_only_rank34.json.gz",
)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    with Chromium.start() as b:
        yield b


def _check_page(
    chromium: Chromium,
    path: Path,
    n_plots: int | None = None,
    evals: dict[str, str] | None = None,
    pdf: bool = False,
) -> PageResult:
    """Open a report and assert what every report must do in a browser."""
    page = chromium.load(
        path.as_uri(),
        ready=READY,
        pdf=pdf,
        width=WIDTH,
        evals={
            "scroll_width": "document.documentElement.scrollWidth",
            "plots": PLOTS,
            "error": "String(window.__np_error)",
            "render_ms": "window.__np_render_ms",
            "xss": "typeof window.__xss",
            "injected": "document.querySelectorAll('img, iframe, svg[onload]').length",
            **(evals or {}),
        },
    )
    assert page.console_errors == []
    assert page.dialogs == []
    # self-contained: the page itself is the only request (no CDN, no fonts, no telemetry)
    assert [u for u in page.requests if not u.startswith(("data:", "blob:"))] == [path.as_uri()]
    assert page.values["error"] == "undefined" and page.values["xss"] == "undefined"
    assert page.values["injected"] == 0
    plots = page.values["plots"]
    if n_plots is not None:
        assert len(plots) == n_plots
    for p in plots:  # each figure drew its SVG and at least one trace with visible geometry
        assert p["svgs"] >= 1 and p["traces"] >= 1 and p["paths"] >= 1 and p["height"] > 100, p
        # labelled: an x-axis title, and category labels whole (never cut with "…")
        assert p["xtitle"].strip() and not any(t.endswith("…") for t in p["yticks"]), p
    # no horizontal scroll: every table and plot fits the page
    assert page.values["scroll_width"] <= WIDTH, page.values["scroll_width"]
    stats = chromium.png_stats(page.screenshot)
    assert stats["width"] == WIDTH and stats["height"] > 900
    assert stats["colours"] > 30 and 0.02 < stats["non_white"] < 0.9, stats
    print(
        f"\n{path.name}: {path.stat().st_size:,} bytes, {len(plots)} plots, loaded in {page.load_s:.2f} s, "
        f"plots drawn in {page.values['render_ms']:.0f} ms"
    )
    return page


def test_demo_like_report_with_hostile_names(chromium: Chromium, tmp_path: Path) -> None:
    # GIVEN a report of a trace whose every name is an XSS attempt
    out = write_html_report(demo_like_trace(XSS), tmp_path / "demo.html")
    # WHEN Chromium opens it (six figures drawn, no errors, nothing fetched, non-blank) and prints it
    page = _check_page(
        chromium,
        out,
        n_plots=6,
        pdf=True,
        evals={
            "source": "document.querySelector('#overview td:last-child').textContent",
            "ticks": "Array.from(document.querySelectorAll('#fig-compile .ytick text'))"
            ".map(t => t.textContent)",
        },
    )
    # THEN nothing ran, and the names show as literal text, in tables and in plot labels alike
    assert page.values["source"] == f"/tmp/{XSS[0]}.json"
    assert f"{XSS[0]} · 1 compile, 4.0 ms" in page.values["ticks"]
    assert f"{XSS[1]} · 1 compile, 5.0 ms" in page.values["ticks"]
    # printable: a real multi-page PDF
    assert (
        page.pdf.startswith(b"%PDF")
        and page.pdf.count(b"/Type /Page\n") + page.pdf.count(b"/Type /Page ") >= 2
    )


def test_kineto_reports(chromium: Chromium, tmp_path: Path) -> None:
    from neuron_prof.analysis import report
    from neuron_prof.loaders import load

    traces = [p for p in kineto_traces() if p.name in BROWSER_KINETO]
    if not traces:
        pytest.skip("../shared/traces/kineto absent")
    for src in traces:
        tr = load(src)
        rep = report(tr)
        out = write_html_report(tr, tmp_path / (src.name.split(".")[0] + ".html"), rep.findings, rep.totals)
        _check_page(chromium, out)


# every table cell whose content is wider than the cell, and every call site broken over lines
OVERFLOW = (
    "Array.from(document.querySelectorAll('th, td')).filter(c => c.scrollWidth > c.clientWidth + 1)"
    ".map(c => c.textContent.slice(0, 80))"
)
SITES = (
    "Array.from(document.querySelectorAll('table.findings .site')).map(s => ({text: s.textContent,"
    " title: s.title, lines: s.getClientRects().length,"
    " inside: s.getBoundingClientRect().right <= s.closest('td').getBoundingClientRect().right + 1}))"
)
# a legend's box against plotly's toolbar (the modebar is in the page even while it is faded out)
LEGENDS = (
    "Array.from(document.querySelectorAll('.plot')).filter(d => d.querySelector('g.legend'))"
    ".map(d => { const a = d.querySelector('g.legend').getBoundingClientRect();"
    " const b = d.querySelector('.modebar').getBoundingClientRect();"
    " return {id: d.id, overlap: !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top"
    " || b.bottom <= a.top)}; })"
)


@pytest.mark.parametrize("width", [1400, 1000])
def test_report_columns_hold_their_text_at_1400_and_1000_px(chromium: Chromium, tmp_path: Path, width: int) -> None:
    from tests._report_trace import LONG_SITE

    # GIVEN a report with a deep project path as a finding's call site
    out = write_html_report(demo_like_trace(), tmp_path / "demo.html")
    page = chromium.load(
        out.as_uri(),
        ready=READY,
        width=width,
        evals={"overflow": OVERFLOW, "sites": SITES, "legends": LEGENDS,
               "scroll_width": "document.documentElement.scrollWidth"},
    )
    (tmp_path / f"report-{width}.png").write_bytes(page.screenshot)  # for a look when it fails
    assert page.console_errors == []
    # THEN no element is wider than its column, and the page does not scroll sideways
    assert page.values["overflow"] == [], page.values["overflow"]
    assert page.values["scroll_width"] <= width
    # the where column: each site on one line inside its cell, shortened in the middle, whole on hover
    sites = page.values["sites"]
    assert sites and all(s["lines"] == 1 and s["inside"] for s in sites), sites
    long = next(s for s in sites if s["title"] == LONG_SITE)
    assert long["text"].endswith("/train.py:118") and "…" in long["text"]
    stats = chromium.png_stats(page.screenshot)
    assert stats["width"] == width and 0.02 < stats["non_white"] < 0.9
    # no legend over plotly's toolbar, even a wide one (five memory counters, as `neuron-prof demo` has)
    mem = write_html_report(_memory_trace(), tmp_path / "memory.html")
    legends = chromium.load(mem.as_uri(), ready=READY, width=width, evals={"legends": LEGENDS}).values["legends"]
    assert [x["id"] for x in legends] == ["fig-memory"] and not legends[0]["overlap"], legends


def _memory_trace():  # type: ignore[no-untyped-def]
    from neuron_prof.model import ProcessKind, TraceBuilder, TrackKind

    b = TraceBuilder()
    b.process(1, name="host", rank=0)
    b.add_slice(b.thread_track(1, 1, "main"), 0, 10**9, "step")
    dev = b.process("n0", name="neuron:0", kind=ProcessKind.DEVICE)
    for name in ("neuron:0 allocated", "neuron:0 reserved", "host allocated", "host reserved",
                 "neuron device 0 HBM 0 total"):
        t = b.track(dev, name, TrackKind.MEMORY, unit="bytes")
        for k in range(10):
            b.add_counter(t, k * 10**8, k * 1e8)
    return b.build()
