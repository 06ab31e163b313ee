"""A benchmark child's own peak resident set. Standard library only: the SDK's child
(``bench/scale_sdk.py``) runs in the SDK's virtual environment and imports it as a sibling."""

import contextlib
import resource
from pathlib import Path


def peak_rss_mib(usage: resource.struct_rusage) -> float:
    """This process's own peak resident set: ``VmHWM`` (Linux). Not ``ru_maxrss``: after
    fork+exec it starts from the parent's peak, so a child of a large benchmark process
    would report the parent's memory."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return usage.ru_maxrss / 1024  # KiB on Linux, used where /proc is missing
