"""scripts/requirements.py: the dependency list `make test-pythons` installs, read from pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "requirements.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_every_dependency_and_extra_but_the_ones_left_out() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out = _run("--without", "torch", "--extra", "dev", "--build-system")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    expected = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["dev"],
                *project["build-system"]["requires"]]
    assert [r for r in expected if not r.startswith("torch")] == lines
    assert any(r.startswith("torch") for r in expected)


def test_a_name_not_listed_or_an_unknown_extra_is_an_error(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["Torch_Vision>=1", "numpy"]\n'
                         '[project.optional-dependencies]\ndev = ["pytest"]\n')
    ok = _run("--without", "torch-vision", "--extra", "dev", "--pyproject", str(pyproject))
    assert ok.returncode == 0 and ok.stdout.split() == ["numpy", "pytest"], ok.stderr
    for args, says in ((["--without", "torch"], "not among the requirements"), (["--extra", "gpu"], "no such extra")):
        bad = _run(*args, "--pyproject", str(pyproject))
        assert bad.returncode == 1 and says in bad.stderr


@pytest.mark.parametrize("name", ["torch", "Torch", "torch>=2.13,<2.15", "torch [cpu] >= 2"])
def test_the_name_of_a_requirement_is_normalised(name: str) -> None:
    import runpy

    assert runpy.run_path(str(SCRIPT), run_name="not_main")["_name"](name) == "torch"
