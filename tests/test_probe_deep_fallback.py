"""Deep fallback mode beside the names-only report: one event per fallen-back call, with its exact line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import torch
    from neuron_prof import emulator
    emulator.enable(emulator.EmulatorConfig.fast())
    import neuron_prof
    from neuron_prof.model import TrackKind
    x = torch.randn(64, device="neuron")
    with neuron_prof.profile(None, quiet=True, with_stack=False, deep_fallback=True) as p:
        for _ in range(3):
            y = torch.median(x)  # MEDIAN
            z = (x * 2).sum()
    t = p.trace
    rows = t.slices_on(TrackKind.FALLBACK)
    import json
    print("RESULT", json.dumps([[t.slice_name(int(r)), t.slice_args(int(r)).get("call_site")] for r in rows]))
''')


def test_each_fallback_once_with_its_call_site(tmp_path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    line = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# MEDIAN" in s)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    got = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))
    events = json.loads(got[len("RESULT "):])
    assert events == [["aten::median", f"{script}:{line}"]] * 3, out.stdout + out.stderr
