"""The guard seen through kubectl, as a platform engineer meets it: a checked runtime edited
with ``kubectl apply`` into ``restartPolicy: OnFailure`` is refused with the rule id and the
reason; an unlabelled runtime is never looked at; and what ``failurePolicy`` does while the
webhook server is down (Fail: guarded writes refused with the API server's 500, everything
else untouched; Ignore: the guard is simply off)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.adapters.kubeflow.admission.contract import (
    LABEL_CHECKED,
    WEBHOOK_IDENTITY,
    WEBHOOK_RUNTIMES,
)
from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.admission import guarded
from tests.conftest import EXAMPLES
from tests.emulator.conftest import KUBECTL, kubectl

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="needs kubectl")

#: the emulator's admin kubeconfig user: nobody dispatch trusts
ADMIN = "kubernetes-admin"
RUNTIME = EXAMPLES / "kubeflow" / "runtimes" / "torch.yaml"
TRAINER = "trainer.kubeflow.org/v1alpha1"


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Emulator]:
    with Emulator(ClusterConfig(bookmark_interval=0.2), kubeconfig=tmp_path / "kubeconfig") as emu:
        yield emu


def _runtime(name: str, *, checked: bool, restart_policy: str = "Never") -> str:
    runtime: dict[str, Any] = yaml.safe_load(RUNTIME.read_text())
    runtime["metadata"]["name"] = name
    if checked:
        runtime["metadata"]["labels"][LABEL_CHECKED] = ""
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["restartPolicy"] = restart_policy
    return yaml.safe_dump(runtime)


def apply(emulator: Emulator, home: Path, text: str) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -f -`` of ``text`` (the emulator serves no OpenAPI: no validation)."""
    return kubectl(emulator, home, "apply", "--validate=false", "-f", "-", stdin=text)


def _dispatch_trainjob() -> dict[str, Any]:
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {
            "name": "train-x7k2p-1",
            "namespace": "default",
            "labels": {"dispatch.dev/job": "train-x7k2p", "dispatch.dev/attempt": "1"},
        },
        "spec": {
            "runtimeRef": {"name": "guarded", "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": 1},
        },
    }


def test_a_checked_runtime_edited_into_on_failure_is_refused_with_the_rule(
    emulator: Emulator, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with guarded.webhook(emulator, tmp_path, ("dispatch-ci",)) as hook:
        created = apply(emulator, home, _runtime("guarded", checked=True))
        assert created.returncode == 0, created.stderr
        edited = apply(
            emulator, home, _runtime("guarded", checked=True, restart_policy="OnFailure")
        )
        assert edited.returncode == 1
        assert f'admission webhook "{WEBHOOK_RUNTIMES}" denied the request' in edited.stderr
        assert "restart-policy:" in edited.stderr and "OnFailure" in edited.stderr
        stored = emulator.get(TRAINER, "ClusterTrainingRuntime", "guarded", None)
        job = stored["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert job["template"]["spec"]["restartPolicy"] == "Never"  # nothing changed
        # an unlabelled runtime is never looked at: the same edit goes through
        assert apply(emulator, home, _runtime("plain", checked=False)).returncode == 0
        bad = _runtime("plain", checked=False, restart_policy="OnFailure")
        assert apply(emulator, home, bad).returncode == 0
        judged = {d.get("name") for d in hook.decisions()}
        assert "guarded" in judged and "plain" not in judged


def test_with_the_server_down_failure_policy_fail_refuses_only_what_it_guards(
    emulator: Emulator, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with guarded.webhook(emulator, tmp_path, ("dispatch-ci",)) as hook:
        assert apply(emulator, home, _runtime("guarded", checked=True)).returncode == 0
        emulator.create(_dispatch_trainjob())
        hook.process.terminate()
        hook.process.wait(timeout=10)
        edited = apply(
            emulator, home, _runtime("guarded", checked=True, restart_policy="OnFailure")
        )
        assert edited.returncode == 1
        assert f'failed calling webhook "{WEBHOOK_RUNTIMES}"' in edited.stderr
        patched = kubectl(emulator, home, "annotate", "trainjob", "train-x7k2p-1", "note=hello")
        assert patched.returncode == 1
        assert f'failed calling webhook "{WEBHOOK_IDENTITY}"' in patched.stderr
        # what the guard does not select is untouched
        assert apply(emulator, home, _runtime("plain", checked=False)).returncode == 0
        configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        other = apply(emulator, home, yaml.safe_dump(configmap))
        assert other.returncode == 0, other.stderr


def test_with_the_server_down_failure_policy_ignore_lets_everything_through(
    emulator: Emulator, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with guarded.webhook(emulator, tmp_path, ("dispatch-ci",), failure_policy="Ignore") as hook:
        assert apply(emulator, home, _runtime("guarded", checked=True)).returncode == 0
        hook.process.terminate()
        hook.process.wait(timeout=10)
        edited = apply(
            emulator, home, _runtime("guarded", checked=True, restart_policy="OnFailure")
        )
        assert edited.returncode == 0, edited.stderr  # the guard is off: the bad edit lands
