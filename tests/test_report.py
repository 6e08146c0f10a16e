"""HTML report: section numbers checked against independent sums, escaping, self-containment, CLI.

The browser half (console errors, drawn plots, screenshot, print) is in tests/test_report_browser.py.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import orjson
import pytest

from neuron_prof.exporters import _report_data as data
from neuron_prof.exporters._report_html import json_for_script
from neuron_prof.exporters.html_report import render_html_report, write_html_report
from neuron_prof.model import Arg, Cat, ProcessKind, TraceBuilder, TrackKind
from tests._report_trace import MS, T0, XSS, demo_like_trace


def _figures(page: str) -> dict[str, dict]:
    m = re.search(r'<script type="application/json" id="np-figures">(.*?)</script>', page, re.S)
    assert m is not None
    return orjson.loads(m.group(1))


def test_sections_numbers_match_independent_sums() -> None:
    tr = demo_like_trace()
    # device utilisation: queue 0 busy 40 ms and queue 1 busy [30, 50) per 100 ms step -> union 50 ms
    u = data.device_utilisation(tr, bins=50)
    ((name, busy),) = u.busy.items()
    span = tr.time_range()[1] - tr.time_range()[0]
    assert u.mean_busy[name] == pytest.approx(10 * 50 * MS / span)
    # bins are 1/50 of the span; the binned busy time adds up to the union
    assert busy.sum() * u.bin_ms * MS == pytest.approx(10 * 50 * MS, rel=1e-9)
    # compile waterfall: 4 compiles, total 4+5+6+7 ms, in start order
    w = data.compile_waterfall(tr)
    assert w.total == 4 and w.total_ms == pytest.approx(22.0)
    assert list(w.dur_ms) == [4.0, 5.0, 6.0, 7.0] and list(w.start_ms) == [0.0, 25.0, 50.0, 75.0]
    assert w.group == ["eager · miss"] * 3 + ["eager · hit"]
    # memory: one series, peak = 1 GiB + 9 MiB, 20 samples
    series, total = data.memory_series(tr)
    assert total == 1 and series[0].peak == 2**30 + 9 * 2**20 and series[0].n_samples == 20
    # collectives: 10 all_reduce of 50 MB in 5 ms -> 10 GB/s each
    c = data.collectives(tr)
    assert len(c.op) == 10 and np.allclose(c.gbps, 50_000_000 / (5 * MS))
    assert c.per_op[0]["count"] == 10 and c.per_op[0]["total_ms"] == pytest.approx(50.0)


def test_busy_before_and_downsampling() -> None:
    from neuron_prof.analysis.intervals import merge

    s, e = merge(np.array([0, 5, 20, 21]), np.array([10, 3, 5, 1]))
    assert s.tolist() == [0, 20] and e.tolist() == [10, 25]
    assert data.busy_before(s, e, np.array([-1, 0, 5, 10, 15, 22, 30])).tolist() == [0, 0, 5, 10, 10, 12, 15]
    v = np.sin(np.linspace(0, 50, 100_000))
    v[12_345] = 7.0  # a single-sample spike must survive downsampling
    keep = data.downsample_minmax(v, 1000)
    assert len(keep) <= 1000 and 12_345 in keep and np.all(np.diff(keep) > 0)
    assert v[keep].min() == v.min()


def test_report_is_self_contained_and_has_every_section(tmp_path: Path) -> None:
    out = write_html_report(demo_like_trace(), tmp_path / "r.html")
    page = out.read_text()
    # plotly.js inline exactly once; no external script, stylesheet or image
    assert page.count("plotly.js v") == 1
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=", page[:2000] + page[-200_000:])
    assert "Content-Security-Policy" in page and "default-src 'none'" in html.unescape(page[:1000])
    for sid in ("overview", "findings", "compile", "fallback", "utilisation", "memory", "collectives"):
        assert f'<section id="{sid}">' in page
    figs = _figures(page)
    assert set(figs) == {"fig-findings", "fig-compile", "fig-fallback", "fig-util", "fig-memory", "fig-coll"}
    # the hot spots are the two cpu_fallback findings, by cost
    hot = figs["fig-fallback"]["data"][0]
    assert hot["x"] == [8.0, 10.0]
    assert "@media print" in page and "@page" in page
    assert not list(tmp_path.glob(".*.tmp"))


def test_every_figure_is_valid_plotly() -> None:
    import plotly.graph_objects as go

    figs = _figures(render_html_report(demo_like_trace(XSS)))
    assert len(figs) == 6
    for f in figs.values():
        go.Figure(data=f["data"], layout=f["layout"])  # raises on an unknown property or bad value


def test_trace_strings_are_escaped_everywhere() -> None:
    page = render_html_report(demo_like_trace(XSS))
    # only the page's own tags exist: 3 script elements, no injected element or handler
    assert page.count("<script") == 3 and page.lower().count("</script>") == 3
    for bad in ("<img", "<svg", 'onerror="window', "<script>alert", "<!--"):
        assert bad not in page.replace(page[page.index("<script>") : page.index("</script>")], "")
    # the strings are there, escaped, in the tables ...
    assert html.escape(XSS[0]) in page and html.escape(XSS[1]) in page
    # ... and in the figure JSON they are escaped for plotly's HTML-ish labels
    figs = _figures(page)
    labels = orjson.dumps(figs).decode()
    assert "<script>" not in labels and "&lt;script&gt;alert(1)&lt;/script&gt;" in labels
    assert "&amp;lt;b&amp;gt;entity" in page  # an entity in a name stays literal text


def test_json_for_script_cannot_close_the_script() -> None:
    s = json_for_script({"a": "</script><script>x()</script>", "b": "<!-- & -->"})
    assert "<" not in s and ">" not in s and "&" not in s
    assert orjson.loads(s) == {"a": "</script><script>x()</script>", "b": "<!-- & -->"}


def test_empty_sections_say_so() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1, "main")
    b.add_slice(t, T0, MS, "aten::add", "cpu_op")
    page = render_html_report(b.build())
    for msg in (
        "No findings",
        "No compile events in this trace",
        "No CPU fallbacks in this trace",
        "No device activity in this trace",
        "No memory counters in this trace",
        "No collectives in this trace",
    ):
        assert msg in page
    assert _figures(page) == {}


def test_empty_trace_renders() -> None:
    page = render_html_report(TraceBuilder().build())
    assert "No collectives in this trace" in page


def test_findings_table_lists_every_finding_most_costly_first() -> None:
    page = render_html_report(demo_like_trace())
    body = page[page.index('<section id="findings">') : page.index('<section id="compile">')]
    titles = re.findall(r"<td>(aten::\S+ fell[^<]*|compile of [^<]*)</td>", body)
    assert titles == ["compile of aten::layer_norm", "aten::mm fell back to CPU", "aten::gelu fell back"]
    assert "22.000" in body and "evidence" in body


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_prof.cli import main

    src = tmp_path / "t.json"
    src.write_bytes(
        orjson.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "name": "<b>op</b>",
                        "cat": "cpu_op",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1.0,
                        "dur": 5.0,
                    }
                ]
            }
        )
    )
    out = tmp_path / "out.html"
    assert main(["report", str(src), "-o", str(out)]) == 0
    page = out.read_text()
    assert "&lt;b&gt;op&lt;/b&gt;" in page or "No device activity" in page
    assert str(out) in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    assert main(["report", str(src), "-o", str(tmp_path / "no" / "dir" / "r.html")]) == 2


def test_totals_from_the_analysis_show_at_a_glance() -> None:
    from neuron_prof.analysis import report

    tr = demo_like_trace()
    rep = report(tr)
    page = render_html_report(tr, findings=rep.findings, totals=rep.totals)
    glance = page[page.index("At a glance") : page.index('<section id="findings">')]
    # 4 compiles of 4+5+6+7 ms, 3 of them misses; 10 fallbacks of 2 ms; 10 collectives of 5 ms
    assert "22.000 ms in 4 compiles (3 cache misses)" in glance
    assert "20.000 ms in 10 calls" in glance and "50.000 ms in 10 calls" in glance
    assert "Top host ops by self time" in glance


def _union_brute(iv: list[tuple[int, int]]) -> int:
    """Covered length of intervals, by a plain sweep (independent of the numpy code)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def test_report_on_real_kineto_traces(kineto_trace: Path) -> None:
    from neuron_prof.analysis import Context, report
    from neuron_prof.analysis.device.idle import device_rows
    from neuron_prof.loaders import load

    tr = load(kineto_trace)
    rep = report(tr)
    page = render_html_report(tr, rep.findings, rep.totals)
    for sid in ("overview", "findings", "compile", "fallback", "utilisation", "memory", "collectives"):
        assert f'<section id="{sid}">' in page
    # the utilisation section's busy share per device equals an independent sweep over the same rows
    u = data.device_utilisation(tr)
    rows = device_rows(Context(tr))
    span = tr.time_range()[1] - tr.time_range()[0]
    procs = {tr.tracks[int(t)].process for t in tr.slices.track[rows]}
    assert len(u.mean_busy) == len(procs)
    for p in procs:
        iv = [
            (int(tr.slices.ts_ns[r]), int(tr.slices.ts_ns[r] + tr.slices.dur_ns[r]))
            for r in rows
            if tr.tracks[int(tr.slices.track[r])].process == p
        ]
        name = next(n for n, q in u.process_of.items() if q == p)
        assert u.mean_busy[name] == pytest.approx(_union_brute(iv) / span)
    # collectives: on a Kineto trace, one point per NCCL/RCCL kernel (counted here by name)
    c = data.collectives(tr)
    kernel = re.compile(r"^(nccl|rccl)(Dev)?Kernel_", re.I)
    if not len(tr.slices_on(TrackKind.COLLECTIVE)):
        n_kernels = sum(1 for r in rows if kernel.match(tr.slice_name(int(r))))
        if n_kernels:
            assert len(c.op) == n_kernels and c.source == "NCCL/RCCL kernel"


