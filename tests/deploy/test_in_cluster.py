"""Inside a pod: the Kubeflow adapter authenticates with the service account's token (read again
as it rotates), trusts the service account's CA, and works in its namespace.

The pod is played by environment variables and files under tmp_path; the API server by the
emulator behind ``TlsProxy`` (in-cluster clients speak HTTPS only). The service account and its
Role, ClusterRole and bindings are deploy/'s, applied with kubectl, and the emulator authorizes
the token's requests by them.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("cryptography", reason="the test's CA is made with cryptography")

from kubernetes_asyncio.config import incluster_config

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow.adapter import KubeflowAdapter
from dispatch.adapters.kubeflow.api.credentials import (
    HOST_ENV,
    PORT_ENV,
    InCluster,
    default_namespace,
    locate,
)
from dispatch.adapters.kubeflow.api.permissions import VERB_CHECKS
from dispatch.adapters.kubeflow.api.probe import PERMISSION
from dispatch.config import ClusterConfig as DispatchCluster
from dispatch.model import Cause, ConfigError, DispatchError, State
from dispatch.testing.k8s import Emulator
from tests.deploy.conftest import (
    KUBECTL,
    NAME,
    NAMESPACE,
    OVERLAY,
    create_namespace,
    kubectl,
    needs_kubectl,
)
from tests.deploy.tls import LOOPBACK, TlsProxy, make_ca_and_server
from tests.kubeflow.adapter.conftest import RUNTIMES, example_spec, job_of, run

RBAC_KINDS = {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}


# --- where the credentials come from (no server) ----------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME without ~/.kube/config, so that the machine's own kubeconfig is never read."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


IN_POD = {HOST_ENV: "10.96.0.1", PORT_ENV: "443"}


def test_in_a_pod_without_a_kubeconfig_the_service_account_is_used(
    home: Path, tmp_path: Path
) -> None:
    found = locate(None, None, IN_POD, service_account=tmp_path / "sa")
    assert found == InCluster("10.96.0.1", "443", tmp_path / "sa")
    assert isinstance(found, InCluster) and found.server == "https://10.96.0.1:443"
    assert InCluster("fd00::1", "443").server == "https://[fd00::1]:443"


def test_a_kubeconfig_or_a_context_wins_over_the_service_account(
    home: Path, tmp_path: Path
) -> None:
    named = tmp_path / "named-kubeconfig"
    assert locate(str(named), None, IN_POD) == named  # configured, even when absent
    listed = tmp_path / "listed-kubeconfig"
    listed.write_text("{}")
    assert locate(None, None, {**IN_POD, "KUBECONFIG": str(listed)}) == listed
    default = home / ".kube" / "config"
    assert locate(None, "prod-admin", IN_POD) == default  # a context is a kubeconfig's
    default.parent.mkdir()
    default.write_text("{}")
    assert locate(None, None, IN_POD) == default  # as kubectl: an existing file first


def test_outside_a_pod_the_kubeconfig_is_used(home: Path) -> None:
    default = home / ".kube" / "config"
    assert locate(None, None, {}) == default
    assert locate(None, None, {HOST_ENV: "10.96.0.1", PORT_ENV: ""}) == default
    missing = home / "missing"
    assert locate(None, None, {**IN_POD, "KUBECONFIG": str(missing)}) == InCluster(
        "10.96.0.1", "443"
    )


def test_the_namespace_is_the_service_accounts(tmp_path: Path) -> None:
    pod = InCluster("10.96.0.1", "443", tmp_path)
    assert default_namespace(pod, None) is None
    (tmp_path / "namespace").write_text("ml-team\n")
    assert default_namespace(pod, None) == "ml-team"


def test_missing_service_account_files_are_a_config_error(tmp_path: Path) -> None:
    from kubernetes_asyncio import client

    pod = InCluster("10.96.0.1", "443", tmp_path)
    with pytest.raises(ConfigError, match="token file does not exist") as raised:
        pod.load(client.Configuration())
    assert str(tmp_path) in str(raised.value)
    (tmp_path / "token").write_text("abc")
    with pytest.raises(ConfigError, match="certification file does not exist"):
        pod.load(client.Configuration())


# --- against the emulator, over TLS --------------------------------------------------------------


class Pod:
    """The files and environment Kubernetes gives a pod of ServiceAccount ``NAME``."""

    def __init__(self, emulator: Emulator, folder: Path, ca: Path) -> None:
        self.emulator = emulator
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ca.crt").write_bytes(ca.read_bytes())
        (folder / "namespace").write_text(NAMESPACE)
        self.rotate(NAME)

    def rotate(self, account: str) -> str:
        """Write a new token of ServiceAccount ``account`` (as kubelet does, replacing the
        file whole)."""
        token = self.emulator.service_account_token(NAMESPACE, account)
        partial = self.folder / ".token.new"
        partial.write_text(token)
        partial.replace(self.folder / "token")
        return token


@pytest.fixture
def pod(
    emulator: Emulator, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pod]:
    """deploy/'s ServiceAccount and RBAC applied to the emulator; the pod's environment set to
    an HTTPS address in front of it; the service account files under tmp_path."""
    if not _apply_rbac(emulator, tmp_path):
        pytest.skip("kubectl is not installed here")
    ca, cert, key = make_ca_and_server(tmp_path / "tls")
    with TlsProxy(emulator.url, cert, key) as proxy:
        monkeypatch.delenv("KUBECONFIG", raising=False)
        monkeypatch.setenv(HOST_ENV, LOOPBACK)
        monkeypatch.setenv(PORT_ENV, str(proxy.port))
        yield Pod(emulator, tmp_path / "serviceaccount", ca)


def _apply_rbac(emulator: Emulator, home: Path) -> bool:
    if KUBECTL is None:
        return False
    create_namespace(emulator, home)
    rendered = kubectl(home, "kustomize", str(OVERLAY))
    assert rendered.returncode == 0, rendered.stderr
    objects = [o for o in yaml.safe_load_all(rendered.stdout) if o and o["kind"] in RBAC_KINDS]
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    done = kubectl(
        home, "apply", "--validate=false", "-f", "-", kubeconfig=emulator.kubeconfig, stdin=body
    )
    assert done.returncode == 0, done.stderr
    return True


def _adapter(pod: Pod, **settings: Any) -> KubeflowAdapter:
    return KubeflowAdapter(
        DispatchCluster(name="prod", adapter="kubeflow", settings=settings),
        AdapterContext(state_dir=pod.folder.parent / "state"),
        service_account=pod.folder,
    )


def _access(report: Any) -> dict[str, tuple[bool, str]]:
    return {a.name: (a.supported, a.reason) for a in report.answers if a.name.startswith("access:")}


@needs_kubectl
def test_the_adapter_in_a_pod_has_exactly_the_roles_permissions(pod: Pod) -> None:
    adapter = _adapter(pod)
    assert isinstance(adapter.connection.source, InCluster)
    assert adapter.namespace == NAMESPACE  # the service account's
    report = asyncio.run(adapter.capabilities())
    access = _access(report)
    asked = {c.name for c in VERB_CHECKS if not c.served_group or c.name in access}
    assert set(access) == asked
    for name, (allowed, reason) in access.items():
        assert allowed, f"{name}: {reason}"
        assert f'"{NAME}"' in reason and "RBAC: allowed by" in reason, reason
    assert not report.refusals


@needs_kubectl
def test_the_token_is_what_authorizes(pod: Pod, emulator: Emulator) -> None:
    """A token of a ServiceAccount that nothing is bound to is denied everything: the
    adapter's requests carry the token (the emulator's own user, without one, may do all)."""
    emulator.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}}, NAMESPACE
    )
    pod.rotate("nobody")
    report = asyncio.run(_adapter(pod).capabilities())
    access = _access(report)
    assert access and not any(allowed for allowed, _ in access.values())
    assert [r.rule for r in report.refusals] == [PERMISSION]


@needs_kubectl
def test_a_rotated_token_is_read_again(pod: Pod, monkeypatch: pytest.MonkeyPatch) -> None:
    # the loader reads the file again once its last read is TOKEN_REFRESH_PERIOD old (a
    # minute); made immediate here instead of waiting
    monkeypatch.setattr(incluster_config, "TOKEN_REFRESH_PERIOD", datetime.timedelta(0))
    pod.emulator.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}}, NAMESPACE
    )
    adapter = _adapter(pod)

    async def may_create() -> list[bool]:
        answers = []
        async with adapter.connection.session() as session:
            for account in (None, "nobody", NAME):
                if account is not None:
                    pod.rotate(account)
                allowed, _ = await session.can(
                    "create", "trainer.kubeflow.org", "trainjobs", NAMESPACE
                )
                answers.append(allowed)
            (pod.folder / "token").unlink()  # between two writes of kubelet's
            allowed, _ = await session.can("create", "trainer.kubeflow.org", "trainjobs", NAMESPACE)
            answers.append(allowed)  # the last token is kept
        return answers

    assert asyncio.run(may_create()) == [True, False, True, True]


@needs_kubectl
def test_the_api_server_is_checked_against_the_service_accounts_ca(
    pod: Pod, tmp_path: Path
) -> None:
    other_ca, _, _ = make_ca_and_server(tmp_path / "other")
    (pod.folder / "ca.crt").write_bytes(other_ca.read_bytes())
    adapter = _adapter(pod)

    async def groups() -> Any:
        async with adapter.connection.session() as session:
            return await session.api_groups()

    with pytest.raises(DispatchError, match=r"(?i)certificate"):
        asyncio.run(groups())


@needs_kubectl
def test_an_attempt_starts_and_is_cancelled_with_only_the_roles_permissions(
    pod: Pod, emulator: Emulator
) -> None:
    for path in sorted(RUNTIMES.glob("*.yaml")):
        emulator.create(yaml.safe_load(path.read_text()))
    adapter = _adapter(pod)
    job = job_of(example_spec("torch", cluster="prod"))
    handle = run(adapter.start(job, 1))
    assert [o["metadata"]["namespace"] for o in _trainjobs(emulator)] == [NAMESPACE]
    assert run(adapter.observe(handle)).state in (State.QUEUED, State.RUNNING)
    run(adapter.cancel(handle, "alice", "wrong data"))
    seen = run(adapter.observe(handle))
    assert (seen.state, seen.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "alice" in seen.outcome.summary
    assert _trainjobs(emulator) == []


def _trainjobs(emulator: Emulator) -> list[dict[str, Any]]:
    cluster = emulator.cluster
    rtype = cluster.rtype("trainer.kubeflow.org/v1alpha1", "TrainJob")
    return emulator.call(lambda: [dict(o) for o in cluster.store.objects(rtype)])
