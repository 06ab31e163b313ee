"""The Secret that carries an attempt's ``secretEnv`` to its pods.

Its values exist only in ``start``'s memory and on the API server: the plan holds the
Secret with every value hidden (``with_secret_values`` fills them in just before creating),
the TrainJob refers to it by ``secretKeyRef``. Created before the TrainJob (so its pods find
it), then owned by the TrainJob, so deleting the TrainJob deletes it. A Secret of that name
left by another owner refuses the attempt (``name-taken``); a refused or failed TrainJob
removes the Secret that nothing owns yet. Dispatch needs ``create``, ``get``, ``patch`` and
``delete`` on Secrets in its namespace for jobs that use ``secretEnv``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.api.client import Session
from dispatch.adapters.kubeflow.api.errors import AlreadyExists, ApiRejected, Conflict
from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.trainjob import (
    API_VERSION,
    identity_labels,
    secret_name,
)
from dispatch.model import Artifact, Forbidden, Job, Plan, Reason, Unsupported

SECRET_KIND = "Secret"


def with_secret_values(plan: Plan, values: Mapping[str, str]) -> Plan:
    """``plan`` whose Secret carries ``values`` (for ``start`` only: never shown or kept)."""
    artifacts = []
    for artifact in plan.artifacts:
        if artifact.kind == SECRET_KIND and isinstance(artifact.content, Mapping):
            body = {**artifact.content, "stringData": dict(values)}
            artifact = Artifact(artifact.kind, artifact.name, body)
        artifacts.append(artifact)
    return replace(plan, artifacts=tuple(artifacts))


def _of_attempt(obj: Mapping[str, Any], job: Job, attempt: int) -> bool:
    labels = dig(obj, "metadata", "labels")
    wanted = identity_labels(job.id, attempt)
    return isinstance(labels, Mapping) and all(labels.get(k) == v for k, v in wanted.items())


async def create_secret(
    session: Session, body: Mapping[str, Any], job: Job, attempt: int, namespace: str, cluster: str
) -> None:
    """Create the attempt's Secret, or adopt the one a previous ``start`` created."""
    name = str(body["metadata"]["name"])
    try:
        await session.create_secret(body, namespace)
        return
    except AlreadyExists:
        pass
    existing = await session.read_secret_metadata(name, namespace)
    if existing is None:
        raise Conflict(f"Secret {namespace}/{name} was deleted while being adopted")
    if not _of_attempt(existing, job, attempt):
        raise Unsupported(
            [
                Reason(
                    "name-taken",
                    f"Secret {namespace}/{name} already exists and is not attempt {attempt} of "
                    f"job {job.id}; delete it or submit the job again under a new id",
                )
            ],
            cluster=cluster,
        )


async def own_secret(session: Session, trainjob: str, uid: str, namespace: str) -> None:
    """Make the attempt's Secret (if any) owned by its TrainJob; best effort, as the copy."""
    name = secret_name(trainjob)
    existing = await session.read_secret_metadata(name, namespace)
    if existing is None:
        return
    owners = dig(existing, "metadata", "ownerReferences") or []
    if any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners):
        return
    owner = {"apiVersion": API_VERSION, "kind": "TrainJob", "name": trainjob, "uid": uid}
    try:
        await session.patch_secret_metadata(name, {"ownerReferences": [owner]}, namespace)
    except (ApiRejected, Forbidden):
        return  # the TrainJob runs; only the clean-up of the Secret is lost


async def discard_secret(
    session: Session, trainjob: str, job: Job, attempt: int, namespace: str
) -> None:
    """Remove the attempt's Secret when no TrainJob owns it (a refused or failed start)."""
    name = secret_name(trainjob)
    existing = await session.read_secret_metadata(name, namespace)
    if (
        existing is not None
        and _of_attempt(existing, job, attempt)
        and not dig(existing, "metadata", "ownerReferences")
    ):
        await session.delete_secret(name, namespace)
