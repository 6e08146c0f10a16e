"""Proves the security tests can fail: each security-critical line is broken in a copy of the tree, and
the tests that guard it must then fail.

    .venv/bin/python tests/mutation_check.py          # exit 0: every mutation was caught
    .venv/bin/python tests/mutation_check.py --list   # the mutations and their guarding tests

The working tree is never touched: the sources and tests are copied to a temporary folder (with
`exporters/` and `tui/` linked in as `neuron_prof.exporters` / `neuron_prof.tui`, as setup.py installs
them), the copy is checked to be what Python imports, the guarding tests are run once unmutated (they must
pass) and then once per mutation, with only that mutation applied (they must fail). Exit status 1 when a
mutation survives, 2 when the copy or a baseline is broken (nothing could be judged).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_SEC = "tests/test_reliability_security.py"
_OPEN = "tests/test_open_server.py"


@dataclass(frozen=True)
class Mutation:
    """Replace each `old` (which must occur exactly once in `path`) by its `new`; `tests` must then fail."""

    name: str
    path: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


def _one(name: str, path: str, old: str, new: str, *tests: str) -> Mutation:
    return Mutation(name, path, ((old, new),), tests)


_TUI_TEST = f"{_SEC}::test_tui_shows_markup_literally_and_escapes_control_characters"
_REPORT_TEST = f"{_SEC}::test_report_escapes_html_and_cannot_close_its_scripts"
MUTATIONS: tuple[Mutation, ...] = (
    _one("column cache maps a column of Python objects", "neuron_prof/loaders/coldir.py",
         'if np.dtype(dtype).kind not in _NUMERIC:', 'if np.dtype(dtype).kind not in _NUMERIC + "O":',
         f"{_SEC}::test_a_hostile_index_cache_is_never_unpickled"),
    _one("TUI detail pane parses trace strings as markup", "tui/screens/base.py",
         "t.append(printable(v, newlines=True))", "t.append(Text.from_markup(printable(v, newlines=True)))",
         _TUI_TEST),
    _one("summary and TUI pass control characters to the terminal", "neuron_prof/analysis/fmt.py",
         "return str(s).translate(_CONTROL_KEEP_LINES if newlines else _CONTROL)", "return str(s)",
         _TUI_TEST, f"{_SEC}::test_summary_text_shows_literal_escaped_names"),
    _one("open serves any path", "neuron_prof/cli/_open_server.py",
         "if raw.split(\"?\", 1)[0] != self.server.url_path:", "if not raw.startswith(\"/\"):",
         f"{_OPEN}::test_other_paths_and_traversal_are_refused"),
    _one("open accepts any Host (DNS rebinding)", "neuron_prof/cli/_open_server.py",
         "if host is not None and host not in ", "if False and host not in ",
         f"{_OPEN}::test_foreign_origins_methods_and_hosts_are_refused"),
    _one("report writes trace text unescaped", "exporters/_report_html.py",
         "return html.escape(str(s), quote=True)", "return str(s)", _REPORT_TEST),
    _one("report's script JSON keeps '<'", "exporters/_report_html.py",
         "return s.replace(\"<\", \"\\\\u003c\").replace(\">\", \"\\\\u003e\").replace(\"&\", \"\\\\u0026\")",
         "return s", f"{_SEC}::test_json_in_a_script_cannot_end_it"),
    Mutation("report's figures take trace text unescaped", "exporters/_report_figures.py",
             (("return html.escape(s, quote=False)", "return s"),), (_REPORT_TEST,)),
)

_COPY = ("neuron_prof", "exporters", "tui", "tests", "pyproject.toml", "setup.py")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")


def make_copy(dest: Path) -> Path:
    """The tree's sources and tests under `dest/main` (beside a link to ../shared, as in the checkout)."""
    root = dest / "main"
    root.mkdir()
    for name in _COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=_IGNORE)
        else:
            shutil.copy2(src, root / name)
    for pkg in ("exporters", "tui"):
        (root / "neuron_prof" / pkg).symlink_to(root / pkg, target_is_directory=True)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (dest / "shared").symlink_to(shared, target_is_directory=True)
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def imports_the_copy(root: Path) -> bool:
    """True when `neuron_prof`, its exporters and its TUI all come from the copy, not the checkout."""
    code = ("import neuron_prof, neuron_prof.exporters._report_html as h, neuron_prof.tui.widgets.columns as f;"
            "print(neuron_prof.__file__); print(h.__file__); print(f.__file__)")
    p = subprocess.run([sys.executable, "-c", code], cwd=root, env=_env(root), capture_output=True, text=True)
    files = p.stdout.split()
    return p.returncode == 0 and len(files) == 3 and all(Path(f).is_relative_to(root) for f in files)


def run_tests(root: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *tests]
    return subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=600)


def apply(root: Path, m: Mutation) -> str:
    """Apply `m` to the copy; returns the original text of the file, to restore it."""
    path = root / m.path
    text = mutant = path.read_text()
    for old, new in m.edits:
        n = mutant.count(old)
        if n != 1:  # the source moved on: nothing can be judged until MUTATIONS follows it
            print(f"mutation {m.name!r}: {old!r} occurs {n} times in {m.path}; update MUTATIONS", file=sys.stderr)
            raise SystemExit(2)
        mutant = mutant.replace(old, new)
    path.write_text(mutant)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the mutations and exit")
    args = ap.parse_args(argv)
    if args.list:
        for m in MUTATIONS:
            print(f"{m.name}: {m.path}")
            for old, new in m.edits:
                print(f"  - {old}\n  + {new}")
            print(f"  guarded by {', '.join(m.tests)}")
        return 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nprof-mutants-") as tmp:
        root = make_copy(Path(tmp))
        if not imports_the_copy(root):
            print("mutation check: Python does not import the copied tree; nothing judged", file=sys.stderr)
            return 2
        every = tuple(dict.fromkeys(t for m in MUTATIONS for t in m.tests))
        base = run_tests(root, every)
        if base.returncode != 0:
            print(f"mutation check: the guarding tests fail unmutated:\n{base.stdout[-3000:]}", file=sys.stderr)
            return 2
        survivors = []
        for m in MUTATIONS:
            original = apply(root, m)
            try:
                p = run_tests(root, m.tests)
            finally:
                (root / m.path).write_text(original)
            caught = p.returncode == 1  # 1: tests failed (not 2-5: interrupted, usage error, none collected)
            print(f"{'caught  ' if caught else 'SURVIVED'} {m.name} ({m.path}; pytest exit {p.returncode})")
            if not caught:
                survivors.append(m)
                print(p.stdout[-2000:], file=sys.stderr)
    print(f"mutation check: {len(MUTATIONS) - len(survivors)}/{len(MUTATIONS)} caught "
          f"in {time.monotonic() - t0:.0f} s")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
