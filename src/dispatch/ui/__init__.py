"""``dispatch ui``: a live web view over the records store (jobs, attempts, causes, evidence).

A top layer like the CLI: it reads through the Python API and the records store, and acts
(cancel, release, hold) only when started with ``--allow-actions``. Its runtime dependencies
(aiohttp, Jinja2, pygal) are the ``ui`` extra; this module imports none of them, so
``dispatch ui`` can say what is missing before anything is loaded.

Modules: ``rows`` (a job as the jobs table shows it, the filters), ``index`` (every job's row,
kept in memory), ``feed`` (the store's change feed, one query per tick, fanned out to the open
pages), ``timeline`` (a job's attempts, evidence and decisions on one time axis),
``overview`` and ``charts`` (ends by cause over time, time lost, what runs where),
``masking`` (secret values never leave the server), ``guard`` (the action token and
same-origin checks), ``actions`` (cancel, release, hold, each recorded with its actor),
``state`` (what the handlers share), ``app`` (the aiohttp application: pages, actions,
assets), ``streams`` (the pages' server-sent events) and ``server`` (starting it).
"""

from __future__ import annotations

import importlib.util

#: the modules of the ``ui`` extra, by the name pip installs them under
REQUIRED = {"aiohttp": "aiohttp", "jinja2": "Jinja2", "pygal": "pygal"}
INSTALL = "pip install 'dispatch-train[ui]'"


def missing_modules() -> list[str]:
    """The ``ui`` extra's packages that are not installed (pip's names), in order."""
    return [
        package for module, package in REQUIRED.items() if importlib.util.find_spec(module) is None
    ]
