"""mypy over the package as it installs (`make lint`; extra arguments go to mypy).

`tui/` and `exporters/` install as `neuron_prof.tui` and `neuron_prof.exporters` (setup.py ROOTS), and the
code imports them by those names, which mypy cannot find from the folders. So mypy reads a tree of links,
build/typecheck/neuron_prof, where each folder sits at its installed name; the paths in its messages are
mapped back to the files here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"exporters": "exporters", "tui": "tui"}
"""neuron_prof.<name> -> its folder (setup.py ROOTS)."""
TREE = REPO / "build" / "typecheck"


def link_tree(tree: Path = TREE) -> Path:
    """`tree`/neuron_prof: links to neuron_prof's entries and to the folders of ROOTS; returns `tree`."""
    pkg = tree / "neuron_prof"
    pkg.mkdir(parents=True, exist_ok=True)
    for old in pkg.iterdir():
        old.unlink()
    for entry in (REPO / "neuron_prof").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name, folder in ROOTS.items():
        (pkg / name).symlink_to(REPO / folder)
    return tree


def main(argv: list[str]) -> int:
    tree = link_tree()
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
           "--cache-dir", str(REPO / ".mypy_cache"), "-p", "neuron_prof", *argv]
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=False)
    back = re.compile(rf"^neuron_prof/({'|'.join(ROOTS)})/", re.MULTILINE)
    sys.stdout.write(back.sub(lambda m: ROOTS[m.group(1)] + "/", proc.stdout))
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
