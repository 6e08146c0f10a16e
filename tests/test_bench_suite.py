"""The benchmark suite's wiring (bench/__main__.py) and the generator's traces in the Perfetto checks.

No timings are asserted: benchmarks run with `make bench`, never in `make test`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench import __main__ as suite
from bench import bench_hta, check_formats


def test_every_benchmark_names_a_module_that_exists() -> None:
    for name, b in suite.BENCHES.items():
        assert importlib.util.find_spec(b.module) is not None, name


def test_unknown_benchmark_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert suite.main(["no-such-bench"]) == 2
    assert "unknown benchmark 'no-such-bench'" in capsys.readouterr().err
    assert suite.main(["capture", "export", "--rounds", "3"]) == 2  # per-benchmark options need one benchmark


def test_list_names_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert suite.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in suite.BENCHES)


def test_suite_sizes() -> None:
    assert suite.BENCHES["export"].args(None, False)[:2] == ["--events", "1000000"]
    assert suite.BENCHES["export"].args(250_000, False)[:2] == ["--events", "250000"]
    assert suite.BENCHES["ingest"].args(None, True)[:2] == ["--events", "100000"]
    assert suite.BENCHES["capture"].args(None, True) == ["--rounds", "1", "--steps", "4"]


def test_missing_real_traces_skip_not_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite, "REAL_DIR", Path("/nonexistent/neuron-prof/traces"))
    with pytest.raises(suite.Skip):
        suite.BENCHES["export-real"].args(None, True)
    assert "--real" not in suite.BENCHES["ingest"].args(None, True)


def test_ingest_verdict_against_the_targets() -> None:
    def row(wall: float, cpu: float = 1.0, rss: float = 100.0, wrss: float = 0.0) -> dict[str, float]:
        return {
            "wall": wall,
            "cpu": cpu,
            "worker_cpu": 0.0,
            "rss_mb": rss,
            "worker_rss_mb": wrss,
            "entries": 1_200_000,
        }

    rows = [
        ("neuron_prof.load, first open", row(4.0, rss=600.0)),
        ("neuron_prof.load, second open", row(0.5)),
        ("HTA TraceAnalysis", row(48.0)),
    ]
    v = bench_hta.verdict(rows, size=1000)  # small size: no worker processes counted
    assert "first open 4.00 s wall" in v and "(<= 5 s: met)" in v
    assert "peak RSS 600 MB" in v and "12.0x wall" in v and "MISSED" not in v
    rows[0] = ("neuron_prof.load, first open", row(6.0, rss=1100.0))
    v = bench_hta.verdict(rows, size=1000)
    assert "(<= 5 s: MISSED)" in v and "(<= 1024 MB: MISSED)" in v and "8.0x wall" in v


def test_generated_trace_passes_the_perfetto_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_formats.main(["--events", "3000", "--no-hta"]) == 0
    out = capsys.readouterr().out
    assert "pftrace_check: ok" in out and "errors: {}" in out
