"""`make demo`'s install step (issue 26): it was silent for minutes (pip --quiet) and could pull
PyPI's CUDA build of torch. It now shows pip's progress and asks for the CPU wheel from
PyTorch's CPU index where that index answers, checked with a short timeout (here: servers on
loopback), and says where torch comes from."""

from __future__ import annotations

import http.server
import importlib.util
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_source", ROOT / "scripts/torch_source.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Index(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_reachable_cpu_index_is_used_with_the_cpu_wheel_asked_for_by_name(index: str) -> None:
    arguments, why = _script().pip_arguments("2.13.0", index, platform="linux")
    assert arguments == ["--extra-index-url", index, "torch==2.13.0+cpu"]
    assert why == f"PyTorch 2.13.0: the CPU build, from {index}"
    # macOS wheels carry no +cpu label: the index alone is enough there
    mac, _ = _script().pip_arguments("2.13.0", index, platform="darwin")
    assert mac == ["--extra-index-url", index, "torch==2.13.0"]


def test_an_unreachable_index_is_said_and_pip_keeps_its_configured_indexes(index: str) -> None:
    closed = f"http://127.0.0.1:{_closed_port()}/whl/cpu"
    arguments, why = _script().pip_arguments("2.13.0", closed, platform="linux")
    assert arguments == []
    assert why.startswith(f"PyTorch 2.13.0: {closed} is not reachable")
    missing, _ = _script().pip_arguments("2.13.0", index + "/nothing", platform="linux")
    assert missing == []  # answers, but not as an index with torch in it
    skipped, why = _script().pip_arguments("2.13.0", "", platform="linux")
    assert skipped == [] and "check skipped" in why


def test_the_script_prints_the_arguments_on_stdout_and_the_reason_on_stderr(index: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/torch_source.py"), "2.13.0", index],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.split()[:2] == ["--extra-index-url", index]
    assert "the CPU build" in done.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_with_progress_and_says_what_and_why(index: str) -> None:
    done = subprocess.run(
        ["make", "-n", "-o", ".venv/bin/python", "setup-demo", f"TORCH_CPU_INDEX={index}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    installs = [line for line in done.stdout.splitlines() if "pip install" in line]
    assert installs and not any("--quiet" in line for line in installs)
    assert "scripts/torch_source.py '2.13.0'" in done.stdout
    assert f"'{index}'" in done.stdout
    assert "Installing dispatch with PyTorch 2.13.0 and numpy" in done.stdout


def test_the_torch_extra_brings_numpy_pinned_in_constraints() -> None:
    """Without numpy every torch process warned "Failed to initialize NumPy"."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["torch"]
    assert any(item.split(">")[0].split("=")[0].strip() == "numpy" for item in extra)
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("numpy==") for line in pins)
