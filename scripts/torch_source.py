"""Where `make demo` installs PyTorch from: prints the pip arguments, tells why on stderr.

Usage: python scripts/torch_source.py VERSION [CPU_INDEX_URL]

PyPI's Linux wheel of torch is the CUDA build (several GB with its NVIDIA libraries); the
demo runs on CPU, so where PyTorch's CPU package index is reachable (checked with a short
timeout, so an offline machine does not hang) the CPU wheel is asked for by name
(``torch==VERSION+cpu`` on Linux and Windows, whose CPU wheels carry that label). Otherwise
pip installs ``torch==VERSION`` from the indexes it is configured with, and this says so. An
empty CPU_INDEX_URL skips the check. Standard library only: it runs before anything is
installed.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TIMEOUT = 5.0


def reachable(url: str, timeout: float = TIMEOUT) -> bool:
    """True if ``url`` answers an HTTP request within ``timeout`` seconds (any status below 400)."""
    request = urllib.request.Request(url.rstrip("/") + "/torch/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status) < 400
    except (OSError, ValueError):  # URLError, HTTPError, timeouts are OSErrors
        return False


def pip_arguments(version: str, index: str, platform: str = sys.platform) -> tuple[list[str], str]:
    """The arguments for ``pip install`` and the sentence saying where torch comes from."""
    if not index:
        return [], f"PyTorch {version}: from pip's configured indexes (CPU index check skipped)"
    if not reachable(index):
        return [], (
            f"PyTorch {version}: {index} is not reachable, so torch comes from pip's configured "
            "indexes (on Linux, PyPI's torch is the CUDA build: several GB)"
        )
    labelled = platform.startswith(("linux", "win"))
    pin = f"torch=={version}+cpu" if labelled else f"torch=={version}"
    return ["--extra-index-url", index, pin], f"PyTorch {version}: the CPU build, from {index}"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: torch_source.py VERSION [CPU_INDEX_URL]", file=sys.stderr)
        return 2
    version = argv[0]
    index = argv[1] if len(argv) == 2 else CPU_INDEX
    arguments, why = pip_arguments(version, index)
    print(why, file=sys.stderr)
    print(" ".join(arguments))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
