"""Print the project's requirements from pyproject.toml, one a line, for `pip install -r /dev/stdin`.

pyproject.toml stays the one list: `make test-pythons` installs the package with `--no-deps` into a venv
without torch and takes the rest from here (`--without torch --extra dev --build-system`: with setuptools, for a
build without isolation).
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _name(requirement: str) -> str:
    """The distribution name of a PEP 508 requirement, normalised (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(extras: list[str], without: list[str], build_system: bool = False,
                 pyproject: Path = PYPROJECT) -> list[str]:
    """The `dependencies`, the named extras and (`build_system`) the build requirements of `pyproject`, less the distributions named in `without`.
    An unknown extra or a `without` name the lists do not hold is an error (a rename would otherwise drop
    nothing, or the wrong thing, without a word)."""
    toml = tomllib.loads(pyproject.read_text())
    project = toml["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"no such extra in {pyproject.name}: {', '.join(unknown)}")
    listed = list(project["dependencies"]) + [r for e in extras for r in optional[e]]
    if build_system:
        listed += toml["build-system"]["requires"]
    drop = {_name(w) for w in without}
    missing = drop - {_name(r) for r in listed}
    if missing:
        raise SystemExit(f"not among the requirements in {pyproject.name}: {', '.join(sorted(missing))}")
    return list(dict.fromkeys(r for r in listed if _name(r) not in drop))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--extra", action="append", default=[], help="an optional-dependencies group to add")
    ap.add_argument("--without", action="append", default=[], help="a distribution to leave out")
    ap.add_argument("--build-system", action="store_true", help="add the build requirements")
    ap.add_argument("--pyproject", type=Path, default=PYPROJECT, help="default: the project's")
    args = ap.parse_args()
    print("\n".join(requirements(args.extra, args.without, args.build_system, args.pyproject)))


if __name__ == "__main__":
    main()
