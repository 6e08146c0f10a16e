"""The compile and fallback views on a real capture, at 80x24 and 160x48.

`neuron-prof run --emulate-neuron` profiles SCRIPT (in a deep folder, so its call sites are long paths): its
loop changes the batch size, so aten::addmm, aten::relu, aten::mm and aten::cat compile one signature per
size at known lines, and torch.linalg.svdvals and torch.sort fall back to the CPU. Expected values come
from SCRIPT and from the raw compile and fallback slices of the trace, not from the views' code.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from neuron_prof.analysis import signature_text
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.loaders import load
from neuron_prof.model import Trace, TraceBuilder, TrackKind
from neuron_prof.tui.app import NeuronProfApp
from tests._tui_pilot import ready, screen_text, shown, table
from tests.userland import _fork as forked

SCRIPT = """\
import torch

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("neuron")
w = torch.randn(32, 32).to("neuron")
for n in (8, 16, 24, 8):
    x = torch.randn(n, 32).to("neuron")
    y = model(x)
    z = x @ w
    s = torch.linalg.svdvals(z)
    v, i = torch.sort(y, dim=1)
    c = torch.cat([x] * 16)
"""
FILE = "some_rather_long_project_name/training_scripts/tiny.py"
SIZES = [(80, 24), (160, 48)]
Capture = tuple[Path, Trace]


def line_of(statement: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.splitlines(), 1) if statement in line)


OP_LINE = {
    "aten::addmm": line_of("model(x)"),
    "aten::relu": line_of("model(x)"),
    "aten::mm": line_of("x @ w"),
    "aten::cat": line_of("torch.cat"),
}


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    """SCRIPT run by the real `neuron-prof run --emulate-neuron`, in its own process."""
    root = tmp_path_factory.mktemp("capture")
    script = root / FILE
    script.parent.mkdir(parents=True)
    script.write_text(SCRIPT)
    # `x @ w`'s compiles at their line: operator statements need --operator-lines
    # through main() in a process forked from one that imported torch already (the suite's time)
    cmd = [forked.CLI, "run", "--emulate-neuron", "--operator-lines", "-q", "-o", "t.json", FILE]
    res = forked.run(cmd, cwd=root, timeout=300)
    out = root / "t.json"
    assert res.returncode == 0 and out.exists(), res.stdout[-2000:] + res.stderr[-2000:]
    return out, load(out)


def raw_compiles(trace: Trace) -> dict[str, list[int]]:
    """Compile slice rows by op name, straight from the compile track."""
    by_op: dict[str, list[int]] = defaultdict(list)
    for r in trace.slices_on(TrackKind.COMPILE):
        by_op[trace.slice_name(int(r))].append(int(r))
    return by_op


def raw_signature(trace: Trace, row: int) -> str:
    """The input shapes of the host op that paid for compile `row` (the flow into it), as the views write
    shapes; the compile slice's own signature is a hash."""
    src = trace.flows.src[trace.flows.dst == row]
    assert len(src) == 1, trace.slice_args(row)
    return signature_text(trace.slice_args(int(src[0]))["Input Dims"])


def pane_text(app: NeuronProfApp) -> str:
    """The detail pane's lines joined back into one text (the pane wraps long values at spaces)."""
    from neuron_prof.tui.screens.base import Detail

    lines = screen_text(app).splitlines()
    top = max(i for i, line in enumerate(lines) if line.startswith("───"))
    pane = app.screen.query_one(Detail)
    # a text longer than the pane scrolls: its scrollbar's glyphs sit in the last columns
    bar = 3 if pane.show_vertical_scrollbar else 0
    body = [line[: len(line) - bar] + re.sub("[▁▂▃▄▅▆▇█]", " ", line[len(line) - bar :]) for line in lines[top + 1 : -1]]
    return " ".join(line.strip() for line in body if line.strip())


def table_lines(app: NeuronProfApp) -> list[str]:
    """The table's drawn rows (below its header, above the detail pane's rule)."""
    lines = screen_text(app).splitlines()
    end = max(i for i, line in enumerate(lines) if line.startswith("───"))
    return [line for line in lines[2:end] if line.strip()]


@pytest.mark.parametrize("size", SIZES)
async def test_costliest_op_first_expands_to_its_signatures_at_their_line(
    capture: Capture, size: tuple[int, int]
) -> None:
    path, trace = capture
    by_op = raw_compiles(trace)
    total = {op: int(trace.slices.dur_ns[rows].sum()) for op, rows in by_op.items()}
    top = max(total, key=total.__getitem__)
    sigs = {raw_signature(trace, r) for r in by_op[top]}
    assert set(by_op) == set(OP_LINE) and len(sigs) >= 3  # the script did what it says
    app = NeuronProfApp([path])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        t = table(app)
        # GIVEN one row per op, THEN the op with the most compile time is first, with its total
        assert shown(t, "parent") == [-1] * len(by_op)
        first = table_lines(app)[0]
        assert top in first and fmt_ns(total[top]) in first
        assert shown(t, "count")[0] == len(by_op[top])
        # WHEN enter expands it, THEN one row per signature, each at the statement's exact line
        await pilot.press("enter")
        await pilot.pause()
        n = len(sigs)
        assert shown(t, "parent")[: n + 1] == [-1] + [t.order[0]] * n
        assert set(shown(t, "signature")[1 : n + 1]) == sigs
        site = f"{FILE}:{OP_LINE[top]}"
        assert shown(t, "where")[1 : n + 1] == [site] * n
        # the long path is shortened in its middle: the file and ":LINE" stay visible on every row
        for line in table_lines(app)[: n + 1]:
            assert f"/{Path(FILE).name}:{OP_LINE[top]}" in line and site not in line, line
        # the detail pane of a signature row: full signature, exact line, the user's stack
        await pilot.press("down")
        await pilot.pause()
        sig = shown(t, "signature")[1]
        pane = pane_text(app)
        assert f"signature: {sig}" in pane
        assert f"call site: {site}" in pane
        assert f"{site} <module>" in pane
        # enter on the op again collapses it
        await pilot.press("up", "enter")
        await pilot.pause()
        assert shown(t, "parent") == [-1] * len(by_op)