def test_cli_report_on_a_pftrace_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a demo-like trace written as .pftrace (the format `neuron-prof demo` writes beside its JSON)
    from neuron_prof.cli import main
    from neuron_prof.exporters import write_trace

    src = write_trace(demo_like_trace(), tmp_path / "demo.pftrace")
    # WHEN the CLI reports on it
    assert main(["report", str(src)]) == 0
    # THEN the default output lies beside it and the analysis re-found the compile and device sections
    page = (tmp_path / "demo.html").read_text()
    assert "demo.html" in capsys.readouterr().out
    figs = _figures(page)
    assert {"fig-compile", "fig-util", "fig-memory", "fig-coll"} <= set(figs)
    assert re.search(r"4 compiles of \d+ ops or graphs, 22\.000 ms in total", page)


def test_long_names_are_cut_with_the_full_name_as_tooltip() -> None:
    from neuron_prof.exporters.html_report import _cut

    long = "void kernel<" + "at::Tensor<float>, " * 20 + '"><b>x</b>>'
    cell = _cut(long).html
    assert cell.startswith('<span title="void kernel&lt;at::Tensor') and "…</span>" in cell
    assert html.unescape(cell.split('title="', 1)[1].split('">', 1)[0]) == long
    assert "<b>" not in cell and _cut("aten::mm").html == "aten::mm"


