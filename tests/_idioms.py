"""Idioms users write, each run on a device given by name ("cpu" or "neuron"): fixture module of
tests/test_emulator_idioms.py.

Each idiom is a function `f(dev) -> value` that runs the user's statements on device `dev` and returns plain
Python values (numbers, strings, bools, lists) that must be the same on every device: device-specific text
(", device='neuron:0'") is normalised away by the idiom itself, and random numbers are compared by
reproducibility, not value. The idioms live in _idioms_tensors.py and _idioms_training.py (registered in
_idiom_kit.IDIOMS). `python -m tests._idioms BACKEND OUT [NAME,NAME...]` runs the idioms (default: all) in
order, in one process (BACKEND: see _idiom_kit.enable_device), and appends one JSON line per idiom to OUT as
soon as it finishes, so a crash (a segfault) loses only the idiom that was running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from tests import _idioms_tensors, _idioms_training  # noqa: F401 - they register the idioms
from tests._idiom_kit import IDIOMS, enable_device

__all__ = ["IDIOMS", "results_on", "run_backend", "same"]


def _plain(v: Any) -> Any:
    """JSON-safe: tuples as lists, anything else unusual as its repr."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def run(dev: str, out: str, names: list[str]) -> None:
    with open(out, "a") as f:
        for name in names:
            f.write(json.dumps({"name": name, "started": True}) + "\n")
            f.flush()
            torch.manual_seed(0)
            t0 = time.perf_counter()
            try:
                rec = {"name": name, "ok": _plain(IDIOMS[name](dev))}
            except Exception as e:  # noqa: BLE001 - the error is the idiom's result
                tb = traceback.extract_tb(e.__traceback__)
                rec = {"name": name, "error": f"{type(e).__name__}: {e}".splitlines()[0][:400],
                       "where": f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""}
            rec["s"] = round(time.perf_counter() - t0, 2)
            f.write(json.dumps(rec) + "\n")
            f.flush()


def run_backend(backend: str, out: Path, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Run idioms `names` (default: all) on `backend` in a process of its own and return {name: record}:
    {"ok": value} or {"error": text}; a process that dies is restarted after the idiom it died in, which
    gets {"crash": returncode}."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONWARNINGS": "ignore"}
    todo = list(names or IDIOMS)
    results: dict[str, dict[str, Any]] = {}
    while todo:
        proc = subprocess.run([sys.executable, "-m", "tests._idioms", backend, str(out), ",".join(todo)],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        running = None
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("started"):
                running = rec["name"]
            else:
                results[rec["name"]] = rec
                running = None
        if running is not None:  # the process died inside this idiom
            results[running] = {"crash": proc.returncode, "stderr": proc.stderr[-2000:]}
            todo = todo[todo.index(running) + 1:]
        elif proc.returncode != 0:
            raise AssertionError(f"idiom runner on {backend} failed outside an idiom:\n{proc.stderr[-3000:]}")
        else:
            todo = []
    return results


_RESULTS: dict[str, dict[str, dict[str, Any]]] = {}
"""Every idiom's results per backend, once per test session (the CPU's serve each device's test)."""


def results_on(backends: list[str], folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{backend: run_backend(backend, all idioms)} for `backends`, each run once per session (those not yet
    run go side by side, each in a process of its own, writing into `folder`)."""
    todo = [b for b in backends if b not in _RESULTS]
    with ThreadPoolExecutor(2) as pool:
        futs = {b: pool.submit(run_backend, b, folder / f"{b}.jsonl") for b in todo}
        _RESULTS.update({b: f.result() for b, f in futs.items()})
    return {b: _RESULTS[b] for b in backends}


def same(a: Any, b: Any) -> bool:
    """Idiom results match: equal, floats within 1e-3 relative (rounded values may differ in the last
    digit)."""
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return abs(a - b) <= 1e-3 * max(1.0, abs(a))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


if __name__ == "__main__":
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else list(IDIOMS)
    run(enable_device(sys.argv[1]), sys.argv[2], names)
