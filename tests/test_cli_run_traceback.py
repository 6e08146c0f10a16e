"""`neuron-prof run`: a script that raises shows its own traceback, as python shows it, and keeps python's exit
code (issue 22): none of neuron-prof's, click's or runpy's frames, not even the profiler's operator forwarders
that run inside the script's own lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
    import torch


    def check(x):
        if float(x.sum()) > 0:  # float() of a tensor: a profiler forwarder runs here under `run`
            y = x[10]  # IndexError raised inside the profiler's __getitem__ forwarder
        return y


    def main():
        try:
            check(torch.ones(3))
        except IndexError as e:
            raise RuntimeError("step failed") from e


    main()
"""


def _frames(err: str) -> list[str]:
    return re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', err, flags=re.M)


def test_a_failing_script_shows_its_own_traceback_and_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           env=env)
    prof = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--no-pftrace", "-o",
                           str(tmp_path / "t.json"), str(script)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    # GIVEN a script that raises a chained error THEN run exits as python does, with the same frames
    assert prof.returncode == plain.returncode == 1, prof.stderr
    frames = _frames(prof.stderr)
    assert frames == _frames(plain.stderr), prof.stderr
    assert [f for f in frames if f[0] == str(script)] and not any(
        "neuron_prof" in f or "click" in f or "runpy" in f or f.endswith("neuron-prof") for f, _ in frames)
    assert "RuntimeError: step failed" in prof.stderr and "IndexError: index 10 is out of bounds" in prof.stderr
    assert "direct cause" in prof.stderr
    assert (tmp_path / "t.json").stat().st_size > 0  # and the trace is written


def test_the_scripts_own_excepthook_prints_it(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import sys\nsys.excepthook = lambda t, v, tb: print('hook:', t.__name__, v, "
                      "tb.tb_frame.f_code.co_filename == __file__, file=sys.stderr)\nraise KeyError('k')\n")
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--no-pftrace", "-o",
                        str(tmp_path / "t.json"), str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 1 and "hook: KeyError 'k' True" in p.stderr, p.stderr
