"""A SIGTERM that arrives while the trace is being saved waits for the save, then ends the process as before.

torchrun stops every other rank with SIGTERM as soon as one rank fails, often while they write their traces."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import neuron_prof

SCRIPT = """
import os, signal, sys, torch, neuron_prof
from neuron_prof.capture import _outputs

orig = _outputs.write_all


def write_all(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # the launcher stops this rank while it saves
    return orig(*args, **kwargs)


_outputs.write_all = write_all
with neuron_prof.profile(sys.argv[1], quiet=True, pftrace=False):
    torch.ones(3).sum()
print("after the block", flush=True)
"""


def test_sigterm_while_saving_waits_for_the_save(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGTERM, p.stderr  # the signal still ends the process, as without profiler
    assert "after the block" not in p.stdout
    trace = neuron_prof.load(out)  # ... once the trace is complete
    assert trace.metadata["capture_exit"] == "ok" and trace.n_events > 0
