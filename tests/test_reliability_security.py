"""Nothing in a trace is ever executed or interpreted: op names, categories, call sites and args that look like
code, templates, Rich/Textual markup, HTML, Markdown or terminal escape sequences are shown as the literal text
they are in every view (summary text/Markdown/JSON, diff, merge, convert, HTML report, TUI)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.loaders import load
from neuron_prof.model import Arg, Cat, Trace, TraceBuilder, TrackKind

T0 = 1_700_000_000_000_000_000


def payloads(canary: Path) -> list[str]:
    return [
        f"__import__('os').system('touch {canary}')",
        f"eval(compile('open(\"{canary}\", \"w\")', 's', 'exec'))",
        "{{7*7}}{% for x in range(3) %}x{% endfor %}",
        "${7*7}#{7*7}%(x)s{0.__class__.__mro__}",
        "[bold red]x[/bold red][@click=app.quit]q[/]",
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)></script><script>alert(2)",
        "a|b`c`**d**[l](javascript:alert(1))",
        "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x00nul\nnew\u2028line",
    ]


def hostile_trace(canary: Path, scale: int = 1) -> Trace:
    """Host ops and fallbacks named by each payload, with payload call sites, categories and args."""
    b = TraceBuilder()
    proc = b.process(1, "host <b>[bold]</b>")
    th = b.track(proc, "thread {{7*7}}", TrackKind.THREAD, tid=1)
    fb = b.track(proc, "fallback", TrackKind.FALLBACK)
    ts = T0
    for k, p in enumerate(payloads(canary)):
        for _ in range(3):
            b.add_slice(th, ts, (k + 1) * 1000 * scale, p, "cpu_op", {p: p, "Call stack": p})
            b.add_slice(fb, ts, 500 * scale, p, Cat.FALLBACK, {Arg.CALL_SITE: f"{p}.py:1"})
            ts += 10_000
    b.metadata["steps"] = [[0, T0, ts]]
    return b.build()


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    canary = tmp_path / "CANARY"
    a, b2 = tmp_path / "a.json", tmp_path / "b.pftrace"
    write_trace(hostile_trace(canary), a)
    write_trace(hostile_trace(canary, scale=2), b2)
    return {"a": a, "b": b2, "canary": canary}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _no_terminal_control(text: str, separators: bool = True) -> None:
    """No C0/C1 control character but newline (ESC sequences, NUL, BEL); nor U+2028/9 where lines matter."""
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n") or 0x7F <= ord(c) < 0xA0
           or (separators and c in "\u2028\u2029")]
    assert not bad, bad[:5]


def test_summary_text_shows_literal_escaped_names(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, "summary", str(files["a"]), "--top", "20")
    _no_terminal_control(out)
    for p in payloads(files["canary"])[:8]:
        assert p[:60] in out, p  # printable payloads appear verbatim (Rich markup not applied, templates not run)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x00nul\\x0anew\\u2028line" in out
    # no template evaluated {{7*7}} / ${7*7} (a bare "49" can be in the temporary path: look for rendered forms)
    assert "{{7*7}}" in out and "${7*7}" in out and "49xxx" not in out and "49#49" not in out
    assert not files["canary"].exists()


def test_summary_markdown_cannot_break_out_of_its_table(files: dict[str, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    md = _run(capsys, "summary", str(files["a"]), "--markdown", "--top", "20")
    _no_terminal_control(md)
    assert "<script" not in md and "<img" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "a\\|b\\`c\\`" in md  # pipes and backticks escaped
    rows = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert rows
    for table in re.split(r"\n\s*\n", md):  # every row of a table has the header's number of cells
        t_rows = [ln for ln in table.splitlines() if ln.startswith("|")]
        if t_rows:
            n = t_rows[0].replace("\\|", "").count("|")
            assert all(r.replace("\\|", "").count("|") == n for r in t_rows), table


def test_summary_json_keeps_names_as_data(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_run(capsys, "summary", str(files["a"]), "--json", "--top", "20"))
    names = {o["name"] for o in doc["totals"]["top_ops"]}
    assert set(payloads(files["canary"])) <= names  # exactly the bytes from the trace


def test_diff_text_and_markdown(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys, "diff", str(files["a"]), str(files["b"]))
    _no_terminal_control(text)
    assert payloads(files["canary"])[4] in text and "\\x1b]0;pwned" in text
    md = _run(capsys, "diff", str(files["a"]), str(files["b"]), "--markdown")
    _no_terminal_control(md)
    assert "<script" not in md and "&lt;script&gt;" in md
    assert not files["canary"].exists()


def test_merge_and_convert_keep_every_string_verbatim(files: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    want = sorted(set(payloads(files["canary"])))
    merged = tmp_path / "m.json"
    assert main(["merge", str(files["a"]), str(files["b"]), "-o", str(merged)]) == 0
    conv = tmp_path / "c.pftrace"
    assert main(["convert", str(files["a"]), str(conv)]) == 0
    capsys.readouterr()
    for path in (merged, merged.with_suffix(".pftrace"), conv):
        if not path.exists():
            continue
        tr = load(path)
        names = {tr.slice_name(i) for i in range(len(tr.slices))}
        assert set(want) <= names, path
        row = int(np.flatnonzero(np.array([tr.slice_name(i) == want[0] for i in range(len(tr.slices))]))[0])
        assert tr.slice_args(row).get(want[0]) in (want[0], None)
    assert not files["canary"].exists()


def test_report_escapes_html_and_cannot_close_its_scripts(files: dict[str, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    benign = tmp_path / "benign.json"
    b = TraceBuilder()
    th = b.track(b.process(1, "host"), "thread", TrackKind.THREAD, tid=1)
    fb = b.track(b.process(1, "host"), "fallback", TrackKind.FALLBACK)
    for k in range(9):
        for _ in range(3):
            b.add_slice(th, T0 + k, 1000, f"op{k}", "cpu_op", {"x": 1})
            b.add_slice(fb, T0 + k, 500, f"op{k}", Cat.FALLBACK, {Arg.CALL_SITE: "m.py:1"})
    write_trace(b.build(), benign)
    pages = {}
    for name, src in (("hostile", files["a"]), ("benign", benign)):
        out = tmp_path / f"{name}.html"
        assert main(["report", str(src), "-o", str(out)]) == 0
        pages[name] = out.read_text()
    capsys.readouterr()
    h, ok = pages["hostile"], pages["benign"]
    assert "<script>alert" not in h and "<img src=x" not in h
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in h
    # the figures' labels (plotly draws a few tags in them) hold the escaped text, "<" never
    assert "\\u0026lt;script\\u0026gt;alert(1)" in h and "\\u003cscript" not in h.lower()
    # the trace's "</script>" never closes one of the page's scripts: same number of tags as a benign page
    for tag in ("<script", "</script", "<img"):
        assert h.lower().count(tag) == ok.lower().count(tag), tag
    assert not files["canary"].exists()


async def test_tui_shows_markup_literally_and_escapes_control_characters(files: dict[str, Path]) -> None:
    from neuron_prof.tui.app import NeuronProfApp
    from tests._tui_pilot import SIZE, ready, screen_styles, screen_text

    app = NeuronProfApp([files["a"]])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        # the ops view lists every op name (table cells); the fallback view's detail pane shows one (Text)
        for view, shown in (("4", ("[bold red]x[/bold red][@click=app.quit]q[/]", "<script>alert(1)</script>",
                                   "\\x1b]0;pwned\\x07\\x1b[2J")),
                            ("3", ("op: [bold red]x[/bold red][@click=app.quit]q[/]",))):
            await pilot.press(view)
            await pilot.pause()
            for _ in range(len(payloads(files["canary"])) if view == "3" else 0):  # down to the markup row
                if shown[0] in screen_text(app):
                    break
                await pilot.press("down")
                await pilot.pause()
            text = screen_text(app)
            for literal in shown:
                assert literal in text, (view, literal)
            _no_terminal_control(text, separators=False)  # U+2028 drives no terminal; the TUI shows it as is
            assert not any(st.meta and "@click" in st.meta for st in screen_styles(app))
        assert app.is_running
    assert not files["canary"].exists()


@pytest.mark.parametrize("where", ["xdg", "home"])
def test_a_hostile_index_cache_is_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   where: str) -> None:
    """The index holds no pickles: head read by orjson, raw numeric columns mapped with the dtypes it
    names, any other dtype (an object array) refused. A hostile one is planted where the loader looks by
    default (formats.md: $XDG_CACHE_HOME/neuron-prof, else ~/.cache/neuron-prof) with the trace's valid key,
    so the loader reads it (a valid index there is used: checked first) and only the refusal stops it."""
    import pickle

    from neuron_prof.loaders import _cache, coldir

    monkeypatch.delenv("NEURON_PROF_CACHE_DIR", raising=False)
    if where == "xdg":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        folder = tmp_path / "cache" / "neuron-prof"
    else:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        folder = tmp_path / "home" / ".cache" / "neuron-prof"
    canary = tmp_path / "CANARY"
    src = tmp_path / "t.json"
    write_trace(hostile_trace(canary), src)
    planted = _cache.index_path(src)
    assert planted is not None and planted.parent == folder
    planted.mkdir(parents=True)
    # GIVEN a valid index at that place, the loader takes the trace from it (it is really read)
    marker = TraceBuilder()
    marker.add_slice(marker.thread_track(1, 1), 0, 1, "from the index")
    coldir.write_trace(planted, marker.build(), _cache._key(src))
    assert load(src).slice_name(0) == "from the index"

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (open, (str(canary), "w"))

    # WHEN a hostile one replaces it: a column said to hold Python objects, its bytes a pickle
    head = json.loads((planted / coldir.HEAD).read_text())
    payload = pickle.dumps(Boom())
    (planted / "slices.name").write_bytes(payload)
    head["columns"]["slices.name"] = ["|O", len(payload) // 8]
    (planted / coldir.HEAD).write_text(json.dumps(head))
    # the column itself is refused (a mapped object array would hold the payload's bytes as object pointers:
    # the process would crash on the first read rather than fail a test)
    with pytest.raises(ValueError, match="not numeric"):
        coldir.column(planted, head, "slices.name")
    tr = load(src)
    # THEN nothing ran, and the trace came from the file itself
    assert not canary.exists()
    assert {tr.slice_name(i) for i in range(len(tr.slices))} >= set(payloads(canary))


def _non_loopback_addresses() -> list[str]:
    import socket
    import subprocess

    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    return [a for a in out if ":" not in a and not a.startswith("127.")] or [
        a for a in {socket.gethostbyname(socket.gethostname())} if not a.startswith("127.")]


def test_open_is_not_reachable_from_another_interface(files: dict[str, Path]) -> None:
    import socket

    from neuron_prof.cli._open_server import TraceServer

    others = _non_loopback_addresses()
    if not others:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    with TraceServer(files["b"], port=0) as srv:
        assert srv._srv.server_address[0] == "127.0.0.1"
        socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()  # it is listening
        for addr in others:
            with pytest.raises(OSError):
                socket.create_connection((addr, srv.port), timeout=2).close()


def test_servers_default_to_loopback() -> None:
    from neuron_prof.cli._tui import command as tui

    host = next(p for p in tui.params if p.name == "host")
    assert host.default == "127.0.0.1"


def test_json_in_a_script_cannot_end_it() -> None:
    """The report's figure data sits in <script> elements: no "<", ">" or "&" survives in it, the text does."""
    from neuron_prof.exporters._report_html import json_for_script

    text = "</script><script>alert(1)</script><!-- &amp;"
    s = json_for_script({"name": text})
    assert not {"<", ">", "&"} & set(s)
    assert json.loads(s) == {"name": text}
