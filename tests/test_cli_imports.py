"""`neuron-prof --help` and `import neuron_prof` stay light: no torch, Textual or plotly."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "textual", "plotly", "torch_neuronx", "pyarrow")


def test_help_and_import_load_no_heavy_modules() -> None:
    code = (
        "import sys, contextlib, io\n"
        "import neuron_prof\n"
        "from neuron_prof.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    rc = main(['--help'])\n"
        "assert rc == 0 and 'summary' in out.getvalue(), out.getvalue()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
