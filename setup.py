"""Packaging glue that pyproject.toml alone cannot express.

The top-level folders `exporters/` and `tui/` install as `neuron_prof.exporters` and `neuron_prof.tui`
(never as top-level `exporters`/`tui`, names other PyPI packages use). Subpackages are found here so
that a new folder under any of the three needs no edit to the packaging.
"""

from setuptools import find_packages, setup

ROOTS = {"neuron_prof": "neuron_prof", "neuron_prof.exporters": "exporters", "neuron_prof.tui": "tui"}


def _packages() -> list[str]:
    out: list[str] = []
    for name, folder in ROOTS.items():
        out.append(name)
        out += [f"{name}.{sub}" for sub in find_packages(folder) if not sub.startswith("tests")]
    return out


setup(packages=_packages(), package_dir=ROOTS)
