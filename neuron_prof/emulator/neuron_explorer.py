"""The stand-in ``neuron-explorer`` for the emulated device: ``python -m neuron_prof.emulator.neuron_explorer``.

    neuron-explorer view -d RUN_DIR --output-format parquet --output-file OUT
    neuron-explorer --show-profile-schema
    neuron-explorer --version

It takes the real tool's documented command line (neuron-explorer-facts, "Processing") and processes only the
emulated runtime's captures (`_explorer_view`); Parquet is the one output format it writes. It is never installed
as a console script: `neuron_prof.emulator.enable()` puts a ``neuron-explorer`` launcher for it on the emulated
process's PATH (`install_on_path`), so a machine without the Neuron tools still has no ``neuron-explorer``.
Exit codes: 0 done, 1 nothing to process, 2 usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

COMMAND = "neuron-explorer"
VERSION = "emulated (neuron-prof stand-in)"


def main(argv: list[str] | None = None) -> int:
    from neuron_prof.emulator import _explorer_schema

    ap = argparse.ArgumentParser(prog=COMMAND, description="Stand-in neuron-explorer for the emulated device.")
    ap.add_argument("--version", action="store_true")
    ap.add_argument("--show-profile-schema", action="store_true")
    sub = ap.add_subparsers(dest="cmd")
    view = sub.add_parser("view", help="process a run directory into tables")
    view.add_argument("-d", "--directory", required=True)
    view.add_argument("--output-format", default="parquet")
    view.add_argument("--output-file", default=None)
    a = ap.parse_args(argv)
    if a.version:
        print(f"{COMMAND} {VERSION}")
        return 0
    if a.show_profile_schema:
        sys.stdout.write(_explorer_schema.as_yaml())
        return 0
    if a.cmd != "view":
        ap.print_usage(sys.stderr)
        return 2
    if a.output_format != "parquet":
        print(f"{COMMAND}: the emulated stand-in writes --output-format parquet only", file=sys.stderr)
        return 2
    from neuron_prof.emulator._explorer_view import process

    run = Path(a.directory)
    out = Path(a.output_file) if a.output_file else run / "parquet"
    n, warnings = process(run, out)
    for w in warnings:
        print(f"{COMMAND}: warning: {w}", file=sys.stderr)
    if not n:
        print(f"{COMMAND}: no runtime capture under {run}", file=sys.stderr)
        return 1
    print(f"{COMMAND}: {n} capture(s) of {run} -> {out}")
    return 0


def install_on_path(bin_dir: Path) -> Path:
    """Write a ``neuron-explorer`` launcher (this interpreter, this module) into `bin_dir` and put `bin_dir` first
    on this process's PATH (children inherit it). Returns the launcher."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / COMMAND
    text = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m neuron_prof.emulator.neuron_explorer \"$@\"\n"
    if not exe.is_file() or exe.read_text() != text:
        tmp = bin_dir / f".{COMMAND}.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, exe)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if str(bin_dir) not in parts:
        os.environ["PATH"] = os.pathsep.join([str(bin_dir), *[p for p in parts if p]])
    return exe


if __name__ == "__main__":
    sys.exit(main())
