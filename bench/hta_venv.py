"""Create the separate venv for Holistic Trace Analysis (bench/.venv-hta), used by bench.bench_hta.

    python -m bench.hta_venv            # creates it once; a no-op when it is already there
    python -m bench.hta_venv --force    # recreate

HTA lives outside the project's venv: it pulls jupyterlab, pandas, networkx, pydot and pytest, none of which
neuron-prof needs. HolisticTraceAnalysis 0.5.0 does not require torch (checked in its METADATA), so nothing
here can pull a CUDA build. numpy and plotly are pinned to the project's constraints so the comparison runs
on the same numpy; pandas stays below 3, which HTA 0.5.0 predates: under pandas 3 its correlation step fails
(`TypeError: Invalid value ... for dtype 'int16'`, pandas 3 no longer upcasts a column on assignment).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-hta"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed"
HTA = "HolisticTraceAnalysis==0.5.0"
_PINS = ("numpy", "plotly")
_OWN_PINS = ["pandas==2.3.3"]


def _constraints() -> list[str]:
    """The project's pins for the packages HTA shares with neuron-prof."""
    path = HERE.parent / "constraints.txt"
    if not path.exists():
        return list(_OWN_PINS)
    shared = [ln.strip() for ln in path.read_text().splitlines() if ln.split("==")[0].strip() in _PINS]
    return shared + _OWN_PINS


def ensure(force: bool = False, quiet: bool = True) -> Path:
    """The HTA venv's python, creating the venv first if needed."""
    want = "\n".join(_constraints()) + "\n"
    if STAMP.exists() and STAMP.read_text() == want and not force:
        return PY
    if force or not PY.exists():
        venv.EnvBuilder(clear=True, with_pip=True).create(VENV)
    pins = VENV / "constraints.txt"
    pins.write_text(want)
    cmd = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-c", str(pins), HTA, "orjson"]
    if quiet:
        cmd.insert(4, "-q")
    subprocess.run(cmd, check=True)
    # HTA must import without torch: fail here, not in the middle of a benchmark.
    subprocess.run([str(PY), "-c", "from hta.trace_analysis import TraceAnalysis"], check=True)
    STAMP.write_text(want)  # the pins it was built with: changed pins reinstall
    return PY


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hta_venv", description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="recreate the venv")
    a = ap.parse_args(argv)
    print(ensure(force=a.force, quiet=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
