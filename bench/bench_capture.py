"""Capture cost on microsecond ops (issue 32): step wall time of none / bare torch.profiler (the same options) /
``neuron_prof.profile()`` defaults, on a loop of tiny ops written with operators and as calls, on CPU
tensors, on the emulated neuron device in both launch modes, and on CUDA when a GPU is present; then the end of
a capture, whole process, against torch.profiler's own stop + export.

    python -m bench capture                       # 5 alternating rounds x 7 measured steps of 400 ops per row
    python -m bench capture --rounds 7 --iters 200
    python -m bench capture --only cpu --rounds 11 --end-iters 0    # the CPU tiny-op rows alone
    python -m bench capture --gpt                 # also the TinyGPT step CPU-time table (bench/_capture_gpt.py)
    python -m bench capture --fresh all           # every row also with one session per process

Rows marked "a process per session" start a new process for each session (the user's regime: one capture in a
new process), the modes' processes alternating round after round; the other rows alternate the modes' sessions
in one process (`bench/_capture_rows.py` says how the order is balanced).

Each row runs in its own process (`bench/_capture_rows.py`: the emulated device is enabled once per process);
within it the three modes alternate, round after round, in a rotated order. A row prints the median step time
of each mode with the spread of its rounds' medians (min-max), the ratio to torch.profiler (median of the
rounds' ratios, min-max), the same ratio in the process's CPU time per step (`time.process_time`: every thread's,
less sensitive than wall time to other processes on a shared machine) and the load average before and after. On
CUDA the "predicted" ratio beside the measured one is the emulated device's, in launch mode
(``NEURON_PROF_EMULATE_HOST_COST=launch``: a warm op costs the host a launch, its device time modelled on an
asynchronous queue), asynchronous, on the same statements. The emulated rows run in launch mode, in both launch modes (``NEURON_LAUNCH_BLOCKING`` 0 and 1), and one row in the
default Python mode for contrast.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

LAUNCH = {"NEURON_PROF_EMULATE_HOST_COST": "launch"}
ASYNC, BLOCKING = {"NEURON_LAUNCH_BLOCKING": "0"}, {"NEURON_LAUNCH_BLOCKING": "1"}
ROWS: list[tuple[str, str, str, dict[str, str]]] = [
    ("cpu, operators", "cpu", "ops", {}),
    ("cpu, calls", "cpu", "calls", {}),
    ("emulated neuron, operators, launch cost, async launch", "neuron", "ops", {**LAUNCH, **ASYNC}),
    ("emulated neuron, operators, launch cost, blocking launch", "neuron", "ops", {**LAUNCH, **BLOCKING}),
    ("emulated neuron, calls, launch cost, async launch", "neuron", "calls", {**LAUNCH, **ASYNC}),
    ("emulated neuron, operators, Python cost, async launch", "neuron", "ops", ASYNC),
]
CUDA_ROWS: list[tuple[str, str, str, dict[str, str]]] = [
    ("cuda, operators", "cuda", "ops", {}),
    ("cuda, calls", "cuda", "calls", {}),
]
PREDICTED_BY = {("cuda", "ops"): ROWS[2][0], ("cuda", "calls"): ROWS[4][0]}
"""The emulated row whose ratio predicts a CUDA row's: the device that costs the host a launch per op, asynchronous
as a CUDA stream, on the same statements."""


def _row(device: str, style: str, env: dict[str, str], a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench._capture_rows", "--device", device, "--style", style,
           "--rounds", str(a.rounds), "--steps", str(a.steps), "--iters", str(a.iters)]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _fresh(device: str, style: str, env: dict[str, str], a: argparse.Namespace) -> dict[str, Any]:
    from bench._capture_rows import fresh_row

    return fresh_row(device, style, env, a.rounds, a.steps, a.iters)


def _spread(xs: list[float], scale: float = 1e3) -> str:
    return f"{statistics.median(xs) * scale:.3f} ({min(xs) * scale:.3f}-{max(xs) * scale:.3f})"


def ratio(d: dict[str, Any], key: str = "per_round_s") -> tuple[float, float, float]:
    """neuron_prof / torch.profiler: the median of the rounds' ratios, their min and max (`key`: per_round_s, the
    step's wall time; per_round_cpu_s, the process's CPU time in it)."""
    pr = d[key]
    rs = [n / b for n, b in zip(pr["neuron_prof"], pr["torch.profiler"])]
    return statistics.median(rs), min(rs), max(rs)


def cells(name: str, device: str, style: str, d: dict[str, Any], ratios: dict[str, float]) -> list[str]:
    """One table row from a row's measurement `d` (`_capture_rows.measure`); its ratio goes into `ratios` (by
    row name), where a CUDA row finds the ratio its emulated row predicted (`PREDICTED_BY`), measured before it."""
    pr = d["per_round_s"]
    med, lo, hi = ratio(d)
    ratios[name] = med
    pred = ratios.get(PREDICTED_BY.get((device, style), ""))
    share = d["memory_probe_share"]
    cpu = ratio(d, "per_round_cpu_s") if "per_round_cpu_s" in d else None
    return [name, _spread(pr["none"]), _spread(pr["torch.profiler"]), _spread(pr["neuron_prof"]),
            f"{med:.3f}x ({lo:.3f}-{hi:.3f})", f"{pred:.3f}x" if pred is not None else "",
            f"{cpu[0]:.3f}x ({cpu[1]:.3f}-{cpu[2]:.3f})" if cpu is not None else "",
            f"{statistics.median(share) * 100:.2f}% CPU" if share else "-", f"{d['load'][0]:.1f}-{d['load'][1]:.1f}"]


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8, help="steps per mode per round (the first is not counted)")
    ap.add_argument("--iters", type=int, default=100, help="iterations of 4 tiny ops per step")
    ap.add_argument("--end-iters", type=int, default=300, help="the end-of-capture script's size (0: skip it)")
    ap.add_argument("--gpt", action="store_true", help="also the TinyGPT step CPU-time table")
    ap.add_argument("--only", choices=["cpu", "neuron", "cuda"], help="only the rows of this device")
    ap.add_argument("--fresh", choices=["none", "cpu", "all"], default="cpu",
                    help="which devices' rows are measured again with one session per process")
    a, rest = ap.parse_known_args(argv)

    from rich.console import Console
    from rich.table import Table

    con = Console()
    if not con.is_terminal:
        con = Console(width=200)  # bench/out/capture.txt keeps whole rows
    rows = [r for r in ROWS + (CUDA_ROWS if _cuda() else []) if a.only in (None, r[1])]
    t = Table(title=f"Step wall time, {4 * a.iters} tiny ops per step, {a.rounds} alternating rounds x "
                    f"{a.steps - 1} steps: median ms (min-max of the rounds' medians)", title_justify="left")
    for c in ("row", "none", "torch.profiler", "neuron_prof", "vs torch.profiler", "predicted",
              "CPU time vs torch.profiler", "memory probe", "load"):
        t.add_column(c, justify="left" if c == "row" else "right")
    ratios: dict[str, float] = {}
    for name, device, style, env in rows:
        d = _row(device, style, env, a)
        t.add_row(*cells(name, device, style, d, ratios))
        con.print(f"  {name}: {ratios[name]:.3f}x torch.profiler", style="dim")
    for name, device, style, env in rows:
        if a.fresh == "all" or a.fresh == device:
            fname = f"{name}, a process per session"
            t.add_row(*cells(fname, device, style, _fresh(device, style, env, a), ratios))
            con.print(f"  {fname}: {ratios[fname]:.3f}x torch.profiler", style="dim")
    con.print(t)
    if not _cuda():
        con.print("no GPU here: the CUDA rows (measured and predicted) run where torch.cuda.is_available()")
    if a.end_iters:
        _end(con, a.end_iters)
    if a.gpt:
        from bench import _capture_gpt

        _capture_gpt.main(rest)


def _end(con: Any, iters: int) -> None:
    from bench._capture_end import measure

    m = measure(iters, 2)
    npr, bare = m["np"], m["bare"]
    ev = statistics.median(r["events"] for r in npr)
    e_np, e_bare = statistics.median(r["end_s"] for r in npr), statistics.median(r["end_s"] for r in bare)
    c_np, c_bare = statistics.median(r["end_cpu_s"] for r in npr), statistics.median(r["end_cpu_s"] for r in bare)
    per = 1e5 / max(ev, 1.0)
    con.print(f"end of a capture, whole process ({len(npr)} runs each, alternating, {ev:,.0f} events, load "
              f"{m['load'][0]:.1f}-{m['load'][1]:.1f}): neuron_prof.profile() {e_np:.2f} s wall / {c_np:.2f} s CPU "
              f"from the last step to exit; torch.profiler stop + export_chrome_trace {e_bare:.2f} s / "
              f"{c_bare:.2f} s CPU; **{(e_np - e_bare) * per:+.2f} s wall, {(c_np - c_bare) * per:+.2f} s CPU per "
              f"100k events** beyond torch.profiler (target <= +1 s)")
    tm = npr[-1].get("timings_ns", {})
    con.print("  last run's phases (s): " + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in tm.items()
                                                       if isinstance(v, (int, float)) and v > 5e7))


if __name__ == "__main__":
    main()
