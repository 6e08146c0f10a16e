"""`neuron-prof run` keeps the script's terminal to the script: no Kineto `USDT:` lines (issue 16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_run_prints_no_kineto_trace_points(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import os, torch\nx = torch.ones(8, 8)\ny = x @ x\nprint('done', os.environ['KINETO_LOG_LEVEL'])\n")
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    p = subprocess.run(
        [sys.executable, "-m", "neuron_prof", "run", "-q", "--no-pftrace", "-o", str(tmp_path / "t.json"),
         str(script)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    # GIVEN a plain CPU script THEN its terminal shows its own output only: Kineto's
    # "USDT: ... profiler_start" / "profiler_stop" lines (stderr, level 5) are not printed
    assert p.stdout == "done 6\n"
    assert "USDT:" not in p.stderr and "profiler_start" not in p.stderr, p.stderr
    assert (tmp_path / "t.json").stat().st_size > 0


IN_CODE = """
import os, sys, torch, neuron_prof
with neuron_prof.profile(sys.argv[1], quiet=True, pftrace=False):
    x = torch.ones(8, 8)
    y = x @ x
print('level', os.environ['KINETO_LOG_LEVEL'])
"""


def test_profile_in_code_prints_no_kineto_trace_points_unless_the_user_asks(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(IN_CODE)
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    quiet = subprocess.run([sys.executable, str(script), str(tmp_path / "a.json")], capture_output=True, text=True,
                           timeout=300, env=env, cwd=tmp_path)
    # GIVEN profile() in the user's code THEN Kineto's USDT lines stay off the terminal, as under `run`
    assert quiet.returncode == 0 and quiet.stdout == "level 6\n", quiet.stderr
    assert "USDT:" not in quiet.stderr, quiet.stderr
    # GIVEN the user set KINETO_LOG_LEVEL THEN their level wins (5 shows the USDT lines)
    loud = subprocess.run([sys.executable, str(script), str(tmp_path / "b.json")], capture_output=True, text=True,
                          timeout=300, env={**env, "KINETO_LOG_LEVEL": "5"}, cwd=tmp_path)
    assert loud.returncode == 0 and loud.stdout == "level 5\n", loud.stderr
    assert "USDT:" in loud.stderr and "profiler_start" in loud.stderr
    assert (tmp_path / "a.json").stat().st_size > 0 and (tmp_path / "b.json").stat().st_size > 0
