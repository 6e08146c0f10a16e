"""The emulated device's modules import each other one way only: no cycles, not even through imports inside
functions (read from the source, so nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = "neuron_prof.emulator"
DIR = Path(__file__).resolve().parents[1] / "neuron_prof" / "emulator"


def _module_names() -> set[str]:
    return {p.stem for p in DIR.glob("*.py")}


def _imports(path: Path, names: set[str]) -> set[str]:
    """The package modules `path` imports anywhere in its body ("__init__" for the package itself)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mod = node.module
            if mod == PKG:
                for alias in node.names:
                    found.add(alias.name if alias.name in names else "__init__")
            elif mod.startswith(PKG + "."):
                found.add(mod[len(PKG) + 1 :].split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.add(node.module.split(".")[0] if node.module else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PKG + "."):
                    found.add(alias.name[len(PKG) + 1 :].split(".")[0])
    return found


def import_graph() -> dict[str, set[str]]:
    names = _module_names()
    return {p.stem: _imports(p, names) - {p.stem} for p in sorted(DIR.glob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (c := visit(n)) is not None:
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)) is not None:
            return c
    return None


def test_emulator_modules_import_without_cycles() -> None:
    graph = import_graph()
    # the graph is read for real: the device path's known edges are there
    assert {"_operands", "_fallback", "_rnn_cells", "_state", "_tensor"} <= graph["_dispatch"]
    assert "_operands" in graph["_fallback"] and "_tensor" in graph["_operands"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_lazy_import_cycle() -> None:
    graph = import_graph()
    graph["_tensor"] = graph["_tensor"] | {"_dispatch"}  # what a lazy `from ._dispatch import execute` adds
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and "_tensor" in cycle and "_dispatch" in cycle
