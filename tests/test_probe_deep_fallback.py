"""On the emulated device: deep fallback mode beside the names-only report gives one event per fallen-back
call with its exact line; float64 created on the device is counted once per call that made it."""

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
        acc = torch.zeros((), dtype=torch.float64, device="neuron")  # F64
    t = p.trace
    rows = t.slices_on(TrackKind.FALLBACK)
    import json
    print("RESULT", json.dumps([[t.slice_name(int(r)), t.slice_args(int(r)).get("call_site")] for r in rows]))
    print("DTYPE", json.dumps([a for a in map(t.instant_args, map(int, t.instants_on(TrackKind.DTYPE)))
                               if "use" not in a]))  # arrivals, not first uses
''')


def test_each_fallback_once_with_its_call_site(tmp_path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    line = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# MEDIAN" in s)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    got = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))
    events = json.loads(got[len("RESULT "):])
    # paths as torch.profiler writes them: relative to the script's folder (sys.path[0])
    assert events == [["aten::median", f"work.py:{line}"]] * 3, out.stdout + out.stderr
    dtype = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("DTYPE"))[len("DTYPE "):])
    # one per call that made a float64 tensor on the device, with its true shape; without Python stacks
    # (with_stack=False) the line is not known, and the event says so instead of naming a wrong one
    assert len(dtype) == 1, dtype
    assert dtype[0]["shape"] == [] and dtype[0]["how"] == "created on device" and "call_site" not in dtype[0]
    assert "site_unknown" in dtype[0]
