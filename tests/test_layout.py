"""The house's layout, read from the source (nothing is imported): no folder of more than 25 modules, no
private name imported across packages in shipped code, analysis imports no torch, and the arrows of
architecture.md point one way (no module-level cycles, not even through imports inside functions)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.test_emulator_imports import find_cycle

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {"neuron_prof": ROOT / "neuron_prof", "neuron_prof.exporters": ROOT / "exporters",
           "neuron_prof.tui": ROOT / "tui"}
MAX_MODULES = 25


@dataclass(frozen=True)
class Import:
    importer: str
    """the importing module's dotted name"""
    package: str
    """the package the importer belongs to (itself for an __init__)"""
    target: str
    """the imported dotted name: module, or module + '.' + name for `from module import name`"""
    where: str


def _modules() -> dict[str, Path]:
    """Dotted name -> source of every shipped module: the Python ones and the C extensions (a `.c` file is one
    extension module of its name: setup.py)."""
    out: dict[str, Path] = {}
    for prefix, folder in SHIPPED.items():
        for p in [*folder.rglob("*.py"), *folder.rglob("*.c")]:
            parts = list(p.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([prefix, *parts])] = p
    return out


def _imports(source: str, path: Path, me: str, is_pkg: bool) -> Iterator[Import]:
    pkg = me if is_pkg else me.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "neuron_prof":
                continue
            for a in node.names:
                yield Import(me, pkg, f"{base}.{a.name}", f"{path.relative_to(ROOT)}:{node.lineno}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "neuron_prof":
                    yield Import(me, pkg, a.name, f"{path.relative_to(ROOT)}:{node.lineno}")


_MODULE_NAMES = set(_modules())


def all_imports() -> list[Import]:
    out: list[Import] = []
    for me, p in _modules().items():
        if p.suffix == ".py":  # a C extension imports no neuron_prof module
            out.extend(_imports(p.read_text(), p, me, p.name == "__init__.py"))
    return out


def crosses_privately(imp: Import) -> bool:
    """True when the import names a `_private` module or name that is not the importer's own. A private
    module is its package's own, and shared with that package's subpackages (tui.screens may use tui._data);
    a private name is its module's package's own in the same way. The root package shares nothing: its
    components (neuron_prof.analysis, neuron_prof.cli, ...) meet through public names only, and so do a
    package and its own subpackages going down (loaders may not reach into loaders.json._scan)."""
    parts = imp.target.split(".")
    own = imp.package.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            home = parts[:i] if i < len(parts) - 1 or _is_module(parts) else parts[: i - 1]
            if home == own or (len(home) >= 2 and own[: len(home)] == home):
                continue
            return True
    return False


def _is_module(parts: list[str]) -> bool:
    return ".".join(parts) in _MODULE_NAMES


def test_no_private_import_crosses_packages() -> None:
    bad = [f"{i.where}: {i.importer} imports {i.target}" for i in all_imports() if crosses_privately(i)]
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def test_the_private_rule_tells_own_from_foreign() -> None:
    def imp(importer: str, target: str, pkg: bool = False) -> Import:
        return Import(importer, importer if pkg else importer.rsplit(".", 1)[0], target, "")

    assert not crosses_privately(imp("neuron_prof.model._select", "neuron_prof.model._trace.Trace"))
    assert not crosses_privately(imp("neuron_prof.model", "neuron_prof.model._trace.Trace", pkg=True))
    assert not crosses_privately(imp("neuron_prof.cli._open", "neuron_prof.cli._open_server._helper"))
    assert crosses_privately(imp("neuron_prof.exporters.job_summary", "neuron_prof.analysis.fmt._SEV_STYLE"))
    assert crosses_privately(imp("neuron_prof.loaders", "neuron_prof.loaders.json._scan.ingest_path", pkg=True))
    assert crosses_privately(imp("neuron_prof.cli._diff", "neuron_prof.exporters._diff_text.diff_text"))
    assert not crosses_privately(imp("neuron_prof.tui.screens.ops", "neuron_prof.tui._data.RankTable"))
    assert crosses_privately(imp("neuron_prof.analysis.compile.churn", "neuron_prof.analysis.sites._x.y"))
    assert crosses_privately(imp("neuron_prof.cli._open", "neuron_prof._open_server.TraceServer"))


def test_no_folder_holds_more_than_25_modules() -> None:
    counts: dict[Path, int] = {}
    for p in _modules().values():
        counts[p.parent] = counts.get(p.parent, 0) + 1
    big = {str(d.relative_to(ROOT)): n for d, n in counts.items() if n > MAX_MODULES}
    assert not big, f"folders over {MAX_MODULES} modules: {big}"


def test_analysis_and_model_import_no_torch() -> None:
    roots = (ROOT / "neuron_prof" / "analysis", ROOT / "neuron_prof" / "model")
    bad = []
    for folder in roots:
        for p in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text(), str(p))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                bad += [f"{p.relative_to(ROOT)}: {n}" for n in names
                        if n.split(".")[0] in ("torch", "textual", "plotly", "neuron_prof")
                        and not n.startswith(("neuron_prof.model", "neuron_prof.analysis", "neuron_prof.errors"))]
    assert not bad, "analysis/model import heavy or upper layers:\n" + "\n".join(bad)


def module_graph() -> dict[str, set[str]]:
    """Module -> the shipped modules it imports (an import of a package's name edges to its __init__)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for imp in all_imports():
        t = imp.target
        while t and t not in mods:
            t = t.rpartition(".")[0]
        if t and t != imp.importer:
            graph[imp.importer].add(t)
    return graph


def test_shipped_modules_import_without_cycles() -> None:
    graph = module_graph()
    assert "neuron_prof.analysis.context" in graph["neuron_prof.analysis.compile.stalls"]  # read for real
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])
