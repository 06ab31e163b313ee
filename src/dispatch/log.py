"""dispatch's loggers: one per module, silent unless the application asks for them.

Modules log through ``logger(__name__)``: stream starts, resumptions and stops (debug), lists
made again and leases lost (info), refused permissions and kinds a cluster does not serve
(warning). A ``NullHandler`` on the ``dispatch`` logger keeps a library user's program quiet
until it configures ``logging``; the command line shows them with ``-v`` (info and above) or
``-vv`` (debug), on standard error (``configure``).
"""

from __future__ import annotations

import logging

ROOT = "dispatch"
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (pass ``__name__``)."""
    return logging.getLogger(name)


def configure(verbosity: int) -> None:
    """Show dispatch's log on standard error: nothing at 0, info at 1, debug from 2."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger(ROOT)
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