def test_compile_waterfall_is_one_row_per_op_with_the_rest_folded() -> None:
    from neuron_prof.exporters import _report_figures as figs
    from neuron_prof.model import TraceBuilder

    # GIVEN 465 compiles of 30 ops (op k compiles k+1 times, 1 ms each), like the demo's 299 of 35
    b = TraceBuilder()
    comp = b.track(b.process(1, name="host"), "compile", TrackKind.COMPILE)
    t = 0
    for k in range(30):
        for j in range(k + 1):
            b.add_slice(comp, t, MS, f"aten::op{k}", Cat.COMPILE, {Arg.SIGNATURE: f"[{j}, 64]", Arg.CACHE: "miss"})
            t += 2 * MS
    w = data.compile_waterfall(b.build())
    # THEN 20 rows of the costliest ops, most time first, and one row folding the other 10
    assert w.total == 465 and len(w.rows) == 21
    assert w.rows[0].startswith("aten::op29 · ") and w.rows[-1].startswith("10 other ops · ")
    assert sorted(set(w.row_of.tolist())) == list(range(21))
    fig = figs.compile_waterfall(w)
    assert fig is not None and fig["layout"]["height"] < 800  # the time axis stays on the screen
    # the signature of each compile is its hover text
    hover = [c[1] for d in fig["data"] for c in d["customdata"]]
    assert "signature: [0, 64]" in hover


def test_device_table_names_devices_and_memory_legend_names_each_once() -> None:
    from neuron_prof.loaders import load
    from tests.conftest import KINETO_DIR

    # GIVEN a GPU trace, where Kineto names the device process after the host program ("python3.10")
    path = KINETO_DIR / "critical_path_alexnet_trace.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces absent")
    u = data.device_utilisation(load(path))
    # THEN the device is "GPU 0", as `summary` says, with its two streams counted
    assert list(u.mean_busy) == ["GPU 0"] and u.queues == {"GPU 0": 2}
    page = render_html_report(load(path))
    assert "device track(s)" not in page and "<td>GPU 0</td><td class=\"num\">2</td>" in page
    # GIVEN memory tracks named after their device already, THEN the legend does not repeat the device
    b = TraceBuilder()
    host = b.process(1, name="python", kind=ProcessKind.HOST)
    dev = b.process(100, name="neuron:0", kind=ProcessKind.DEVICE)
    for p, name in ((dev, "neuron:0 reserved"), (host, "host allocated")):
        t = b.track(p, name, TrackKind.MEMORY, unit="bytes")
        b.add_counter(t, T0, 1e6)
        b.add_counter(t, T0 + MS, 2e6)
    series, _ = data.memory_series(b.build())
    assert sorted(s.name for s in series) == ["neuron:0 reserved", "python · host allocated"]
