"""Creating an attempt's two objects, adopting what exists, and cleaning up on refusal.

``create_attempt(session, plan, job, attempt, namespace)`` carries out an accepted plan
(spec/kubeflow-adapter.md, section 2):

1. create the runtime copy (a ``TrainingRuntime`` named like the TrainJob), labelled
   ``dispatch.dev/owner-pending``;
2. create the TrainJob running on it.

The third step, making the copy owned by the TrainJob so that deleting the TrainJob removes
the copy, is the caller's to send once ``create_attempt`` has returned (``api/owners.py``:
in the background, crash-safe through that label); ``Created.copy_owned`` says whether the
copy was owned already (an adopted attempt's).

An ``AlreadyExists`` on either object is resolved by reading it: it is adopted when its labels
name the same job and attempt, otherwise the attempt is refused (rule ``name-taken``), naming
the object. A permanent failure of step 2 (the API server rejects the TrainJob, the name is
taken, the credentials may not) removes a copy that no TrainJob owns yet, so nothing of the
attempt is left when ``Unsupported`` (or ``Forbidden``) is raised. A transient failure leaves
the copy: the effect is unknown, and the repeated ``start`` the caller owes adopts it.

``adopt_existing`` runs before planning: a TrainJob that already exists for the attempt is
adopted even if the job would be refused now (its runtime was edited since), because ``start``
never refuses an attempt that exists. ``discard_copy`` removes this attempt's unowned copy
when planning refuses the attempt, so a refusal leaves nothing behind.

Before Trainer 2.2 the TrainJob CRD has no ``runtimePatches``; an API server prunes unknown
fields silently, so a created TrainJob without them is deleted with its copy and refused
(rule ``trainer-version``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.api.client import TRAINING_RUNTIMES, TRAINJOBS, Resource, Session
from dispatch.adapters.kubeflow.api.errors import AlreadyExists, ApiRejected, Conflict
from dispatch.adapters.kubeflow.api.probe import TRAINER_TOO_OLD
from dispatch.adapters.kubeflow.api.secret import (
    SECRET_KIND,
    create_secret,
    discard_secret,
    own_secret,
)
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.adapters.kubeflow.planning.trainjob import (
    LABEL_ATTEMPT,
    LABEL_JOB,
    identity_labels,
)
from dispatch.model import Forbidden, Job, Plan, Reason, Unsupported

NAME_TAKEN = "name-taken"
API_REJECTED = "api-rejected"
#: TrainJob spec fields an older Trainer CRD would prune
_PRUNABLE = ("runtimePatches", "activeDeadlineSeconds")


@dataclass(frozen=True, slots=True)
class Created:
    """What ``create_attempt`` left on the cluster."""

    name: str
    uid: str
    adopted: bool
    copy_owned: bool
    #: the TrainJob as the API server answered its creation (or as read, when adopted)
    trainjob: Mapping[str, Any] = field(repr=False, compare=False)
    #: the runtime copy's uid as created or read ("" when unknown)
    copy_uid: str = ""


def attempt_labels(obj: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The dispatch job and attempt labels of ``obj``; None when either is missing."""
    labels = dig(obj, "metadata", "labels")
    if not isinstance(labels, Mapping):
        return None
    job, attempt = labels.get(LABEL_JOB), labels.get(LABEL_ATTEMPT)
    return (job, attempt) if isinstance(job, str) and isinstance(attempt, str) else None


def _owned_by_attempt(obj: Mapping[str, Any], job: Job, attempt: int) -> bool:
    wanted = identity_labels(job.id, attempt)
    return attempt_labels(obj) == (wanted[LABEL_JOB], wanted[LABEL_ATTEMPT])


async def _create_or_adopt(
    session: Session,
    res: Resource,
    body: Mapping[str, Any],
    job: Job,
    attempt: int,
    namespace: str,
    cluster: str,
) -> tuple[dict[str, Any], bool]:
    """The object, created, or adopted when it exists for this attempt; (object, adopted)."""
    name = str(body["metadata"]["name"])
    try:
        return await session.create(res, body, namespace), False
    except AlreadyExists:
        pass
    existing = await session.get(res, name, namespace)
    if existing is None:
        raise Conflict(f"{res.describe(name, namespace)} was deleted while being adopted")
    if _owned_by_attempt(existing, job, attempt):
        return existing, True
    labels = dig(existing, "metadata", "labels") or {}
    owner = ", ".join(f"{k}={labels[k]}" for k in (LABEL_JOB, LABEL_ATTEMPT) if k in labels)
    raise Unsupported(
        [
            Reason(
                NAME_TAKEN,
                f"{res.describe(name, namespace)} already exists and is not attempt {attempt} "
                f"of job {job.id} (its dispatch labels: {owner or 'none'}); delete it or "
                "submit the job again under a new id",
            )
        ],
        cluster=cluster,
    )


