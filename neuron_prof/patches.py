"""Attribute patches that the profiler puts on the user's libraries for the length of a session, and undoes.

    saved = []
    patch(torch.Tensor, "__add__", forwarder, saved)
    ...
    restore_patches(saved)          # newest first; an attribute the owner did not have is deleted again
"""

from __future__ import annotations

from typing import Any

Saved = list[tuple[object, str, object, bool]]
"""(owner, name, original, whether the owner had the attribute itself) per patch, oldest first."""


def patch(owner: object, name: str, value: Any, saved: Saved) -> None:
    """Set `owner.name = value`, remembering what to restore."""
    had = name in vars(owner)
    saved.append((owner, name, vars(owner)[name] if had else None, had))
    setattr(owner, name, value)


def restore_patches(saved: Saved) -> None:
    """Undo the patches in `saved`, newest first, and forget them."""
    for owner, name, orig, had in reversed(saved):
        if had:
            setattr(owner, name, orig)
        else:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
    saved.clear()
