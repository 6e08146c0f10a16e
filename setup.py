"""Packaging glue that pyproject.toml alone cannot express.

The top-level folders `exporters/` and `tui/` install as `neuron_prof.exporters` and `neuron_prof.tui`
(never as top-level `exporters`/`tui`, names other PyPI packages use). Subpackages are found here so
that a new folder under any of the three needs no edit to the packaging.

One C extension, the trace scanner `neuron_prof.loaders.json._jscan` (neuron_prof/loaders/json/_jscan.c), is
built at `pip install -e .` / `pip install .`, or in place with `python setup.py build_ext --inplace`. It is
optional: without a C compiler the install goes on and the loader uses its Python path (slower).
The .pftrace loader's packet walk, `neuron_prof.loaders.pftrace._pfscan`
(neuron_prof/loaders/pftrace/_pfscan.c), and the args blob's text search, `neuron_prof.model._bytefind`
(neuron_prof/model/_bytefind.c), are built and skipped the same way.
"""

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOTS = {"neuron_prof": "neuron_prof", "neuron_prof.exporters": "exporters", "neuron_prof.tui": "tui"}


def _packages() -> list[str]:
    out: list[str] = []
    for name, folder in ROOTS.items():
        out.append(name)
        out += [f"{name}.{sub}" for sub in find_packages(folder) if not sub.startswith("tests")]
    return out


class _OptionalBuildExt(build_ext):
    """A failed compile (no compiler, no Python headers) is reported, not fatal: the Python path remains."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - distutils raises several unrelated types here
            print(f"neuron-prof: the compiled trace scanner was not built ({e}); the loader uses its Python path")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            print(f"neuron-prof: {ext.name} was not built ({e}); the loader uses its Python path")


_JSCAN = Extension("neuron_prof.loaders.json._jscan", sources=["neuron_prof/loaders/json/_jscan.c"],
                   depends=[f"neuron_prof/loaders/json/_jscan_{h}.h" for h in ("json", "str", "tables", "py")])

# The .pftrace loader's packet walk, optional the same way (neuron_prof/loaders/pftrace/_scan.py)
_PFSCAN = Extension("neuron_prof.loaders.pftrace._pfscan", sources=["neuron_prof/loaders/pftrace/_pfscan.c"],
                    depends=[f"neuron_prof/loaders/pftrace/_pfscan_{h}.h" for h in ("wire", "state")])

# The args blob's text search (neuron_prof/model/_args.py `positions`), optional the same way
_BYTEFIND = Extension("neuron_prof.model._bytefind", sources=["neuron_prof/model/_bytefind.c"])

setup(packages=_packages(), package_dir=ROOTS, ext_modules=[_JSCAN, _PFSCAN, _BYTEFIND],
      cmdclass={"build_ext": _OptionalBuildExt})
