"""The one prepared script for a lent GPU (issue 32 item 5): capture cost, the end of a capture and the findings'
accuracy on a real device, in one call.

    python -m bench gpu                      # on CUDA: the workload's three modes, alternating, in new processes
    python -m bench gpu --device neuron      # the dry run here: the same on the emulated device
    python -m bench gpu --pairs 3 --out DIR  # DIR/gpu_check.json keeps every figure (on the device tool: $OUT)

The workload is bench/gpu_workload.py: a tiny GPT, 12 eager steps then 9 steps under `torch.compile` on three
sequence lengths, with a `.item()`, a `nonzero` and a host-to-device copy from numpy planted in every step and
tagged with the findings they should give (EXPECT comments, tests/userland's grammar). Each round runs
it without a profiler, under bare torch.profiler (the options neuron_prof gives it, then `export_chrome_trace`)
and under `neuron_prof.profile()`, each in a new process, in an order rotated each round. Printed: the eager
steady step (steps 2-11) and the compiled steps per mode, the ratio to torch.profiler (median of the rounds'),
the end of a capture (from the last step to the process's exit) per mode, and the findings of the last
neuron_prof run scored against the tags as `bench accuracy` scores (recall at the exact line, unexplained
alarms). The rounds' spread is printed beside each median; a difference inside it is noise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.userland import _harness as h  # noqa: E402  (the one copy of the matching rules)

WORKLOAD = Path(__file__).resolve().with_name("gpu_workload.py")
MODES = ("none", "torch", "neuron_prof")


def card(device: str) -> str:
    """The device's name as torch reports it (the GPU's model on CUDA)."""
    if device != "cuda":
        return f"{device} (emulated)" if device == "neuron" else device
    import torch

    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def run_once(device: str, mode: str, folder: Path) -> dict[str, Any]:
    """One process of the workload in `mode`; its JSON line, the end of its capture (`end_s`) and its trace."""
    trace = folder / f"{mode}.json"
    env = {**os.environ, "DEVICE": device, "MODE": mode, "TRACE_OUT": str(trace) if mode != "none" else "",
           "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, str(WORKLOAD)], capture_output=True, text=True, env=env, timeout=900)
    t_exit = time.time()
    if r.returncode != 0:
        raise RuntimeError(f"{mode} on {device}: exit {r.returncode}: {r.stderr[-3000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    d["end_s"] = t_exit - d["t_last"]
    d["trace"] = str(trace) if trace.exists() else ""
    return d


def steady(d: dict[str, Any]) -> float:
    """The eager steady step: the median of eager steps 2 on (0-1 pay first calls and the allocator)."""
    return statistics.median([t for t, p in zip(d["times"], d["phases"]) if p == "eager"][2:])


def compiled(d: dict[str, Any]) -> float:
    """The compiled steps' total (their recompiles included): what torch.compile costs in the run."""
    return sum(t for t, p in zip(d["times"], d["phases"]) if p.startswith("compiled"))


def findings(device: str, trace: str) -> dict[str, Any]:
    """The trace's `summary --json` findings scored against the workload's tags (tests/userland's rules)."""
    prog = h.load_program(WORKLOAD)
    doc, _ = h.summary(Path(trace))
    out = h.Outcome(prog.name, f"gpu-{device}", True, findings=doc.get("findings") or [],
                    lines=doc.get("lines") or [])
    s = h.score(prog, out)
    return {"expected": [f"{k}@{ln}" for k, ln, _ in s.expected], "found": s.found, "misses": s.misses,
            "alarms": s.alarms, "unexplained": s.unexplained, "exact": s.exact, "in_file": s.in_file,
            "off_line": s.off_line, "events": _events(trace)}


def _events(trace: str) -> int:
    from neuron_prof.loaders import load

    return int(load(Path(trace)).n_events)


