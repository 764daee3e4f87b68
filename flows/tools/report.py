"""How every benchmark hands in its result: one JSON report on stdout, and a copy at ``--output``.

The reports under ``benchmarks/results/`` are these files; the README there indexes them.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """What a timing depends on: the CPU model, AVX-512, the cores this process may use, the load.

    Two machines of the same kind differed 1.8x in updates an hour (an AMD EPYC with AVX-512
    against the machine of earlier reports), so a figure is only comparable with its machine named.
    """
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:  # not Linux: the platform's own name
        pass
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_model": model, "avx512": "avx512f" in flags, "cpus": os.cpu_count(), "affinity": affinity,
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def emit(report: dict[str, Any], output: Path | None = None, indent: int = 2) -> None:
    """Writes ``report`` as JSON to stdout and, if given, to ``output`` (values JSON cannot hold,
    such as paths, as their strings), with the :func:`machine` it ran on (what the report says of
    its machine, such as the load at its start, kept)."""
    own = report.get("machine") or {}
    if isinstance(own, dict):
        report = {**report, "machine": {**machine(), **own}}
    else:  # a report that names its machine in its own way keeps it, beside this one
        report = {**report, "machine": machine(), "machine_as_reported": own}
    text = json.dumps(report, indent=indent, default=str) + "\n"
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
