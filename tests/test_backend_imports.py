"""The backends and their probes import each other one way only: no cycles, not even through imports inside
functions (read from the source, so nothing is imported). Issue 21 item 8: `_hostops` <-> `_view` was one."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_emulator_imports import find_cycle

ROOT = Path(__file__).resolve().parents[1]
PKG = "neuron_prof.backends"


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its body (TYPE_CHECKING blocks included)."""
    files = sorted((ROOT / "neuron_prof" / "backends").rglob("*.py"))
    names = {_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for p in files:
        me, found = _name(p), set()
        pkg = me if p.name == "__init__.py" else me.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            mods: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names]
                # `from pkg import mod` is an edge to mod (as in test_emulator_imports), `from pkg import x` to pkg
                mods = [m for m in subs if m in names] or [base]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            found |= {m for m in mods if m in names}
        graph[me] = found - {me}
    return graph


def test_backend_modules_import_without_cycles() -> None:
    graph = import_graph()
    assert "neuron_prof.backends.probes.view" in graph["neuron_prof.backends.probes._hostops"]  # read for real
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_finder_sees_the_old_hostops_view_cycle() -> None:
    graph = import_graph()
    graph["neuron_prof.backends.probes.view"].add("neuron_prof.backends.probes._hostops")
    assert find_cycle(graph) is not None
