"""Efficiency per line and op (issue 37 items 1-2): FLOPs per line of a matmul-only and a conv-only program
captured for real on CPU against counts by hand (exact), and achieved rate and MFU on a real GPU trace."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.analysis import Context
from neuron_prof.analysis.efficiency.counts import op_work
from neuron_prof.analysis.efficiency.peaks import peak_for, trace_peak
from neuron_prof.analysis.efficiency.rates import efficiency_totals, line_efficiency, op_efficiency
from neuron_prof.analysis.sites.lines import line_table
from neuron_prof.cli import main

KINETO = Path("/work/shared/traces/kineto")
if not KINETO.is_dir():
    KINETO = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"
AMD = KINETO / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"

PROGRAM = textwrap.dedent("""\
    import sys
    import torch
    import neuron_prof

    a, b = torch.randn(64, 32), torch.randn(32, 16)
    x, w = torch.randn(2, 3, 16, 16), torch.randn(8, 3, 3, 3)
    lin = torch.nn.Linear(32, 24)
    bat1, bat2 = torch.randn(4, 8, 16), torch.randn(4, 16, 2)

    def matmuls():
        for _ in range(3):
            torch.mm(a, b)  # MM
            lin(a)  # LINEAR
            torch.bmm(bat1, bat2)  # BMM

    def convs():
        for _ in range(2):
            torch.nn.functional.conv2d(x, w, padding=1)  # CONV_PAD
            torch.nn.functional.conv2d(x, w, stride=2)  # CONV_STRIDE
            torch.nn.functional.conv_transpose2d(x, w.transpose(0, 1).contiguous(), stride=2)  # CONV_T

    with neuron_prof.profile(sys.argv[2], record_shapes=True, with_stack=True, quiet=True):
        matmuls() if sys.argv[1] == "matmul" else convs()
    """)


def _line(src: str, tag: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(f"# {tag}"))


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("eff")
    (d / "prog.py").write_text(PROGRAM)
    out = {}
    for kind in ("matmul", "conv"):
        out[kind] = d / f"{kind}.json"
        subprocess.run([sys.executable, str(d / "prog.py"), kind, str(out[kind])], check=True, cwd=d,
                       capture_output=True, timeout=120)
    return out


def _flops_by_line(path: Path) -> dict[int, int]:
    t = neuron_prof.load(path)
    ctx = Context(t)
    lt, e = line_table(t, ctx), line_efficiency(ctx)
    return {int(str(lt.call_site[i]).rsplit(":", 1)[1]): int(e.flops[i]) for i in range(len(lt))
            if str(lt.call_site[i]).startswith("prog.py:")}


def test_matmul_flops_per_line_are_the_hand_counts(captures: dict[str, Path]) -> None:
    got = _flops_by_line(captures["matmul"])
    # by hand: 3 calls each; mm 64x32 @ 32x16; linear 64x32 @ (24x32)^T; bmm 4 x (8x16 @ 16x2)
    assert got[_line(PROGRAM, "MM")] == 3 * 2 * 64 * 32 * 16
    assert got[_line(PROGRAM, "LINEAR")] == 3 * 2 * 64 * 32 * 24  # the addmm inside is not counted twice
    assert got[_line(PROGRAM, "BMM")] == 3 * 2 * 4 * 8 * 16 * 2


def test_conv_flops_per_line_are_the_hand_counts(captures: dict[str, Path]) -> None:
    got = _flops_by_line(captures["conv"])
    per_out = 3 * 3 * 3  # Cin x kh x kw multiply-adds per output element
    # padding 1: 16x16 out; stride 2, no padding: 7x7 out; both 2 images x 8 channels
    assert got[_line(PROGRAM, "CONV_PAD")] == 2 * 2 * (2 * 8 * 16 * 16) * per_out
    assert got[_line(PROGRAM, "CONV_STRIDE")] == 2 * 2 * (2 * 8 * 7 * 7) * per_out
    # transposed, weight [Cin=3... as given: [3, 8, 3, 3]]: every input position meets every weight: x has 3
    # channels of 16x16, the weight 3x8x3x3
    assert got[_line(PROGRAM, "CONV_T")] == 2 * 2 * (2 * 16 * 16) * (3 * 8 * 3 * 3)


def test_bytes_are_inputs_and_output_by_dtype(captures: dict[str, Path]) -> None:
    t = neuron_prof.load(captures["matmul"])
    e = op_efficiency(Context(t))
    i = list(e.name).index("aten::mm")
    # 3 calls: a (64x32) and b (32x16) read, 64x16 written, float32; the linear's mm-free addmm is its own op
    assert e.bytes[i] == 3 * 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert e.calls[i] == 3


def test_summary_json_lines_carry_flops(captures: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "--json", str(captures["matmul"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_site = {d["call_site"]: d for d in doc["lines"]}
    mm = by_site[f"prog.py:{_line(PROGRAM, 'MM')}"]
    assert mm["flops"] == 3 * 2 * 64 * 32 * 16 and mm["intensity"] > 0
    assert "mfu" not in mm  # a CPU run: no device time, no peak
    eff = doc["totals"]["efficiency"]
    assert eff["flops"] == sum(d["flops"] for d in doc["lines"])


def test_counts_follow_torch_for_the_common_ops() -> None:
    # torch.profiler's with_flops on torch 2.13: mm 65536, conv2d (padding 1) 221184, bmm 2048, mul 2048
    assert op_work("aten::mm", [[64, 32], [32, 16]], ["float", "float"])[0] == 65536
    assert op_work("aten::conv2d", [[2, 3, 16, 16], [8, 3, 3, 3], [], [], [], [], []],
                   ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                   ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"])[0] == 221184
    assert op_work("aten::bmm", [[4, 8, 16], [4, 16, 2]], ["float", "float"])[0] == 2048
    assert op_work("aten::mul", [[64, 32], [64, 32]], ["float", "float"])[0] == 2048
    assert op_work("aten::mm", [[64, 32], [32, 16]], ["c10::BFloat16"] * 2)[2] == "bf16"
    assert op_work("aten::t", [[4, 4]], ["float"]) is None  # a view: not counted


def _hand_mm(path: Path) -> tuple[int, int]:
    """FLOPs of the trace's aten::mm calls and the device time of the kernels launched inside them, read
    straight from the JSON (ac2g flows from the launch to the kernel)."""
    doc = json.loads(gzip.open(path, "rt").read())
    ev = doc["traceEvents"]
    mms = [e for e in ev if e.get("name") == "aten::mm" and e.get("ph") == "X"]
    flops = sum(2 * e["args"]["Input Dims"][0][0] * e["args"]["Input Dims"][0][1] * e["args"]["Input Dims"][1][1]
                for e in mms)
    starts = {e["id"]: e for e in ev if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    kernels = {(e["pid"], e["tid"], e["ts"]): e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"}
    dev = 0.0
    for f in (e for e in ev if e.get("ph") == "f" and e.get("cat") == "ac2g"):
        s, k = starts.get(f["id"]), kernels.get((f["pid"], f["tid"], f["ts"]))
        if s is None or k is None:
            continue
        if any(m["tid"] == s["tid"] and m["ts"] <= s["ts"] <= m["ts"] + m["dur"] for m in mms):
            dev += k["dur"]
    return flops, round(dev * 1000)


@pytest.mark.skipif(not AMD.exists(), reason="shared Kineto traces not present")
def test_mfu_of_a_real_gpu_trace() -> None:
    t = neuron_prof.load(AMD)
    ctx = Context(t)
    peak = trace_peak(t)
    assert peak is not None and "MI250" in peak.device  # ROCm's "AMD Radeon Graphics", 104 CUs, gfx90a
    e = op_efficiency(ctx)
    i = list(e.name).index("aten::mm")
    flops, dev_ns = _hand_mm(AMD)
    assert e.flops[i] == flops and dev_ns > 0
    assert abs(int(e.device_ns[i]) - dev_ns) <= 2  # µs -> ns rounding per kernel
    row = e.row(i)
    assert row["mfu"] == pytest.approx(flops / (dev_ns * 1e-9) / peak.of("fp32"), rel=1e-3)
    assert row["tflops"] == pytest.approx(flops / dev_ns / 1e3, rel=1e-3)
    lines = line_efficiency(ctx)
    assert len(lines) and lines.row(0).get("mfu", 0) > 0  # the trace has no stacks: one "no user line" row
    tot = efficiency_totals(ctx)
    assert tot["peak"]["source"] and 0 < tot["mfu"] < 1


def test_explorer_mfu_is_shown_beside_ours() -> None:
    t = neuron_prof.load(AMD)
    tot = efficiency_totals(Context(t), {"mfu_estimated_percent": 1.5, "total_time": 0.001})
    ex = tot["explorer"]
    assert ex["explorer_mfu_percent"] == 1.5
    assert ex["difference_points"] == pytest.approx(1.5 - ex["ours_mfu_percent"])


def test_peak_table_rows_name_their_source() -> None:
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB 80GB", "trn1.32xlarge",
                 "trn2.48xlarge"):
        p = peak_for(name)
        assert p is not None and p.source and p.flops["fp32"] > 0 and p.bytes_per_s > 0
    assert peak_for("NVIDIA H100 PCIe").device == "NVIDIA H100 PCIe"
    assert peak_for("trn2.48xlarge").of("bf16") == pytest.approx(667e12 / 4)
    assert peak_for("some laptop") is None


@pytest.mark.skipif(not AMD.exists(), reason="shared Kineto traces not present")
def test_report_roofline_is_a_valid_figure_with_the_roofs() -> None:
    import plotly.graph_objects as go

    from neuron_prof.analysis import report
    from neuron_prof.exporters._report_efficiency import efficiency_section

    t = neuron_prof.load(AMD)
    rep = report(t)
    figures: dict[str, object] = {}
    html = efficiency_section(rep.totals, rep.lines, figures)
    fig = figures["fig-roofline"]
    go.Figure(fig)  # plotly validates every key
    names = [d["name"] for d in fig["data"]]  # type: ignore[index]
    assert "ops" in names and "your lines" in names and any("fp32 roof" in n for n in names)
    assert "MFU" in html
