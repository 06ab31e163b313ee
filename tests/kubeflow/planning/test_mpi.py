"""What no Trainer v2.3.0 test case pins about the MPI plugin (its tests compare env sorted by
name and hand the plugin its endpoints): where ``trainer.env`` lands beside the ``OMPI_MCA_*``
variables, and the hostfile of the example runtime, whose launcher is a node too."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from dispatch.adapters.kubeflow.planning.jobset import build
from dispatch.adapters.kubeflow.planning.plugins.mpi import has_placeholder_keys
from tests.conftest import EXAMPLES

RUNTIME = yaml.safe_load((EXAMPLES / "kubeflow" / "runtimes" / "mpi.yaml").read_text())


def _trainjob(**trainer: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "ds", "namespace": "ml", "uid": "u-1"},
        "spec": {"runtimeRef": {"name": "mpi-dispatch"}, "trainer": trainer},
    }


def _node_container(jobset: dict[str, Any], job: str) -> dict[str, Any]:
    rjob = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == job)
    containers = rjob["template"]["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = next(c for c in containers if c["name"] == "node")
    return found


def test_the_trainjob_env_comes_after_the_mpi_variables_and_reaches_the_sshd_nodes() -> None:
    built = build(_trainjob(numNodes=3, env=[{"name": "A", "value": "a"}]), RUNTIME)
    launcher = [e["name"] for e in _node_container(built.jobset, "launcher")["env"]]
    assert launcher == [
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
        "OMPI_MCA_plm_rsh_args",
        "A",
    ]
    assert _node_container(built.jobset, "node")["env"] == [{"name": "A", "value": "a"}]


def test_the_launcher_runs_ranks_after_the_nodes_and_the_secret_awaits_its_keys() -> None:
    built = build(_trainjob(numNodes=3, numProcPerNode=4), RUNTIME)
    counts = {
        r["name"]: r["template"]["spec"]["parallelism"]
        for r in built.jobset["spec"]["replicatedJobs"]
    }
    assert counts == {"node": 2, "launcher": 1}
    secret, hostfile = built.others[-2:]
    assert has_placeholder_keys(secret)
    assert b"placeholder" in base64.b64decode(secret["data"]["ssh-privatekey"])
    assert hostfile["data"]["hostfile"] == (
        "ds-node-0-0.ds slots=4\nds-node-0-1.ds slots=4\nds-launcher-0-0.ds slots=4\n"
    )
