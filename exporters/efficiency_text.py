"""The efficiency lines of the text summary: work done, achieved rate and share of peak, and the device
profile's own MFU beside ours (from the totals' ``efficiency`` object, `analysis.efficiency.rates`)."""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis.fmt import fmt_bytes, fmt_flops


def efficiency_lines(eff: dict[str, Any] | None) -> list[str]:
    """The work line (when some op was counted: shapes recorded), the critical path's shares and the device
    profile's MFU beside ours."""
    if not eff:
        return []
    out = _path_lines(eff.get("critical_path") or []) + _explorer_lines(eff.get("explorer") or {})
    if not eff.get("counted_calls"):
        return out
    line = (f"Work: {fmt_flops(eff['flops'])}, {fmt_bytes(eff['bytes'])} moved in {eff['counted_calls']} counted "
            f"op calls (intensity {eff.get('intensity', 0):.3g} FLOP/B)")
    if "tflops" in eff:
        line += f"; {eff['tflops']:.3g} TFLOP/s, {eff['gb_per_s']:.3g} GB/s over their device time"
    if "mfu" in eff and eff.get("peak"):
        line += f"; MFU {100 * eff['mfu']:.2f}% of {eff['peak']['device']}"
    out.insert(0, line)
    return out


def _explorer_lines(ex: dict[str, Any]) -> list[str]:
    """The device profile's Summary MFU beside ours and their difference, or why ours is not known."""
    if "explorer_mfu_percent" not in ex:
        return []
    if "ours_mfu_percent" in ex:
        return [(f"MFU: device profile {ex['explorer_mfu_percent']:.2f}%, ours from shapes "
                 f"{ex['ours_mfu_percent']:.2f}% (difference {ex['difference_points']:+.2f} points)")]
    return [f"MFU: device profile {ex['explorer_mfu_percent']:.2f}%; ours not known: {ex.get('ours_unknown', '?')}"]


def _path_lines(paths: list[dict[str, Any]]) -> list[str]:
    """The critical path of the steps shown, summed: how much of it was host, device and collectives."""
    total = sum(p["length_ns"] for p in paths)
    if not total:
        return []
    parts = [(k, sum(p[f"{k}_ns"] for p in paths)) for k in ("host", "device", "collective")]
    return [f"Critical path ({len(paths)} step{'s' if len(paths) > 1 else ''}): "
            + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts if v)]
