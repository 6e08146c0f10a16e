"""The machine a benchmark ran on, in one line (CPUs, CPU model, RAM, load), for tables and RESULTS.md."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return float("nan")


def load() -> str:
    """The 1/5/15-minute load averages (other processes skew absolute timings; ratios hold better)."""
    a, b, c = os.getloadavg()
    return f"load average {a:.2f}, {b:.2f}, {c:.2f}"


def describe() -> str:
    """Date, CPUs usable by this process, CPU model, RAM, Python and the current load."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {cpus} CPUs ({_cpu_model()}), {_ram_gb():.0f} GB RAM; "
        f"Python {platform.python_version()}; {load()}"
    )


if __name__ == "__main__":
    print(describe())
