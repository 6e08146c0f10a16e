"""CPU fallbacks the backend does not report, found from the trace's structure (issue 23, item 3).

torch-neuronx sends some linear-algebra ops (qr, svd, eigh...) to the CPU without recording them in
get_fallback_ops() (torch-neuronx-facts, "CPU fallback"); the emulated device does the same. Their spans still
show what a fallback does: the boxed CPU fallback's own copy to the host (``aten::_to_cpu``) inside the op, or a
Python fallback's copy, the same op run on the host and the copy back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from neuron_prof.backends.probes.fallback import BOXED, PYTHON, reconstruct
from neuron_prof.backends.probes.view import HostView
from neuron_prof.model import Arg, KinetoCat, TraceBuilder

SCRIPT = textwrap.dedent('''
    import json
    import torch
    from neuron_prof import emulator
    emulator.enable(emulator.EmulatorConfig.fast())
    import neuron_prof
    import torch_neuronx
    from neuron_prof.analysis import analyze
    w = torch.randn(8, 8, device="neuron")
    with neuron_prof.profile(None, quiet=True) as p:   # no device profile: the host trace alone
        for _ in range(3):
            q, r = torch.linalg.qr(w)  # QR
            w = w + q
    found = [f.to_dict() for f in analyze(p.trace) if f.kind == "cpu_fallback"]
    print("RESULT", json.dumps({"reported": torch_neuronx.get_fallback_ops(), "found": found}))
''')


def test_unreported_qr_is_a_fallback_found_from_its_span(tmp_path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    line = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# QR" in s)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    got = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))[len("RESULT "):])
    assert not any("qr" in n for n in got["reported"]), got["reported"]  # the backend says nothing
    (f,) = got["found"]
    assert f["call_site"] == f"work.py:{line}" and f["count"] == 3, f
    assert f["evidence"]["unreported"] == 3 and f["evidence"]["found_by"] == [BOXED]
    assert "not in get_fallback_ops()" in f["title"] and f["severity"] in ("warning", "critical")


def _view(spans: list[tuple[str, int, int]]) -> HostView:
    """A host trace of one thread: (name, start, end) cpu_op spans, in the nesting torch.profiler records."""
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    for name, a, e in spans:
        b.add_slice(t, a, e - a, name, KinetoCat.CPU_OP, {"Input Dims": [[4, 4]], "Input type": ["float"]})
    return HostView(b)


def test_python_fallback_structure_and_what_is_not_one() -> None:
    view = _view([
        ("aten::unique_dim", 0, 100),        # a Python fallback: copy out, the op on the host, copy back
        ("aten::_to_copy", 5, 20),
        ("aten::unique_dim", 25, 70),
        ("aten::sort", 30, 60),
        ("aten::_to_copy", 75, 95),
        ("aten::layer_norm", 200, 300),      # a device op that casts inside: no host run of itself
        ("aten::_to_copy", 205, 220),
        ("aten::native_layer_norm", 225, 280),
        ("aten::_to_copy", 282, 295),
        ("aten::linalg_eigh", 400, 500),     # the boxed CPU fallback, under a dispatcher span
        ("PythonSubclass", 402, 498),
        ("aten::_to_cpu", 405, 420),
        ("aten::linalg_eigh", 425, 480),
        ("aten::copy_", 482, 495),
    ])
    events, unmatched = reconstruct(view, [])
    got = {view.name_of(r): (a.get(Arg.SILENT), a.get(Arg.FOUND_BY)) for r, a in events}
    assert got == {"aten::unique_dim": (True, PYTHON), "aten::linalg_eigh": (True, BOXED)}
    assert unmatched == []


def test_ops_traced_by_torch_compile_are_no_fallbacks() -> None:
    """Dynamo and AOTAutograd run the model on fake tensors inside their compile spans (issue 34): the copies
    and host ops there are no fallbacks, reported or silent; the same op structure after the compile is one."""
    def div_fallback(t0: int) -> list[tuple[str, int, int]]:
        return [("aten::div", t0, t0 + 100), ("aten::_to_copy", t0 + 5, t0 + 20), ("aten::div", t0 + 25, t0 + 70),
                ("aten::_to_copy", t0 + 75, t0 + 95)]
    view = _view([
        ("_compile.compile_inner (dynamo_timed)", 0, 5000),
        ("backend_compile", 100, 4900),
        ("aot_collect_metadata (dynamo_timed)", 200, 2000),
        ("aot_collect_metadata", 210, 1990),
        *div_fallback(300),
        ("aten::add", 500, 700),
        ("aten::_to_cpu", 510, 520),
        ("aten::add", 530, 600),
        ("aot_trace_joint_graph (dynamo_timed)", 2100, 4000),
        *div_fallback(2200),
        *div_fallback(6000),                 # the program's own call, after the compile
    ])
    events, unmatched = reconstruct(view, ["aten::add"], [(1, 560)])
    got = [(view.name_of(r), int(view.ts[r]), a.get(Arg.SILENT)) for r, a in events]
    assert got == [("aten::div", 6000, True)]
    assert unmatched == ["aten::add"]
