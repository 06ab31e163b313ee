"""dispatch's log is silent unless asked for (``-v``), in a process of its own (pytest's own
logging handlers would hide what Python does by default)."""

from __future__ import annotations

import subprocess
import sys

WARN = 'logger("dispatch.adapters.kubeflow.live.streams").warning("pods.core: not followed")'


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_warning_is_silent_by_default_and_shown_once_configured() -> None:
    assert run(f"from dispatch.log import logger\n{WARN}") == ""
    shown = run(f"from dispatch.log import configure, logger\nconfigure(1)\n{WARN}")
    assert "WARNING dispatch.adapters.kubeflow.live.streams: pods.core: not followed" in shown
    # without dispatch's NullHandler, Python's last resort would print it
    plain = 'import logging\nlogging.getLogger("dispatch.x").warning("pods.core: not followed")'
    assert "not followed" in run(plain)


def test_debug_lines_need_two_v() -> None:
    debug = 'logger("dispatch.x").debug("routine")'
    assert run(f"from dispatch.log import configure, logger\nconfigure(1)\n{debug}") == ""
    assert "routine" in run(f"from dispatch.log import configure, logger\nconfigure(2)\n{debug}")


def test_the_cli_takes_v_before_the_verb() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dispatch", "-vv", "version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "dispatch" in done.stdout


def test_no_module_of_the_package_shadows_a_name_it_exports() -> None:
    """``import dispatch.x`` sets ``dispatch.x``: a module named like an export (``logs``,
    ``run``...) would replace the exported function for everyone once imported."""
    import pkgutil

    import dispatch

    modules = {info.name for info in pkgutil.iter_modules(dispatch.__path__)}
    assert modules.isdisjoint(dispatch.__all__), modules & set(dispatch.__all__)
