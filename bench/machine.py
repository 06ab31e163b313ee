"""The machine a benchmark ran on: CPU model, cores, memory, load average, Python, date."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path
from typing import Any

import psutil


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def describe() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memoryGiB": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "loadAverageAtStart": load(),
        "date": now(),
    }
