"""A frame "at" its own def line runs no statement of its own (issue 34): torch.compile runs Dynamo's bytecode
under the compiled function's frame, whose line then reads as the def line; the stack leaves that frame out,
so sites (a memory peak, an op) name the call of the compiled model."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import neuron_prof
from neuron_prof.capture._sites import own_header
from tests.userland import _fork as forked

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))

SRC = textwrap.dedent("""\
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):  # DEF
            return torch.relu(self.fc(x)).sum()


    @torch.no_grad()
    def score(x):
        return x.sum()
    def one_liner(x): return x + 1
    def wrapped(
        x,
    ):
        return x


    model = Net()
    cmodel = torch.compile(model, backend="aot_eager")
    for _ in range(3):
        loss = cmodel(torch.randn(4, 8))  # CALL
        loss.backward()
    """)


def _line(tag: str) -> int:
    return next(i for i, ln in enumerate(SRC.splitlines(), 1) if tag in ln)


def test_headers_are_the_functions_own_def_and_decorator_lines(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(SRC)
    lines = SRC.splitlines()
    at = {s: next(i for i, ln in enumerate(lines, 1) if ln.strip().startswith(s)) for s in
          ("def forward", "@torch.no_grad", "def score", "return x.sum", "def one_liner", "def wrapped")}
    p = str(f)
    assert own_header(p, at["def forward"], "forward") and not own_header(p, at["def forward"], "score")
    assert own_header(p, at["@torch.no_grad"], "score") and own_header(p, at["def score"], "score")
    assert not own_header(p, at["return x.sum"], "score")
    assert not own_header(p, at["def one_liner"], "one_liner")  # its body runs on that line
    assert own_header(p, at["def wrapped"], "wrapped")


def test_ops_under_a_compiled_frame_take_the_line_that_called_it(tmp_path: Path) -> None:
    script = tmp_path / "comp.py"
    script.write_text(SRC)
    out = tmp_path / "t.json"
    # `neuron-prof run` through main() in a process forked from one that imported torch already (the suite's time)
    r = forked.run([forked.CLI, "run", "-q", "--no-pftrace", "-o", str(out), str(script)], cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    t = neuron_prof.load(out)
    stacks = [str(t.slice_args(i).get("Call stack") or "") for i in range(len(t.slices))]
    assert any(f"comp.py({_line('# CALL')})" in s for s in stacks)
    assert not [s for s in stacks if f"comp.py({_line('# DEF')})" in s]
