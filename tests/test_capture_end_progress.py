"""The end of a capture says what it does (issue 32 item 3): past its first second, a rich progress bar on stderr
names each phase, seen here through a real terminal; the files it names are whole when the process exits."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import neuron_prof
from neuron_prof.capture._end_progress import PHASES
from tests._pty import pty_run

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))

SCRIPT = textwrap.dedent("""\
    import torch

    x = torch.randn(32, 32)
    for i in range(20):
        x = torch.tanh(x @ x)
    """)


def test_a_slow_end_names_each_phase_and_leaves_whole_files(tmp_path: Path) -> None:
    seen = bytearray()

    def on_output(chunk: bytes, fd: int) -> None:
        seen[:] = chunk

    (tmp_path / "job.py").write_text(SCRIPT)
    out = tmp_path / "t.json"
    saved = dict(os.environ)
    os.environ["NEURON_PROF_PROGRESS_DELAY"] = "0"  # an end of any length counts as slow here
    try:
        code, _ = pty_run([NEURON_PROF, "run", "-o", str(out), str(tmp_path / "job.py")], on_output, timeout=240)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    text = seen.decode(errors="replace")
    assert code == 0, text[-2000:]
    assert "neuron-prof: saving the trace:" in text
    # rich is imported as the session starts (`prepare`), so the bar's timer thread draws as soon as it runs:
    # by Kineto's export at the latest (the stop before it holds the GIL, the call-site walk may be a few ms);
    # imported at the end instead, it drew first at "exporting" or "reading Kineto's events" on a quiet machine
    # and at "building the trace" on a loaded one. From the first phase it draws on, each is drawn as it starts.
    order = (*PHASES[:PHASES.index("writing")], "writing t.json", "writing t.pftrace")
    first = next((k for k, phase in enumerate(order) if phase in text), len(order))
    assert first <= order.index("exporting Kineto's events"), text[-3000:]
    for phase in order[first:]:
        assert phase in text, (phase, text[-3000:])
    named = {p for p in PHASES if p in text}
    assert named and named <= set(PHASES)
    # the closing line comes after the bar, and each file it names loads whole
    assert text.rindex("events ->") > text.rindex("saving the trace:")
    for f in (out, tmp_path / "t.pftrace"):
        t = neuron_prof.load(f)
        assert t.n_events > 0 and len(t.findings) > 0  # the findings written in by the end


def test_a_quick_or_quiet_end_shows_no_bar(tmp_path: Path) -> None:
    seen = bytearray()

    def on_output(chunk: bytes, fd: int) -> None:
        seen[:] = chunk

    (tmp_path / "job.py").write_text(SCRIPT)
    saved = dict(os.environ)
    os.environ["NEURON_PROF_PROGRESS_DELAY"] = "0"
    try:
        code, _ = pty_run([NEURON_PROF, "run", "-q", "-o", str(tmp_path / "t.json"), str(tmp_path / "job.py")],
                          on_output, timeout=240)
        os.environ["NEURON_PROF_PROGRESS_DELAY"] = "600"  # not quiet, but the end is shorter than this
        code2, _ = pty_run([NEURON_PROF, "run", "-o", str(tmp_path / "u.json"), str(tmp_path / "job.py")],
                           on_output, timeout=240)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0 and code2 == 0
    assert "saving the trace" not in seen.decode(errors="replace")
