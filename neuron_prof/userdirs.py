"""The user's cache and data folders for neuron-prof, and bounding what is kept there (one rule for each).

Cache: `$NEURON_PROF_CACHE_DIR`, else `$XDG_CACHE_HOME/neuron-prof` (an absolute path only, as the XDG spec
says), else `~/.cache/neuron-prof`. The column index cache (`loaders`) and the Neuron runtime's captures
(`backends.probes.runtime_profile`) live there, each in its own folder with its own byte budget.
Data (what must outlive a cache clean-up: the run history): `$NEURON_PROF_DATA_DIR`, else
`$XDG_DATA_HOME/neuron-prof` (absolute only), else `~/.local/share/neuron-prof`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def _user_dir(own: str, xdg_env: str, default: tuple[str, ...]) -> Path | None:
    base = os.environ.get(own)
    if base:
        return Path(base)
    xdg = os.environ.get(xdg_env)
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative path is invalid and ignored
        return Path(xdg) / "neuron-prof"
    try:
        return Path.home().joinpath(*default, "neuron-prof")
    except (RuntimeError, KeyError):
        return None


def cache_dir() -> Path | None:
    """neuron-prof's cache folder (None when no home folder is known)."""
    return _user_dir("NEURON_PROF_CACHE_DIR", "XDG_CACHE_HOME", (".cache",))


def data_dir() -> Path | None:
    """neuron-prof's data folder: the run history (None when no home folder is known)."""
    return _user_dir("NEURON_PROF_DATA_DIR", "XDG_DATA_HOME", (".local", "share"))


def budget(env: str, default: int) -> int:
    """A byte budget from `env` (default when unset or not a number)."""
    try:
        return max(0, int(os.environ.get(env, default)))
    except ValueError:
        return default


def tree_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it is gone)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def evict_dirs(parent: Path, budget_bytes: int, keep: Path | None = None) -> list[Path]:
    """Delete the oldest folders in `parent` (by mtime) until it holds at most `budget_bytes`; `keep` stays.
    Returns what was deleted; never raises."""
    try:
        entries = [(p.stat().st_mtime, tree_bytes(p), p) for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return []
    total = sum(size for _, size, _ in entries)
    gone = []
    for _, size, p in sorted(entries, key=lambda t: t[0]):
        if total <= budget_bytes:
            break
        if keep is not None and p.resolve() == keep.resolve():
            continue
        shutil.rmtree(p, ignore_errors=True)
        total -= size
        gone.append(p)
    return gone
