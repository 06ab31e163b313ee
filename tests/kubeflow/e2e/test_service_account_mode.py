"""The e2e suite's service-account mode (``DISPATCH_E2E_SERVICE_ACCOUNT``): the kubeconfig it
hands dispatch authenticates as deploy/'s supervisor account, which the emulator's RBAC limits
to the generated Role and ClusterRole; with it set, every e2e test runs as the in-cluster
supervisors would."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.kubeflow.e2e.harness import NAMESPACE, as_supervisor_account

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402


def test_the_supervisor_account_may_do_what_dispatch_does_and_nothing_else(
    tmp_path: Path,
) -> None:
    settings = ClusterConfig(namespaces=("default", NAMESPACE))
    with Emulator(settings, kubeconfig=tmp_path / "admin") as emulator:
        kubeconfig = as_supervisor_account(emulator, tmp_path / "supervisor")
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        custom = client.CustomObjectsApi(api)
        assert (
            custom.list_namespaced_custom_object(
                "trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs"
            )["items"]
            == []
        )
        assert core.list_namespaced_pod(NAMESPACE).items == []
        with pytest.raises(ApiException) as elsewhere:
            core.list_namespaced_pod("default")
        assert elsewhere.value.status == 403
        with pytest.raises(ApiException) as nodes:
            core.delete_node("node-1")
        assert nodes.value.status == 403
        api.close()
