"""The device's peak rates: one table, each row with its source, and which row a trace's device is.

Peaks are dense (no structured sparsity) per device as the trace sees one: a CUDA GPU, a Neuron logical
NeuronCore. FP32 is the plain FP32 rate (TF32 tensor cores are used only when the program allows it, and the
trace does not say). A precision a row has no figure for falls back to the row's FP32 rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from neuron_prof.model import Meta, Trace

T = 1e12


@dataclass(frozen=True)
class Peak:
    """Peak rates of one device."""

    device: str
    flops: dict[str, float]
    """FLOP/s per precision ("fp64", "fp32", "bf16", "fp16", "fp8", "int8")."""
    bytes_per_s: float
    """Memory bandwidth (HBM)."""
    source: str

    def of(self, precision: str) -> float:
        """FLOP/s for `precision` (FP32's where the row has no figure for it)."""
        return self.flops.get(precision) or self.flops["fp32"]

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "tflops": {k: v / T for k, v in self.flops.items()},
                "memory_gb_per_s": self.bytes_per_s / 1e9, "source": self.source}


def _half(v: float) -> dict[str, float]:
    return {"bf16": v, "fp16": v}


PEAKS: tuple[tuple[str, Peak], ...] = (
    # (regex on the device name, its peak). First match wins: the more specific names first.
    (r"H200", Peak("NVIDIA H200 SXM", {"fp64": 34 * T, "fp32": 67 * T, **_half(989.5 * T), "fp8": 1979 * T,
                                       "int8": 1979 * T}, 4.8e12,
                   "NVIDIA H200 Tensor Core GPU datasheet (Nov 2024), table 'Technical Specifications', H200 SXM "
                   "column; sparsity figures halved")),
    (r"H100.*(PCIe|PCI-E)", Peak("NVIDIA H100 PCIe", {"fp64": 26 * T, "fp32": 51 * T, **_half(756 * T),
                                                      "fp8": 1513 * T, "int8": 1513 * T}, 2.0e12,
                                 "NVIDIA H100 Tensor Core GPU datasheet (2023), 'Technical Specifications', H100 PCIe "
                                 "column; sparsity figures halved")),
    (r"H100.*NVL", Peak("NVIDIA H100 NVL", {"fp64": 30 * T, "fp32": 60 * T, **_half(835.5 * T), "fp8": 1670.5 * T,
                                            "int8": 1670.5 * T}, 3.9e12,
                        "NVIDIA H100 Tensor Core GPU datasheet (2023), 'Technical Specifications', H100 NVL column; "
                        "sparsity figures halved")),
    (r"H100", Peak("NVIDIA H100 SXM", {"fp64": 34 * T, "fp32": 67 * T, **_half(989.5 * T), "fp8": 1979 * T,
                                       "int8": 1979 * T}, 3.35e12,
                   "NVIDIA H100 Tensor Core GPU datasheet (2023), 'Technical Specifications', H100 SXM column; "
                   "sparsity figures halved")),
    (r"A100.*80GB.*PCIe|A100.*PCIe.*80GB", Peak("NVIDIA A100 80GB PCIe", {"fp64": 9.7 * T, "fp32": 19.5 * T,
                                                                           **_half(312 * T), "int8": 624 * T},
                                                 1.935e12, "NVIDIA A100 Tensor Core GPU datasheet (2021), table "
                                                 "'NVIDIA A100 Tensor Core GPU Specifications', A100 80GB PCIe")),
    (r"A100.*80GB", Peak("NVIDIA A100 80GB SXM", {"fp64": 9.7 * T, "fp32": 19.5 * T, **_half(312 * T),
                                                  "int8": 624 * T}, 2.039e12,
                         "NVIDIA A100 Tensor Core GPU datasheet (2021), 'NVIDIA A100 Tensor Core GPU Specifications', "
                         "A100 80GB SXM")),
    (r"A100", Peak("NVIDIA A100 40GB", {"fp64": 9.7 * T, "fp32": 19.5 * T, **_half(312 * T), "int8": 624 * T},
                   1.555e12, "NVIDIA A100 Tensor Core GPU datasheet (2020), A100 40GB (SXM4 and PCIe: 1,555 GB/s)")),
    (r"L40S", Peak("NVIDIA L40S", {"fp32": 91.6 * T, **_half(362.05 * T), "fp8": 733 * T}, 0.864e12,
                   "NVIDIA L40S datasheet (2023), 'Technical Specifications'; sparsity figures halved")),
    (r"\bL4\b", Peak("NVIDIA L4", {"fp32": 30.3 * T, **_half(121 * T), "fp8": 242.5 * T}, 0.3e12,
                     "NVIDIA L4 Tensor Core GPU datasheet (2023), 'Specifications'; sparsity figures halved")),
    (r"A10G", Peak("NVIDIA A10G", {"fp32": 31.2 * T, **_half(125 * T)}, 0.6e12,
                   "NVIDIA A10 Tensor Core GPU datasheet (2021), 'Specifications' (A10G: AWS's A10 for G5)")),
    (r"V100", Peak("NVIDIA V100 SXM2", {"fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 125 * T}, 0.9e12,
                   "NVIDIA Tesla V100 GPU datasheet (2020), 'Specifications', V100 SXM2")),
    (r"MI250X", Peak("AMD Instinct MI250X (one GCD)", {"fp64": 23.95 * T, "fp32": 23.95 * T, **_half(191.5 * T),
                                                       "int8": 191.5 * T}, 1.6384e12,
                      "AMD Instinct MI250X datasheet: per OAM 47.9 FP32 vector TFLOPS, 383 FP16/BF16, 3.2768 TB/s, "
                      "2 GCDs (a GCD is one torch device): half")),
    (r"MI250|MI210|AMD.* 104 SMs cc9\.0", Peak("AMD Instinct MI250 (one GCD) / MI210", {
        "fp64": 22.6 * T, "fp32": 22.6 * T, **_half(181 * T), "int8": 181 * T}, 1.6384e12,
        "AMD Instinct MI250 datasheet: per OAM 45.3 FP32 vector TFLOPS, 362.1 FP16/BF16, 3.2768 TB/s, 2 GCDs of "
        "104 CUs (ROCm names each 'AMD Radeon Graphics', gfx90a = cc 9.0): half; the MI210 is one such GCD")),
    (r"(?i)trn2|trainium2", Peak("AWS Trainium2 logical NeuronCore (LNC=2)", {
        "fp32": 181 * T / 4, "bf16": 667 * T / 4, "fp16": 667 * T / 4, "fp8": 1299 * T / 4}, 2.9e12 / 4,
        "AWS Neuron documentation, 'Trainium2 Architecture': per chip 667 dense BF16/FP16/TF32 TFLOPS, 1,299 dense "
        "FP8, 181 FP32, 2.9 TB/s HBM, 8 NeuronCore-v3; a logical core of 2 (LNC=2, the default) is a quarter")),
    (r"(?i)trn1|trainium", Peak("AWS Trainium NeuronCore-v2", {
        "fp32": 47.5 * T / 2, "bf16": 190 * T / 2, "fp16": 190 * T / 2, "fp8": 190 * T / 2}, 0.82e12 / 2,
        "AWS Neuron documentation, 'Trainium Architecture': per chip 190 FP16/BF16/FP8 TFLOPS, 47.5 FP32, "
        "820 GB/s HBM, 2 NeuronCore-v2; one core is half")),
)


def device_name(trace: Trace) -> str:
    """The device a trace ran on, as far as it says: Kineto's ``deviceProperties`` name (with its memory, SM or
    CU count and compute capability, which tell cards of one name apart), a Neuron Explorer
    profile's instance type, the capture's device name; "" when none."""
    md = trace.metadata
    kin = md.get(Meta.KINETO)
    props = kin.get("deviceProperties") if isinstance(kin, dict) else None
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and p.get("name"):
                mem = p.get("totalGlobalMem")
                size = f" {round(int(mem) / 2**30)}GB" if isinstance(mem, (int, float)) and mem > 0 else ""
                sms = f" {p['numSms']} SMs" if isinstance(p.get("numSms"), int) else ""
                cc = f" cc{p['computeMajor']}.{p.get('computeMinor', 0)}" if "computeMajor" in p else ""
                return f"{p['name']}{size}{sms}{cc}"
    ex = md.get("neuron_explorer")
    if isinstance(ex, dict) and ex.get("instance_type"):
        return str(ex["instance_type"])
    for k in ("device_name", "instance_type"):
        if isinstance(md.get(k), str) and md[k]:
            return str(md[k])
    return ""


def peak_for(name: str) -> Peak | None:
    """The table's row for device `name`; None for a device the table does not know."""
    for pat, peak in PEAKS:
        if name and re.search(pat, name):
            return peak
    return None


def trace_peak(trace: Trace) -> Peak | None:
    """The peak of the device `trace` ran on (`device_name`, `peak_for`)."""
    return peak_for(device_name(trace))
