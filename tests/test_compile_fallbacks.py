"""Ops Dynamo and AOTAutograd run while torch.compile traces a graph (fake tensors, inside
``aot_collect_metadata`` / ``aot_trace_joint_graph``) are no CPU fallbacks of the program (issue 34)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json
    import torch
    from neuron_prof import emulator
    emulator.enable(emulator.EmulatorConfig.fast())
    import neuron_prof
    from neuron_prof.model import TrackKind

    def f(x):
        return torch.median(x * 2) + x.sum() / 3

    cf = torch.compile(f, backend="neuron")
    x = torch.randn(64, device="neuron")
    with neuron_prof.profile(None, quiet=True) as p:
        for _ in range(3):
            y = cf(x)  # COMPILED
        s, _ = torch.sort(x)  # EAGER
    t = p.trace
    rows = t.slices_on(TrackKind.FALLBACK)
    print("RESULT", json.dumps([[t.slice_name(int(r)), t.slice_args(int(r)).get("call_site")] for r in rows]))
''')


def test_tracing_a_compiled_graph_invents_no_fallback(tmp_path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    line = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# EAGER" in s)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    got = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert got is not None, out.stdout + out.stderr
    # the compiled graph's median runs inside the graph; the tracing's fake calls are no fallbacks
    assert json.loads(got[len("RESULT "):]) == [["aten::sort", f"work.py:{line}"]]
