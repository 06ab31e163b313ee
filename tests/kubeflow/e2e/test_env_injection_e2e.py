"""Torch ``envInjection`` (Trainer v2.3) on the emulator, made with the official client: the
pods Trainer's JobSet makes carry ``PET_MASTER_ADDR`` (and the other ``PET_*`` variables) in
the injected sidecar and init container, with the values the trainer container gets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402

from dispatch.testing.k8s import Emulator  # noqa: E402
from dispatch.testing.k8s.scenario import PodBehaviour, Scenario  # noqa: E402
from tests.emulator.scenario_helpers import cluster, wait_for  # noqa: E402

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
NS = "default"
RUNTIME = "torch-injected"
NAME = "inject"
PET = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


def runtime() -> dict[str, Any]:
    image = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
    pod = {
        "restartPolicy": "Never",
        "initContainers": [{"name": "wait-for-master", "image": "busybox"}],
        "containers": [
            {"name": "node", "image": image},
            {"name": "metrics", "image": "busybox"},
        ],
    }
    targets = [{"jobName": "node", "containerNames": ["wait-for-master", "metrics"]}]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"envInjection": {"targets": targets}}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"backoffLimit": 0, "template": {"spec": pod}},
                            },
                        }
                    ]
                }
            },
        },
    }


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with cluster(Scenario(default=PodBehaviour(run_for=None)), nodes=("node-1", "node-2")) as emu:
        yield emu


def env_of(container: Any) -> dict[str, str]:
    found = {}
    for item in container.env or []:
        if item.value is not None:
            found[item.name] = item.value
        elif item.value_from is not None and item.value_from.field_ref is not None:
            found[item.name] = f"fieldRef:{item.value_from.field_ref.field_path}"
    return found


def test_an_injected_container_sees_the_master_address(emu: Emulator) -> None:
    api = config.new_client_from_config(str(emu.kubeconfig))
    try:
        custom = client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime())
        trainjob = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": NAME},
            "spec": {
                "runtimeRef": {"name": RUNTIME},
                "trainer": {"numNodes": 2, "numProcPerNode": 4, "command": ["train"]},
            },
        }
        custom.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", trainjob)
        core = client.CoreV1Api(api)
        selector = f"jobset.sigs.k8s.io/jobset-name={NAME}"

        def pods() -> list[Any]:
            found = core.list_namespaced_pod(NS, label_selector=selector).items
            return found if len(found) == 2 else []

        made = wait_for("the two pods", pods)
        for pod in made:
            by_name = {c.name: c for c in (*pod.spec.containers, *pod.spec.init_containers)}
            trainer = env_of(by_name["node"])
            assert trainer["PET_MASTER_ADDR"] == f"{NAME}-node-0-0.{NAME}"
            assert trainer["PET_NNODES"] == "2" and trainer["PET_NPROC_PER_NODE"] == "4"
            for injected in ("wait-for-master", "metrics"):
                seen = env_of(by_name[injected])
                assert {k: seen[k] for k in PET} == {k: trainer[k] for k in PET}, injected
    finally:
        api.close()
