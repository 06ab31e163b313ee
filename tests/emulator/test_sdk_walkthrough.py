"""The Kubeflow SDK walk-through (list runtimes, train, wait, logs, delete) against
``dispatch emulator`` run as a user runs it: a separate process, reached through the
kubeconfig it wrote (``TrainerClient()`` reads ``$KUBECONFIG``). The SDK runs in its own venv
(tests/emulator/sdk_venv.py); without it the test is skipped with the reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .emulator_process import emulator_process
from .sdk_venv import ensure_sdk_venv

SCRIPT = Path(__file__).with_name("sdk_walkthrough_script.py")


@pytest.mark.timeout(900)
def test_sdk_walkthrough_against_dispatch_emulator(tmp_path: Path) -> None:
    python, why = ensure_sdk_venv()
    if python is None:
        pytest.skip(why)
    with emulator_process(tmp_path, "--time-scale", "4") as emu:
        done = subprocess.run(
            [str(python), str(SCRIPT)],
            env=emu.env(tmp_path),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["kubeconfig"] == str(emu.kubeconfig)
        assert seen["runtimes"] == ["torch-distributed"]
        assert seen["status"] == "Complete"
        assert seen["nodes"] == 2
        assert seen["steps"] == [["node-0", "Succeeded"], ["node-1", "Succeeded"]]
        # the emulated kubelet writes a line when the container starts and when it exits
        assert seen["logs"][1:3] == ["epoch 1: loss 0.42", "done"], seen["logs"]
        assert seen["logs"][0].startswith("emulated: container node started")
        assert seen["listed"] == [seen["name"]]
        assert seen["after_delete"] == []
        assert emu.stop() == 0
