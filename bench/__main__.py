"""The benchmark suite (issue 9): `python -m bench` (or `make bench`) runs every benchmark, one table each.

    python -m bench                          # the whole suite at the issue's sizes
    python -m bench ingest --events 1200000  # one benchmark; the options after it go to that benchmark
    python -m bench capture export tui       # several, default options
    python -m bench --quick                  # every benchmark at small sizes (a smoke run, ~minutes)
    python -m bench --events 2e5             # every event-sized benchmark at 200k events
    python -m bench --list
    python -m bench accuracy --programs 'clean_*' # findings against the tests/userland programs' tags

Each benchmark runs in its own process (so peak RSS is its own) and prints its table as it measures it:
every ratio in a table is measured in that one run. The output of the run, with the machine (CPUs, CPU
model, RAM) and its load before and after, is also kept in bench/out/<benchmark>.txt (gitignored); the
curated tables live in bench/RESULTS.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import _machine

HERE = Path(__file__).resolve().parent
REAL_DIR = HERE.parents[1] / "shared" / "traces" / "kineto"


@dataclass(frozen=True)
class Bench:
    module: str
    about: str
    args: Callable[[int | None, bool], list[str]]
    """(events or None, quick) -> the benchmark's default arguments in the suite."""
    env: tuple[tuple[str, str], ...] = ()


def _events(default: int, quick_n: int) -> Callable[[int | None, bool], list[str]]:
    return lambda n, quick: ["--events", str(n or (quick_n if quick else default))]


def _fixed(full: list[str], quick: list[str]) -> Callable[[int | None, bool], list[str]]:
    return lambda _n, q: list(quick if q else full)


def _largest_real() -> Path | None:
    found = sorted(REAL_DIR.glob("*.json*"), key=lambda p: p.stat().st_size) if REAL_DIR.is_dir() else []
    return found[-1] if found else None


class Skip(Exception):
    """A benchmark that cannot run here (its input is absent): reported, not failed."""


def _export_real(n: int | None, quick: bool) -> list[str]:
    real = _largest_real()
    if real is None:
        raise Skip(f"no real trace in {REAL_DIR}")
    return ["--trace", str(real), *_events(1_000_000, 100_000)(n, quick)]


def _ingest(n: int | None, quick: bool) -> list[str]:
    return [*_events(1_200_000, 100_000)(n, quick), *(["--real"] if _largest_real() else [])]


def _tui_file(cached: bool) -> Callable[[int | None, bool], list[str]]:
    """bench_tui on the generated Kineto JSON file (load included in the first screen); `cached`: the
    loader's columnar index is made first, so this is a second open."""

    def args(n: int | None, quick: bool) -> list[str]:
        from bench.bench_ingest import generated

        folder = Path(os.environ.get("TMPDIR", "/tmp")) / "neuron-prof-bench"
        folder.mkdir(parents=True, exist_ok=True)
        path = generated(n or (100_000 if quick else 1_200_000), folder)  # issue 24: a 1.2M-event file
        if cached:  # in a child process: this one stays small (peak RSS would be inherited through fork)
            subprocess.run(
                [sys.executable, "-c", "import sys, neuron_prof; neuron_prof.load(sys.argv[1])", str(path)],
                check=True,
                cwd=HERE.parent,
            )
        return ["--trace", str(path), *(["--repeat", "2"] if quick else [])]

    return args


