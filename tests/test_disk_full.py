"""A full disk, for real: a small tmpfs mounted in a private mount namespace (`unshare`), gone with the process.

A streamed load whose column cache finds no room says so in one line (exit 2) and leaves no half-written folder;
a file written through a shared map has its blocks reserved first, so a full disk is an OSError when it is made,
never a SIGBUS at a later write (the kernel's answer to a mapped page of a sparse file it has no block for).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.gen_trace import write
from neuron_prof.cli import main

ROOT = Path(__file__).resolve().parent.parent
SKIP = "cannot mount a small file system (a mount namespace needs root with CAP_SYS_ADMIN)"


def _on_small_disk(disk: Path, size_kb: int, argv: list[str], env: dict[str, str] | None = None,
                   ) -> subprocess.CompletedProcess[str]:
    """`argv` run with a tmpfs of `size_kb` kB mounted at `disk`, in a mount namespace of its own."""
    disk.mkdir(exist_ok=True)
    if shutil.which("unshare") is None:
        pytest.skip(SKIP)
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o",
                            "size=64k", "tmpfs", str(disk)], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"{SKIP}: {probe.stderr.strip()}")
    script = 'mount -t tmpfs -o size="$0"k tmpfs "$1" && shift && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           str(size_kb), str(disk), *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT)


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_a_streamed_load_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path, suffix: str) -> None:
    trace = tmp_path / "trace.json"
    write(20_000, trace)  # ~5.5 MB of JSON: its columns cannot fit in 512 kB
    if suffix == ".pftrace":
        assert main(["export", str(trace), "-o", str(tmp_path / "trace.pftrace"), "--format", "pftrace"]) == 0
        trace = tmp_path / "trace.pftrace"
    disk = tmp_path / "disk"
    # the cache and the temporary folder on the one full disk: no second try elsewhere
    env = {"NEURON_PROF_STREAM": "1", "NEURON_PROF_CACHE_DIR": str(disk / "cache"), "TMPDIR": str(disk)}
    listing = "import os, sys; print(sorted(os.path.relpath(os.path.join(d, f), sys.argv[1]) " \
              "for d, _, fs in os.walk(sys.argv[1]) for f in fs))"
    code = ("import subprocess, sys\n"
            f"p = subprocess.run([sys.executable, '-m', 'neuron_prof', 'summary', {str(trace)!r}])\n"
            f"subprocess.run([sys.executable, '-c', {listing!r}, {str(disk)!r}])\n"
            "sys.exit(p.returncode)\n")
    p = _on_small_disk(disk, 512, [sys.executable, "-c", code], env)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"neuron-prof: error: {trace}: no space left on the disk for its column cache"), p.stderr
    assert str(disk / "cache") in lines[0] and "NEURON_PROF_CACHE_DIR" in lines[0]
    assert ("about half its size" in lines[0]) == (suffix == ".json")  # a .pftrace's columns outgrow it
    assert p.stdout.strip().splitlines()[-1] == "[]"  # the half-written index is gone, nothing else left


def test_a_mapped_file_on_a_full_disk_fails_when_made_not_at_a_write(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import numpy as np
        from neuron_prof.model.reserve import mapped_zeros, no_space
        from neuron_prof.analysis.spill import Spill
        import neuron_prof.analysis.spill as sp
        disk = Path(sys.argv[1])
        try:
            a = mapped_zeros(disk / "f_row", 1 << 20, np.int64)  # 8 MB on a 1 MB disk
            a[:] = 1
            print("written")
        except OSError as e:
            print("no space" if no_space(e) else f"other {e!r}")
        s = Spill.__new__(Spill)  # the analyses' spill over a cache folder on the full disk
        s.folder, s._maps = disk, __import__("weakref").WeakSet()
        b = s.empty(1 << 20, np.int64)
        b[:] = 2  # in memory: the disk had no room
        print("in memory" if not s._maps and int(b.sum()) == 2 << 20 else "mapped")
    """)
    p = _on_small_disk(tmp_path / "disk", 1024, [sys.executable, "-c", code, str(tmp_path / "disk")])
    assert p.returncode == 0, f"rc {p.returncode} (-7: SIGBUS)\n{p.stderr}"
    assert p.stdout.split() == ["no", "space", "in", "memory"], p.stdout + p.stderr
