"""The cluster-side guard installed on an emulator as a cluster operator installs it: the
objects ``dispatch admission manifests`` prints (ServiceAccount, RBAC, the
ValidatingWebhookConfiguration with the caBundle of ``dispatch admission certs``) and
``dispatch admission serve`` as a process on loopback, its Service routed there; or the
ValidatingAdmissionPolicy objects ``manifests --policy`` prints."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow.admission.certs import issue, service_names
from dispatch.adapters.kubeflow.admission.manifests import ManifestOptions, webhook_objects
from dispatch.adapters.kubeflow.admission.policy import policy_objects
from dispatch.testing.k8s import Emulator

ROOT = Path(__file__).resolve().parents[2]
#: where the guard is installed
GUARD_NAMESPACE = "dispatch"


def options(identities: tuple[str, ...], **more: Any) -> ManifestOptions:
    return ManifestOptions(namespace=GUARD_NAMESPACE, identities=identities, **more)


@dataclass
class Webhook:
    """A running ``dispatch admission serve`` and what installed it."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    configuration: dict[str, Any]

    def decisions(self) -> list[dict[str, Any]]:
        """The structured log's decision lines."""
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [line for line in lines if "allowed" in line]


def _port(log: Path) -> int | None:
    for line in log.read_text().splitlines():
        found = json.loads(line)
        if found.get("event") == "start":
            return int(found["port"])
    return None


@contextmanager
def webhook(
    emulator: Emulator, tmp: Path, identities: tuple[str, ...], **more: Any
) -> Iterator[Webhook]:
    """The guard as a webhook (``more``: other ``ManifestOptions``, e.g. failure_policy)."""
    pair = issue(service_names(options(identities).name, GUARD_NAMESPACE), tmp / "tls")
    chosen = options(identities, ca_bundle=pair.ca_bundle, **more)
    namespaces = emulator.cluster.rtype("v1", "Namespace")
    if (
        emulator.call(lambda: emulator.cluster.store.peek(namespaces, None, GUARD_NAMESPACE))
        is None
    ):
        emulator.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GUARD_NAMESPACE}}
        )
    objects = webhook_objects(chosen)
    for obj in objects:
        if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            emulator.create(obj)
    kubeconfig = emulator.service_account_kubeconfig(
        tmp / "guard-kubeconfig", GUARD_NAMESPACE, chosen.name
    )
    log = tmp / "guard.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "dispatch", "admission", "serve",
             "--cert-file", str(pair.cert), "--key-file", str(pair.key),
             "--address", "127.0.0.1", "--port", "0", "--kubeconfig", str(kubeconfig),
             *(a for i in identities for a in ("--identity", i))],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        port = _port(log)
        while port is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            port = _port(log)
        assert port is not None, f"dispatch admission serve did not start: {log.read_text()}"
        emulator.route_service(GUARD_NAMESPACE, chosen.name, 443, ("127.0.0.1", port))
        [configuration] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
        emulator.create(configuration)
        yield Webhook(process, port, log, configuration)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


def policy(emulator: Emulator, identities: tuple[str, ...]) -> list[dict[str, Any]]:
    """The guard as ValidatingAdmissionPolicies (no server)."""
    objects = policy_objects(options(identities))
    for obj in objects:
        emulator.create(obj)
    return objects
