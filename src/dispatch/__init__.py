"""dispatch: submit and supervise multi-node training jobs, with typed outcomes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dispatch-train")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