@pytest.mark.parametrize("size", SIZES)
async def test_a_long_signature_is_cut_in_the_table_and_whole_in_the_detail(
    capture: Capture, size: tuple[int, int]
) -> None:
    path, trace = capture
    cat = raw_compiles(trace)["aten::cat"]
    longest = max((raw_signature(trace, r) for r in cat), key=len)
    assert len(longest) > size[0]  # longer than the screen: the table cannot show it whole
    app = NeuronProfApp([path])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        t = table(app)
        t.move_to(shown(t, "name").index("aten::cat"))
        await pilot.press("enter")
        await pilot.pause()
        t.move_to(shown(t, "signature").index(longest))
        await pilot.pause()
        row = next(line for line in table_lines(app) if longest[:20] in line)
        assert longest not in row and "…" in row
        assert f"signature: {longest}" in pane_text(app)
        # the signature column keeps most of the width: the op column does not eat it (issue 16)
        widths = {c.key: w for c, w in t.shown_columns()}
        assert widths["label"] >= size[0] // 2 - 6 and widths["where"] >= 20


@pytest.mark.parametrize("size", SIZES)
async def test_fallback_rows_name_the_call_and_filter_by_user_names(
    capture: Capture, size: tuple[int, int]
) -> None:
    path, trace = capture
    fell = {trace.slice_name(int(r)) for r in trace.slices_on(TrackKind.FALLBACK)}
    assert {"aten::_linalg_svd", "aten::sort"} <= fell
    svd_site = f"{FILE}:{line_of('svdvals')}"
    app = NeuronProfApp([path])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        t = table(app)
        # GIVEN torch.linalg.svdvals fell back as aten::_linalg_svd, THEN its row names both
        row = shown(t, "call_site").index(svd_site)
        assert shown(t, "name")[row] == "aten::_linalg_svd"
        svd_line = next(line for line in table_lines(app) if "_linalg_svd" in line)
        assert "aten::linalg_svdvals → aten::_linalg_svd" in svd_line
        assert f":{line_of('svdvals')}" in svd_line
        # WHEN filtered by the name the user wrote, or by an aten name, THEN that row shows
        for query, want in (
            ("torch.linalg.svdvals", "aten::_linalg_svd"),
            ("aten::linalg_svdvals", "aten::_linalg_svd"),
            ("_linalg_svd", "aten::_linalg_svd"),
            ("Tensor.sort", "aten::sort"),
        ):
            await pilot.press("slash", *query, "enter")
            await pilot.pause()
            assert shown(t, "name") == [want], query
            await pilot.press("escape")
            await pilot.pause()
        assert len(t.order) == len(t.data["name"])


async def test_compile_filter_finds_ops_by_name_and_signatures_by_line(capture: Capture) -> None:
    path, trace = capture
    n_mm = len({raw_signature(trace, r) for r in raw_compiles(trace)["aten::mm"]})
    app = NeuronProfApp([path])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("2", "slash", *f"tiny.py:{OP_LINE['aten::mm']}", "enter")
        await pilot.pause()
        t = table(app)
        # a line matches signature rows: they show under their op, expanded
        assert shown(t, "name") == ["aten::mm"] * (1 + n_mm)
        assert shown(t, "parent")[0] == -1 and len(set(shown(t, "signature")[1:])) == n_mm
        await pilot.press("escape", "slash", *"relu", "enter")
        await pilot.pause()
        # an op's name matches the op row alone (collapsed)
        assert shown(t, "name") == ["aten::relu"]


def _no_compile_trace(backend: str | None) -> Trace:
    b = TraceBuilder()
    b.process(1, name="host")
    main = b.thread_track(1, 1, "MainThread")
    b.add_slice(main, 1_000, 5_000, "aten::mm", "cpu_op")
    if backend:
        b.metadata["backend"] = backend
    return b.build()


@pytest.mark.parametrize(
    ("backend", "why"),
    [("cpu", "the cpu backend has no compile step"), (None, "not captured by neuron-prof")],
)
async def test_no_compiles_says_why(backend: str | None, why: str) -> None:
    app = NeuronProfApp([_no_compile_trace(backend)])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        t = table(app)
        assert len(t.order) == 0
        # the table itself says what is absent and why (wrapped at the screen's width)
        assert why in " ".join(line.strip() for line in screen_text(app).splitlines())


async def test_enter_on_the_compile_finding_opens_its_top_signature(capture: Capture) -> None:
    path, _ = capture
    app = NeuronProfApp([path])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, app)
        t = table(app)
        at = shown(t, "kind").index("first_call_compile")
        finding = app.data.rank.findings[int(t.order[at])]
        assert finding.call_site.startswith(FILE)
        t.move_to(at)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert app.current_mode == "compile"
        # GIVEN the finding names a line, THEN the cursor is on a signature row at that line, its op expanded
        c = table(app)
        assert c.value("parent") >= 0 and c.value("call_site") == finding.call_site
        assert f"call site: {finding.call_site}" in pane_text(app)