async def _remove_unowned_copy(session: Session, copy: Mapping[str, Any], namespace: str) -> None:
    """Delete the copy as read (its uid): a copy replaced under its name meanwhile is left."""
    if not dig(copy, "metadata", "ownerReferences"):
        name, uid = str(dig(copy, "metadata", "name")), text_of(dig(copy, "metadata", "uid"))
        with contextlib.suppress(Conflict):  # the name holds another owner's runtime now
            await session.delete(
                TRAINING_RUNTIMES, name, namespace, propagation="Background", uid=uid or None
            )


def _pruned(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    spec, kept = sent.get("spec") or {}, stored.get("spec") or {}
    return [field for field in _PRUNABLE if field in spec and field not in kept]


def _owned_by(copy: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether the runtime copy is owned by the TrainJob ``uid`` already."""
    owners = dig(copy, "metadata", "ownerReferences") if copy is not None else None
    return any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners or [])


async def adopt_existing(
    session: Session, name: str, job: Job, attempt: int, namespace: str
) -> Created | None:
    """The attempt's TrainJob when it already exists, else None. ``copy_uid`` is set when its
    copy exists for the attempt, ``copy_owned`` when that copy is owned by it already."""
    trainjob = await session.get(TRAINJOBS, name, namespace)
    if trainjob is None or not _owned_by_attempt(trainjob, job, attempt):
        return None
    uid = str(trainjob["metadata"]["uid"])
    copy = await session.get(TRAINING_RUNTIMES, name, namespace)
    if copy is not None and not _owned_by_attempt(copy, job, attempt):
        copy = None
    if job.spec.secret_env:
        await own_secret(session, name, uid, namespace)
    return Created(
        name=name,
        uid=uid,
        adopted=True,
        copy_owned=_owned_by(copy, uid),
        copy_uid=text_of(dig(copy, "metadata", "uid")) if copy is not None else "",
        trainjob=trainjob,
    )


async def discard_copy(session: Session, name: str, job: Job, attempt: int, namespace: str) -> None:
    """Remove this attempt's runtime copy if one exists that no TrainJob owns."""
    copy = await session.get(TRAINING_RUNTIMES, name, namespace)
    if copy is not None and _owned_by_attempt(copy, job, attempt):
        await _remove_unowned_copy(session, copy, namespace)
    if job.spec.secret_env:
        await discard_secret(session, name, job, attempt, namespace)


async def _discard_secret(
    session: Session, trainjob: Mapping[str, Any], job: Job, attempt: int, namespace: str
) -> None:
    if job.spec.secret_env:
        name = str(trainjob["metadata"]["name"])
        await discard_secret(session, name, job, attempt, namespace)


async def create_attempt(
    session: Session, plan: Plan, job: Job, attempt: int, namespace: str, *, cluster: str
) -> Created:
    """Create (or adopt) the accepted ``plan``'s runtime copy and TrainJob; see the module."""
    by_kind = {a.kind: a.content for a in plan.artifacts}
    copy_body, trainjob_body = by_kind["TrainingRuntime"], by_kind["TrainJob"]
    if not isinstance(copy_body, Mapping) or not isinstance(trainjob_body, Mapping):
        raise TypeError("a Kubeflow plan's artifacts are manifests")
    secret = by_kind.get(SECRET_KIND)
    if isinstance(secret, Mapping):  # first, so the pods find it (api/secret.py)
        await create_secret(session, secret, job, attempt, namespace, cluster)
    copy, copy_adopted = await _create_or_adopt(
        session, TRAINING_RUNTIMES, copy_body, job, attempt, namespace, cluster
    )
    try:
        trainjob, adopted = await _create_or_adopt(
            session, TRAINJOBS, trainjob_body, job, attempt, namespace, cluster
        )
    except ApiRejected as exc:
        await _remove_unowned_copy(session, copy, namespace)
        await _discard_secret(session, trainjob_body, job, attempt, namespace)
        raise Unsupported([Reason(API_REJECTED, str(exc))], cluster=cluster) from None
    except (Unsupported, Forbidden):
        await _remove_unowned_copy(session, copy, namespace)
        await _discard_secret(session, trainjob_body, job, attempt, namespace)
        raise
    name = str(trainjob["metadata"]["name"])
    uid = str(trainjob["metadata"]["uid"])
    pruned = [] if adopted else _pruned(trainjob_body, trainjob)
    if pruned:
        await session.delete(TRAINJOBS, name, namespace, propagation="Foreground", uid=uid)
        await _remove_unowned_copy(session, copy, namespace)
        await _discard_secret(session, trainjob_body, job, attempt, namespace)
        raise Unsupported(
            [
                Reason(
                    TRAINER_TOO_OLD,
                    f"the API server dropped spec.{' and spec.'.join(pruned)} from TrainJob "
                    f"{namespace}/{name}: the cluster's Trainer is older than 2.2; upgrade it",
                )
            ],
            cluster=cluster,
        )
    owned = copy_adopted and _owned_by(copy, uid)
    if job.spec.secret_env:
        await own_secret(session, name, uid, namespace)
    copy_uid = text_of(dig(copy, "metadata", "uid"))
    return Created(
        name=name, uid=uid, adopted=adopted, copy_owned=owned, copy_uid=copy_uid, trainjob=trainjob
    )