def _spread(xs: list[float], scale: float = 1e3, fmt: str = ".2f") -> str:
    return f"{statistics.median(xs) * scale:{fmt}} ({min(xs) * scale:{fmt}}-{max(xs) * scale:{fmt}})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "neuron", "cpu"])
    ap.add_argument("--pairs", type=int, default=3, help="rounds of the three modes (each a new process)")
    ap.add_argument("--modes", default=",".join(MODES), help="a comma list of none, torch, neuron_prof")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="start no round that would end past this many seconds (the device lends 10 min a call)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for gpu_check.json (default: $OUT)")
    a = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    con = Console(width=160)
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            con.print("no GPU here (torch.cuda.is_available() is False): run it where the device tool lends one, "
                      "or `--device neuron` for the dry run on the emulated device")
            return 2
    modes = [m for m in MODES if m in a.modes.split(",")]
    if "neuron_prof" not in modes:
        ap.error("--modes needs neuron_prof (the findings are read from its trace)")
    load0 = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="neuron-prof-gpu-") as tmp:
        for r in range(a.pairs):
            r0 = time.monotonic()
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                folder = Path(tmp) / f"r{r}"
                folder.mkdir(exist_ok=True)
                d = run_once(a.device, mode, folder)
                if mode == "neuron_prof" and runs[mode]:  # the last one is scored; torch.profiler's: GBs, unread
                    Path(runs[mode][-1]["trace"]).unlink(missing_ok=True)
                elif mode == "torch" and d["trace"]:
                    Path(d["trace"]).unlink()
                runs[mode].append(d)
                con.print(f"  round {r} {mode}: steady {steady(d) * 1e3:.2f} ms, end {d['end_s']:.2f} s", style="dim")
            took = time.monotonic() - r0
            if r + 1 < a.pairs and time.monotonic() - t0 + took > a.budget_s:
                con.print(f"  stopping after {r + 1} rounds: another ({took:.0f} s) would end past --budget-s "
                          f"{a.budget_s:.0f}")
                break
        scored = findings(a.device, runs["neuron_prof"][-1]["trace"])
    ratios = [n / t for n, t in zip((steady(d) for d in runs["neuron_prof"]),
                                    (steady(d) for d in runs.get("torch", [])))]
    t = Table(title=f"bench gpu on {card(a.device)}: {len(runs['neuron_prof'])} rounds, each mode a new process, rotated order "
                    f"(median (min-max) of the rounds)", title_justify="left")
    for c in ("mode", "eager steady step ms", "compiled steps s", "end of capture s", "vs torch.profiler"):
        t.add_column(c, justify="left" if c == "mode" else "right")
    for mode in modes:
        rs = runs[mode]
        vs = (f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"
              if mode == "neuron_prof" and ratios else "")
        t.add_row(mode, _spread([steady(d) for d in rs]), _spread([compiled(d) for d in rs], 1.0),
                  _spread([d["end_s"] for d in rs], 1.0), vs)
    con.print(t)
    ev = scored["events"] or 0
    end_np = statistics.median(d["end_s"] for d in runs["neuron_prof"])
    end_t = statistics.median(d["end_s"] for d in runs["torch"]) if runs.get("torch") else None
    if ev and end_t is not None:
        con.print(f"end of a capture: {end_np - end_t:+.2f} s beyond torch.profiler's stop + export for "
                  f"{ev:,} events: {(end_np - end_t) * 1e5 / ev:+.2f} s per 100k events (target <= +1 s)")
    n = len(scored["expected"])
    con.print(f"findings: {scored['found']}/{n} planted at their exact line; misses {scored['misses'] or 'none'}; "
              f"{scored['alarms']} alarms, unexplained {scored['unexplained'] or 'none'}; exact line "
              f"{scored['exact']}/{scored['in_file']}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        doc = {"card": card(a.device), "host": platform.node(), "runs": runs, "ratios": ratios, "findings": scored,
               "load": [load0, os.getloadavg()[0]]}
        (Path(a.out) / "gpu_check.json").write_text(json.dumps(doc, indent=1))
    return 0 if scored["found"] == n else 1


if __name__ == "__main__":
    sys.exit(main())