BENCHES: dict[str, Bench] = {
    "capture": Bench(
        "bench.bench_capture",
        "step time on tiny ops: none / torch.profiler / neuron_prof.profile (CPU, emulated, CUDA); end of capture",
        _fixed([], ["--rounds", "1", "--steps", "4"]),
    ),
    "probes": Bench(
        "bench.bench_probes",
        "default probes vs bare torch.profiler (CPU adapter)",
        _fixed([], ["--rounds", "1", "--steps", "5"]),
    ),
    "probes-neuron": Bench(
        "bench.bench_probes",
        "default probes vs bare torch.profiler on the emulated device",
        _fixed(["--backend", "neuron"], ["--backend", "neuron", "--rounds", "1", "--steps", "5"]),
    ),
    "emulator": Bench(
        "bench.bench_emulator", "per-op cost of the emulated neuron device", _fixed([], ["--ops", "1000"])
    ),
    "ingest": Bench(
        "bench.bench_hta",
        "load 1.2M events: orjson / neuron_prof.load (1st, 2nd open) / HTA, "
        "generated and a real trace repeated",
        _ingest,
    ),
    "export": Bench(
        "bench.bench_export",
        ".pftrace and JSON writing on a generated 1M-event trace",
        lambda n, q: [*_events(1_000_000, 100_000)(n, q), *(["--proto-events", "20000"] if q else [])],
    ),
    "export-real": Bench(
        "bench.bench_export", "the same on a real trace repeated with shifted times", _export_real
    ),
    "tui": Bench(
        "bench.bench_tui",
        "TUI first screen and keypress latency at 1M events",
        lambda n, q: [*_events(1_000_000, 100_000)(n, q), *(["--repeat", "2"] if q else [])],
    ),
    "tui-file": Bench(
        "bench.bench_tui",
        "TUI opening a 1.2M-event Kineto JSON file, first open (no index)",
        _tui_file(False),
        (("NEURON_PROF_CACHE", "0"),),
    ),
    "tui-file-cached": Bench(
        "bench.bench_tui", "TUI opening the same file again (columnar index beside it)", _tui_file(True)
    ),
    "merge": Bench(
        "bench.bench_merge",
        "merge peak RSS and time at 2 and 4 ranks: streaming (as shipped) against all ranks in memory",
        lambda n, q: ["--events", str(n or (50_000 if q else 300_000))],
    ),
    "fleet": Bench(
        "bench.bench_fleet",
        "job summary of 64 generated ranks of 100k events: Dask LocalCluster vs one by one in one process, client "
        "peak RSS, piece size, projection to 1,024 ranks on 16 workers; a simulated 1,024-rank job summarised",
        lambda n, q: ["--ranks", "8" if q else "64", "--events", str(n or (20_000 if q else 100_000)),
                      "--simulate", "64" if q else "1024"],
    ),
    "accuracy": Bench(
        "bench.bench_accuracy",
        "findings against the tags of the tests/userland programs: recall, precision, exact lines (run/profile x "
        "neuron/cpu)",
        _fixed([], ["--ways", "run-neuron,run-cpu"]),
    ),
    "explorer": Bench(
        "bench.bench_explorer",
        "Neuron Explorer Parquet folder (1M events, 10M instructions) and its capture folder with trace.json: "
        "load vs pyarrow reading every table whole",
        lambda n, q: ["--events", str(n or (100_000 if q else 1_000_000)),
                      "--instructions", str(1_000_000 if q else 10_000_000)],
    ),
    "warmup": Bench(
        "bench.bench_warmup",
        "warm-up plan on the emulated device: time to the first steady step cold / plan in-process / plan filling "
        "the persistent NEFF cache first",
        _fixed([], ["--rounds", "1"]),
    ),
    "formats": Bench(
        "bench.check_formats",
        "generated trace -> .pftrace passes pftrace_check; HTA parses it",
        lambda n, q: ["--events", str(min(n or 100_000, 200_000))],
    ),
}


OPT_IN: dict[str, Bench] = {
    "big": Bench(
        "bench.bench_big",
        "a 20 GB Kineto JSON generated in /tmp, summarised streamed into the column cache, then checked from it "
        "(~15 min, removed after; only when named)",
        _fixed([], ["--gb", "1"]),
    ),
    "capture-size": Bench(
        "bench.bench_capture_size",
        "a Hugging Face GPT-2 run captured (import transformers inside): events, MB, seconds with every Python "
        "call kept / by default / under --max-events (the full capture takes minutes; only when named)",
        _fixed([], ["--modes", "default,max-events"]),
    ),
    "gpu": Bench(
        "bench.gpu_check",
        "the prepared script for a lent GPU: a tiny GPT with planted syncs and recompiles, none / torch.profiler / "
        "neuron_prof in new processes: step time, end of capture, findings at their lines (--device neuron: dry run)",
        _fixed([], ["--device", "neuron", "--pairs", "1"]),
    ),
}
"""Benchmarks run only when named (too long or too big for the suite)."""


def _usage() -> str:
    rows = "\n".join(f"  {k:16} {b.about}" for k, b in {**BENCHES, **OPT_IN}.items())
    return f"{__doc__}\nbenchmarks:\n{rows}\n"


def _run_one(name: str, args: list[str], out_dir: Path) -> int:
    b = {**BENCHES, **OPT_IN}[name]
    cmd = [sys.executable, "-m", b.module, *args]
    envs = "".join(f"{k}={v} " for k, v in b.env)
    head = f"## {name}: {b.about}\n$ {envs}python -m {b.module} {' '.join(args)}\n{_machine.describe()}\n"
    print(head, flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with (out_dir / f"{name}.txt").open("w") as log:
        log.write(head + "\n")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(b.env)}
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=HERE.parent
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("USDT:"):  # Kineto's trace points on stderr, one per profiler start/stop
                continue
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
        tail = f"[{name}: exit {rc}, {time.perf_counter() - t0:.0f} s; load after: {_machine.load()}]\n"
        log.write(tail)
    print(tail, flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv[:1] or "--help" in argv[:1] or "--list" in argv:
        print(_usage())
        return 0
    names = []
    while argv and not argv[0].startswith("-"):
        if argv[0] not in BENCHES and argv[0] not in OPT_IN:
            print(f"unknown benchmark {argv[0]!r}\n{_usage()}", file=sys.stderr)
            return 2
        names.append(argv.pop(0))
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
    events = None
    if len(names) != 1 and argv:
        # Suite-wide options: --events N applies to every event-sized benchmark.
        if argv[0] == "--events" and len(argv) == 2:
            events = int(float(argv[1]))
            argv = []
        else:
            print(
                "options after several benchmarks: only --events N and --quick\n" + _usage(), file=sys.stderr
            )
            return 2
    out_dir = HERE / "out"
    failed = []
    for name in names or list(BENCHES):
        try:
            args = argv if names and len(names) == 1 and argv else {**BENCHES, **OPT_IN}[name].args(events, quick)
        except Skip as e:
            print(f"## {name}: skipped ({e})\n", flush=True)
            continue
        if _run_one(name, args, out_dir) != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
