"""The efficiency lines of the text summary: work done, achieved rate and share of peak, and the device
profile's own MFU beside ours (from the totals' ``efficiency`` object, `analysis.efficiency.rates`)."""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis.fmt import fmt_bytes


def fmt_flops(f: float) -> str:
    """FLOPs with a unit prefix: 1.2 GFLOP."""
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if f >= div:
            return f"{f / div:.3g} {unit}"
    return f"{f:.0f} FLOP"


def efficiency_lines(eff: dict[str, Any] | None) -> list[str]:
    """One or two lines; none when no op of the trace was counted (no shapes recorded)."""
    if not eff or not eff.get("counted_calls"):
        return []
    line = (f"Work: {fmt_flops(eff['flops'])}, {fmt_bytes(eff['bytes'])} moved in {eff['counted_calls']} counted "
            f"op calls (intensity {eff.get('intensity', 0):.3g} FLOP/B)")
    if "tflops" in eff:
        line += f"; {eff['tflops']:.3g} TFLOP/s, {eff['gb_per_s']:.3g} GB/s over their device time"
    if "mfu" in eff and eff.get("peak"):
        line += f"; MFU {100 * eff['mfu']:.2f}% of {eff['peak']['device']}"
    out = [line]
    ex = eff.get("explorer") or {}
    if "ours_mfu_percent" in ex:
        out.append(f"MFU: device profile {ex['explorer_mfu_percent']:.2f}%, ours from shapes "
                   f"{ex['ours_mfu_percent']:.2f}% (difference {ex['difference_points']:+.2f} points)")
    return out
