"""An OpenMPI TrainJob on the emulator, made with the official ``kubernetes`` client.

The emulated Trainer renders the MPI plugin (``planning.plugins.mpi``): a JobSet with the
``node`` job (sshd) and the ``launcher`` job (mpirun, a node too), the SSH-key Secret (a real
key pair when ``ssh-keygen`` is installed) and the hostfile ConfigMap, both owned by the
TrainJob. Pods behave as the scenario says: a run to success, then an application error on
the launcher and one on a worker, each of which ``dispatch diagnose`` names.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from dispatch.adapters.kubeflow.planning.plugins.mpi import SSH_KEY_PLACEHOLDER  # noqa: E402
from dispatch.cli.main import cli  # noqa: E402
from dispatch.testing.k8s import Emulator  # noqa: E402
from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario  # noqa: E402
from tests.emulator.scenario_helpers import cluster, wait_for  # noqa: E402
from tests.kubeflow.e2e.harness import diagnose_config  # noqa: E402

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
NS = "default"
RUNTIME = "mpi-strict"
COMMAND = ["mpirun", "python", "/workspace/train.py"]
SCENARIO = Scenario(
    pods=(
        PodRule(PodBehaviour(run_for=3), replicated_job="launcher", jobset="mpi-ok"),
        PodRule(PodBehaviour(run_for=2, exit_code=3), replicated_job="launcher", jobset="mpi-l"),
        PodRule(
            PodBehaviour(run_for=2, exit_code=4), replicated_job="node", index=1, jobset="mpi-w"
        ),
    ),
    default=PodBehaviour(run_for=None),  # sshd, and the other launchers, run until deleted
)


def mpi_runtime() -> dict[str, Any]:
    """Trainer's DeepSpeed runtime shape (the launcher is the trainer job and a node), with
    one run per pod: ``restartPolicy: Never``, ``backoffLimit: 0``, no JobSet restarts."""

    def job(name: str, container: dict[str, Any], **labels: str) -> dict[str, Any]:
        pod = {"restartPolicy": "Never", "containers": [container]}
        template: dict[str, Any] = {"spec": {"backoffLimit": 0, "template": {"spec": pod}}}
        if labels:
            template["metadata"] = {"labels": labels}
        return {"name": name, "template": template}

    image = "ghcr.io/kubeflow/trainer/deepspeed-runtime"
    sshd = {"name": "node", "image": image, "command": ["/usr/sbin/sshd"], "args": ["-De"]}
    launcher = {"name": "node", "image": image}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME, "labels": {"trainer.kubeflow.org/framework": "mpi"}},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "numProcPerNode": 2,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/home/mpiuser/.ssh",
                    "runLauncherAsNode": True,
                },
            },
            "template": {
                "spec": {
                    "failurePolicy": {"maxRestarts": 0},
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        job("node", sshd),
                        job(
                            "launcher",
                            launcher,
                            **{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"},
                        ),
                    ],
                }
            },
        },
    }


def mpi_trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {"numNodes": 3, "command": COMMAND},
        },
    }


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with cluster(SCENARIO, nodes=("node-1", "node-2", "node-3", "node-4")) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def api(emu: Emulator) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(emu.kubeconfig))
    client.CustomObjectsApi(api_client).create_cluster_custom_object(
        *TRAINER, "clustertrainingruntimes", mpi_runtime()
    )
    yield api_client
    api_client.close()


def create(api: client.ApiClient, name: str) -> dict[str, Any]:
    made: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        *TRAINER, NS, "trainjobs", mpi_trainjob(name)
    )
    return made


def read(api: client.ApiClient, group: tuple[str, str], plural: str, name: str) -> Any:
    """The object, or None while it does not exist."""
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(*group, NS, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def finished(api: client.ApiClient, name: str, kind: str) -> bool:
    conditions = ((read(api, TRAINER, "trainjobs", name) or {}).get("status") or {}).get(
        "conditions"
    ) or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def owned_by(obj: Any, trainjob: dict[str, Any]) -> bool:
    [ref] = obj.metadata.owner_references
    meta = trainjob["metadata"]
    return (ref.kind, ref.name, ref.uid, ref.controller) == (
        "TrainJob",
        meta["name"],
        meta["uid"],
        True,
    )


def pod_spec(jobset: dict[str, Any], job: str) -> dict[str, Any]:
    rjob = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == job)
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def test_an_mpi_trainjob_gets_launcher_and_nodes_its_keys_and_hostfile_and_completes(
    api: client.ApiClient,
) -> None:
    trainjob = create(api, "mpi-ok")
    jobset = wait_for("the JobSet", lambda: read(api, JOBSET, "jobsets", "mpi-ok"))
    jobs = {
        r["name"]: r["template"]["spec"]["parallelism"] for r in jobset["spec"]["replicatedJobs"]
    }
    assert jobs == {"node": 2, "launcher": 1}  # numNodes 3: the launcher is a node too
    [launcher] = pod_spec(jobset, "launcher")["containers"]
    assert launcher["command"] == COMMAND
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    mounts = {m["name"]: m["mountPath"] for m in launcher["volumeMounts"]}
    assert mounts == {"mpi-ssh-auth": "/home/mpiuser/.ssh", "mpi-hostfile": "/etc/mpi"}
    [node] = pod_spec(jobset, "node")["containers"]
    assert [m["name"] for m in node["volumeMounts"]] == ["mpi-ssh-auth"]

    core = client.CoreV1Api(api)
    secret = core.read_namespaced_secret("mpi-ok-mpi-ssh-auth", NS)
    assert (secret.type, secret.immutable) == ("kubernetes.io/ssh-auth", True)
    assert owned_by(secret, trainjob)
    private = base64.b64decode(secret.data["ssh-privatekey"]).decode()
    public = base64.b64decode(secret.data["ssh-publickey"]).decode()
    if shutil.which("ssh-keygen"):  # the emulated Trainer made a real pair, as Trainer does
        assert private.startswith("-----BEGIN EC PRIVATE KEY-----")
        assert public.startswith("ecdsa-sha2-nistp521 ") and public.endswith("\n")
    else:
        assert secret.data["ssh-privatekey"] == SSH_KEY_PLACEHOLDER
    hostfile = core.read_namespaced_config_map("mpi-ok-mpi-hostfile", NS)
    assert owned_by(hostfile, trainjob)
    assert hostfile.data == {
        "hostfile": "mpi-ok-node-0-0.mpi-ok slots=2\n"
        "mpi-ok-node-0-1.mpi-ok slots=2\n"
        "mpi-ok-launcher-0-0.mpi-ok slots=2\n"
    }
    wait_for("the TrainJob to complete", lambda: finished(api, "mpi-ok", "Complete"))


@pytest.mark.parametrize(
    ("name", "pod_prefix", "rank", "exit_code"),
    [
        ("mpi-l", "mpi-l-launcher-0-0-", 2, 3),  # the launcher: the hostfile's last node
        ("mpi-w", "mpi-w-node-0-1-", 1, 4),  # the second sshd worker
    ],
)
def test_an_app_error_on_the_launcher_or_a_worker_is_diagnosed_with_its_rank(
    api: client.ApiClient,
    emu: Emulator,
    tmp_path: Path,
    name: str,
    pod_prefix: str,
    rank: int,
    exit_code: int,
) -> None:
    create(api, name)
    wait_for(f"{name} to fail", lambda: finished(api, name, "Failed"))
    settings = diagnose_config(emu.kubeconfig, tmp_path / "dispatch.yaml")
    args = ["diagnose", f"trainjob/{name}", "--cluster", "kf", "-o", "json"]
    result = CliRunner().invoke(cli, ["--config", str(settings), *args])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["state"], data["cause"]) == ("failed", "app_error"), data["summary"]
    first = data["firstFailure"]
    assert (first["rank"], first["exitCode"]) == (rank, exit_code), data["summary"]
    assert first["pod"].startswith(pod_prefix)
