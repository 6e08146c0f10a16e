"""The HTML page of the report: layout, print CSS, escaped tables, and the scripts that draw the figures.

Safety: every text that comes from a trace goes through `esc` (html.escape) or, inside the figure JSON,
is escaped by the figure builders and then `<`, `>` and `&` are written as \\u escapes, so no trace
string can close the JSON's <script> element. A Content-Security-Policy allows only this page's own two
scripts (by hash): an injected <script> or onerror= handler would not run even if escaping failed, and
the page cannot fetch anything from the network (it is self-contained and works offline).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

_CSS = """
:root { --fg:#1d1d1f; --muted:#6e6e73; --line:#e3e3e6; --bg:#ffffff; --accent:#0b5cad; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; max-width: 1280px; padding: 16px 28px 48px; }
header h1 { font-size: 22px; margin: 8px 0 2px; }
header .sub { color: var(--muted); }
nav { margin: 12px 0 8px; padding: 8px 0; border-top: 1px solid var(--line);
      border-bottom: 1px solid var(--line); display: flex; flex-wrap: wrap; row-gap: 4px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; white-space: nowrap; }
section { margin: 26px 0; break-inside: avoid-page; }
h2 { font-size: 18px; margin: 0 0 6px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
p.note { color: var(--muted); margin: 4px 0 8px; }
p.empty { color: var(--muted); font-style: italic; padding: 10px 12px; background: #f6f6f8;
          border-radius: 4px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
/* long paths, signatures and kernel names wrap anywhere: no table is wider than the page */
td { overflow-wrap: anywhere; }
table.findings td:nth-child(3) { overflow-wrap: normal; }
/* call sites and module paths: shortened in the middle by the report, one line each, the full path on hover */
.site { white-space: nowrap; }
th { background: #f3f4f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td code, .kv td:last-child { word-break: break-all; }
table.kv { width: auto; } table.kv th { width: 190px; }
.sev { display: inline-block; white-space: nowrap; padding: 0 7px; border-radius: 9px; font-size: 12px; color: #fff;
       background: #7f8c8d; }
.sev-critical { background: #c0392b; } .sev-warning { background: #e67e22; }
.sev-info { background: #2e86c1; }
details summary { cursor: pointer; color: var(--accent); }
pre { white-space: pre-wrap; word-break: break-all; font-size: 12px; background: #f6f6f8; padding: 6px 8px;
      margin: 4px 0; }
.plot { width: 100%; min-height: 120px; }
ul.warn { color: #8a4b00; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
@page { size: A4 landscape; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav, .modebar-container { display: none !important; }
  section { break-inside: auto; }
  .plot, table, tr { break-inside: avoid; }
  h2 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""

# Draws every figure from the JSON island, then flags readiness (and render time) for tests and tools.
_BOOT = """(function () {
  var t0 = performance.now();
  var figs = JSON.parse(document.getElementById("np-figures").textContent);
  var ids = Object.keys(figs);
  var jobs = ids.map(function (id) {
    var f = figs[id];
    return Plotly.newPlot(document.getElementById(id), f.data, f.layout, f.config);
  });
  Promise.all(jobs).then(function () {
    window.__np_render_ms = performance.now() - t0;
    window.__np_ready = true;
  }, function (e) {
    window.__np_error = String(e);
    window.__np_ready = true;
    console.error("neuron-prof report: a figure failed to draw: " + e);
  });
  // paper is narrower than the screen: re-fit the figures before printing
  window.addEventListener("beforeprint", function () {
    ids.forEach(function (id) { Plotly.Plots.resize(document.getElementById(id)); });
  });
})();"""


def esc(s: object) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape(str(s), quote=True)


def json_for_script(obj: Any) -> str:
    """JSON that is safe inside a <script> element: no `<`, `>` or `&` can end or confuse it."""
    s = orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], num: Sequence[int] = (), cls: str = ""
) -> str:
    """An HTML table; cells are escaped unless wrapped in Raw; columns in `num` are right-aligned."""

    def cell(tag: str, i: int, v: Any) -> str:
        c = ' class="num"' if i in num else ""
        return f"<{tag}{c}>{v.html if isinstance(v, Raw) else esc(v)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    c = f' class="{esc(cls)}"' if cls else ""
    return f"<table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Raw:
    """Markup built by this module from escaped parts (never from raw trace text)."""

    __slots__ = ("html",)

    def __init__(self, markup: str) -> None:
        self.html = markup


def empty(message: str) -> str:
    return f'<p class="empty">{esc(message)}</p>'


def note(message: str) -> str:
    return f'<p class="note">{esc(message)}</p>'


def plot_div(fig_id: str) -> str:
    return f'<div class="plot" id="{esc(fig_id)}"></div>'


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def page(
    title: str,
    subtitle: str,
    sections: Sequence[tuple[str, str, str]],
    figures: dict[str, Any],
    plotly_js: str,
    footer: str,
) -> str:
    """The whole document. `sections` are (id, title, inner html); `figures` maps div id -> figure dict."""
    nav = "".join(f'<a href="#{esc(sid)}">{esc(t)}</a>' for sid, t, _ in sections)
    body = "".join(section(sid, t, inner) for sid, t, inner in sections)
    csp = (
        "default-src 'none'; "
        f"script-src {_sha256(plotly_js)} {_sha256(_BOOT)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style>"
        f"<script>{plotly_js}</script></head><body>"
        f'<header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div></header>'
        f"<nav>{nav}</nav>{body}<footer>{esc(footer)}</footer>"
        f'<script type="application/json" id="np-figures">{json_for_script(figures)}</script>'
        f"<script>{_BOOT}</script></body></html>\n"
    )
