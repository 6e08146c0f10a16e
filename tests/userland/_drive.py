"""Run one user program under `neuron_prof.profile()`, as a user who adds the `with` block would.

    python tests/userland/_drive.py OUT PROGRAM [--truth TRUTH_JSON]

The device is the program's own choice (env DEVICE, "neuron" by default). On "neuron" the emulated
device is enabled first (`neuron_prof.emulator.enable(EmulatorConfig.from_env())`), as a user's
`import torch_neuronx` would register the real one. The program runs through runpy with
`__name__ == "__main__"`, its own folder first on sys.path and sys.argv = [PROGRAM]. A program that calls
`neuron_prof.profile` itself is run plainly: it reads the output path from env TRACE_OUT, which the harness
sets.

--truth (emulated device only) also writes what the emulator itself did, line by line: every CPU fallback,
host wait, float64 op, eager compile and graph compile, with the line of PROGRAM that was running (its
innermost frame in PROGRAM; 0 when none, e.g. ops autograd runs on its own thread). The profiler never reads
this log (neuron_prof.emulator.ground_truth is for tests only); the harness uses it to check that every tag in
a program names a line where the problem really happens.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
from typing import Any

# Ops whose output shape depends on the values: on a real device the host must wait to learn the shape.
DATA_DEPENDENT = frozenset({"aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_dim",
                            "aten::unique_consecutive", "aten::nonzero_static", "aten::argwhere"})


def _install_truth(program: str) -> Any:
    """Wrap the emulator's ground-truth log so each record also gets PROGRAM's current line."""
    import neuron_prof.emulator as emu

    gt = emu.ground_truth()
    orig = gt.add
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    prog = os.path.realpath(program)
    codes: dict[str, bool] = {}

    def add(kind: str, name: str, *args: Any, **kwargs: Any) -> Any:
        if kind != "exec" or name in DATA_DEPENDENT:
            line = 0
            f = sys._getframe(1)
            while f is not None:
                fn = f.f_code.co_filename
                mine = codes.get(fn)
                if mine is None:
                    mine = codes[fn] = os.path.realpath(fn) == prog
                if mine:
                    line = f.f_lineno
                    break
                f = f.f_back
            if kind == "compile" and f is not None:  # the program's calls that led to the compile (an
                g = f.f_back                             # evaluation loop's call of the model)
                while g is not None:
                    if codes.get(g.f_code.co_filename, os.path.realpath(g.f_code.co_filename) == prog):
                        c = rows.setdefault(("compile_caller", name, g.f_lineno), {"count": 0, "details": set()})
                        c["count"] += 1
                    g = g.f_back
            r = rows.get((kind, name, line))
            if r is None:
                r = rows[(kind, name, line)] = {"count": 0, "details": set()}
            r["count"] += 1
            detail = kwargs.get("detail", args[5] if len(args) > 5 else None)
            if kind in ("compile", "graph_compile") and len(r["details"]) < 50:
                r["details"].add(str(detail)[:300])
        return orig(kind, name, *args, **kwargs)

    # The wrapper runs inside the emulator's ops, while the profiler looks for the user's frame: filed under
    # the emulator's own log module, its frame is library code to the profiler, as the log it extends is.
    from neuron_prof.emulator import _groundtruth

    add.__code__ = add.__code__.replace(co_filename=_groundtruth.__file__)
    gt.add = add  # an instance attribute: the emulator calls rt.gt.add(...)
    return rows


def _dump_truth(rows: Any, path: str) -> None:
    out = [{"kind": k, "name": n, "line": ln, "count": r["count"], "signatures": len(r["details"])}
           for (k, n, ln), r in sorted(rows.items())]
    with open(path, "w") as fh:
        json.dump(out, fh, indent=0)


def main() -> int:
    args = sys.argv[1:]
    truth = None
    if "--truth" in args:
        i = args.index("--truth")
        truth = args[i + 1]
        del args[i:i + 2]
    out, program = args[0], os.path.abspath(args[1])
    device = os.environ.get("DEVICE", "neuron")
    rows = None
    if device == "neuron":
        import neuron_prof.emulator as emu

        emu.enable(emu.EmulatorConfig.from_env())
        if truth:
            rows = _install_truth(program)
    import neuron_prof

    with open(program) as fh:
        src = fh.read()
    profiles_itself = "neuron_prof.profile(" in src
    operator_lines = re.search(r"#\s*OPERATOR-LINES\b", src) is not None  # _harness.OPERATOR_LINES
    sys.argv = [program]
    sys.path.insert(0, os.path.dirname(program))
    code = 0
    try:
        if profiles_itself:
            os.environ["TRACE_OUT"] = out
            runpy.run_path(program, run_name="__main__")
        else:
            # findings only: no .pftrace needed. On the emulated device the user asks for its device profile, as
            # on Trainium (it costs the emulator no HBM): the device timeline comes only that way
            with neuron_prof.profile(out, quiet=True, pftrace=False, operator_lines=operator_lines):
                runpy.run_path(program, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        if rows is not None and truth:
            rank = os.environ.get("RANK")
            _dump_truth(rows, truth if rank is None else f"{truth}.rank{rank}")
    return code


if __name__ == "__main__":
    sys.exit(main())
