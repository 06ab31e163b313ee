"""What one Kubeflow cluster offers, probed once: APIs, Trainer version, namespace, access.

``probe(session, namespace)`` asks the cluster (discovery, one ConfigMap or the TrainJob CRD,
the namespace, one SelfSubjectAccessReview per verb the adapter uses, as listed once in
``api/permissions.py``) and returns ``ClusterFacts``. ``answers(facts)`` and
``refusals(facts, queue)`` are pure: each capability is answered yes/no with the reason, and
the facts that make every job fail are refusals.

The Trainer version is read, in order, from the ConfigMap Trainer publishes for its SDK
(``kubeflow-system/kubeflow-trainer-public``, key ``kubeflow_trainer_version``), else from the
TrainJob CRD's schema (``runtimePatches`` exists from 2.2, ``podTemplateOverrides`` in 2.1,
``podSpecOverrides`` in 2.0). When neither can be read the version is unknown and assumed
new enough; ``start`` then checks that the API server kept ``spec.runtimePatches`` (an older
CRD prunes it silently) and refuses otherwise.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dispatch.adapters.kubeflow.api.client import TRAINER_GROUP, TRAINER_VERSION, Session
from dispatch.adapters.kubeflow.api.permissions import (
    JOBSET_GROUP,
    KUEUE_GROUP,
    VERB_CHECKS,
    VerbCheck,
)
from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.trainjob import MIN_TRAINER_VERSION
from dispatch.model import Capability, Forbidden, Reason, TransientError

TRAINER_NAMESPACE = "kubeflow-system"
VERSION_CONFIGMAP = "kubeflow-trainer-public"
VERSION_KEY = "kubeflow_trainer_version"
TRAINJOB_CRD = f"trainjobs.{TRAINER_GROUP}"

#: pauses (real seconds) before a probe request that failed transiently is tried again
RETRY_PAUSES = (0.1, 0.3)

T = TypeVar("T")

#: cluster-level refusal rule ids (beside the runtime rules and job checks)
TRAINER_API = "trainer-api"
TRAINER_TOO_OLD = "trainer-version"
NAMESPACE = "namespace"
PERMISSION = "permission"
KUEUE_MISSING = "kueue-missing"

#: the TrainJob spec fields that tell Trainer API generations apart, newest first
_CRD_MARKERS = (
    ("runtimePatches", (2, 2, 0)),
    ("podTemplateOverrides", (2, 1, 0)),
    ("podSpecOverrides", (2, 0, 0)),
)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class Access:
    check: VerbCheck
    allowed: bool
    reason: str


@dataclass(frozen=True, slots=True)
class TrainerVersion:
    """The installed Trainer's version (``at_least``: only a lower bound is known)."""

    version: tuple[int, int, int] | None
    source: str
    at_least: bool = False

    @property
    def text(self) -> str:
        if self.version is None:
            return "unknown"
        shown = ".".join(str(p) for p in self.version)
        return f">= {shown}" if self.at_least else shown

    @property
    def too_old(self) -> bool:
        return self.version is not None and self.version[:2] < MIN_TRAINER_VERSION


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    namespace: str
    #: resources served at trainer.kubeflow.org/v1alpha1 (empty: Trainer is not installed)
    trainer_resources: frozenset[str]
    trainer: TrainerVersion
    jobset_versions: tuple[str, ...]
    kueue_versions: tuple[str, ...]
    #: True: exists; False: does not; None: could not be checked (reason says why)
    namespace_exists: bool | None
    namespace_reason: str
    access: tuple[Access, ...]

    @property
    def trainer_installed(self) -> bool:
        return "trainjobs" in self.trainer_resources


def parse_version(text: Any) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of ``v2.2.1``, ``2.3.0-rc.1``, ``v2.2``; None otherwise."""
    match = _VERSION.match(str(text).strip()) if text is not None else None
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def version_from_crd(crd: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """The oldest Trainer whose TrainJob schema has the fields this CRD's v1alpha1 has."""
    versions = dig(crd, "spec", "versions")
    for entry in versions if isinstance(versions, list) else []:
        if not isinstance(entry, Mapping) or entry.get("name") != TRAINER_VERSION:
            continue
        fields = dig(entry, "schema", "openAPIV3Schema", "properties", "spec", "properties")
        if isinstance(fields, Mapping):
            for marker, version in _CRD_MARKERS:
                if marker in fields:
                    return version
    return None


async def _trainer_version(session: Session) -> TrainerVersion:
    where = f"ConfigMap {TRAINER_NAMESPACE}/{VERSION_CONFIGMAP}"
    try:
        published = await session.read_core("ConfigMap", VERSION_CONFIGMAP, TRAINER_NAMESPACE)
    except Forbidden:
        published, where = None, f"{where} (not readable with these credentials)"
    version = parse_version(dig(published, "data", VERSION_KEY)) if published else None
    if version is not None:
        return TrainerVersion(version, f"{where}, key {VERSION_KEY}")
    crd = await session.read_crd(TRAINJOB_CRD)
    from_schema = version_from_crd(crd) if crd else None
    if from_schema is not None:
        return TrainerVersion(from_schema, f"the schema of CRD {TRAINJOB_CRD}", at_least=True)
    missing = "has no readable version" if published else "is absent"
    return TrainerVersion(None, f"{where} {missing} and CRD {TRAINJOB_CRD} is not readable")


async def _namespace(session: Session, namespace: str) -> tuple[bool | None, str]:
    try:
        found = await session.read_core("Namespace", namespace)
    except Forbidden:
        return None, f"namespace {namespace!r} could not be checked (no permission to read it)"
    if found is None:
        return False, f"namespace {namespace!r} does not exist"
    phase = dig(found, "status", "phase")
    if phase == "Terminating":
        return False, f"namespace {namespace!r} is being deleted"
    return True, f"namespace {namespace!r} exists"


async def _tried(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, tried again after ``RETRY_PAUSES`` when it fails transiently: every probe
    request is a read or an access review, which change nothing, and one of about 30 failing
    must not fail the start that asked (at 5 % failed requests, 4 probes in 5 would)."""
    for pause in RETRY_PAUSES:
        try:
            return await call()
        except TransientError as exc:
            if exc.delay is not None and exc.delay > pause:
                raise  # throttled for longer: the caller's retry waits as asked
            await asyncio.sleep(pause)
    return await call()


async def probe(session: Session, namespace: str) -> ClusterFacts:
    """Ask the cluster everything ``answers`` and ``refusals`` need (about 30 requests, each
    tried again when it fails transiently)."""
    groups = await _tried(session.api_groups)
    trainer: frozenset[str] = frozenset()
    if TRAINER_VERSION in groups.get(TRAINER_GROUP, []):
        listed = await _tried(lambda: session.api_resources(TRAINER_GROUP, TRAINER_VERSION))
        trainer = frozenset(listed)
    if trainer:
        version = await _tried(lambda: _trainer_version(session))
    else:
        version = TrainerVersion(None, "")
    exists, why = await _tried(lambda: _namespace(session, namespace))
    kueue = tuple(groups.get(KUEUE_GROUP, []))
    checks = [c for c in VERB_CHECKS if not c.served_group or groups.get(c.served_group)]

    def review(c: VerbCheck) -> Callable[[], Awaitable[tuple[bool, str]]]:
        scope = None if c.cluster_scoped else namespace
        return lambda: session.can(c.verb, c.group, c.resource, scope, c.subresource)

    answers = await asyncio.gather(*(_tried(review(c)) for c in checks))
    return ClusterFacts(
        namespace=namespace,
        trainer_resources=trainer,
        trainer=version,
        jobset_versions=tuple(groups.get(JOBSET_GROUP, [])),
        kueue_versions=kueue,
        namespace_exists=exists,
        namespace_reason=why,
        access=tuple(
            Access(c, ok, reason) for c, (ok, reason) in zip(checks, answers, strict=True)
        ),
    )


def _minimum() -> str:
    return ".".join(str(p) for p in MIN_TRAINER_VERSION)


def answers(facts: ClusterFacts) -> tuple[Capability, ...]:
    """Every capability answer of the cluster, each with its reason."""
    trainer = facts.trainer
    if not facts.trainer_installed:
        version = Capability("TrainerVersion", False, "Kubeflow Trainer is not installed")
    elif trainer.too_old:
        version = Capability(
            "TrainerVersion",
            False,
            f"Kubeflow Trainer {trainer.text} (from {trainer.source}) is older than "
            f"{_minimum()}: it has no runtimePatches or activeDeadlineSeconds",
        )
    elif trainer.version is None:
        version = Capability(
            "TrainerVersion",
            True,
            f"unknown: {trainer.source}; assumed >= {_minimum()} (start checks that the API "
            "server kept spec.runtimePatches)",
        )
    else:
        version = Capability(
            "TrainerVersion", True, f"Kubeflow Trainer {trainer.text} (from {trainer.source})"
        )
    found = (
        Capability(
            "TrainerAPI",
            facts.trainer_installed,
            f"{TRAINER_GROUP}/{TRAINER_VERSION} serves {', '.join(sorted(facts.trainer_resources))}"
            if facts.trainer_installed
            else f"the cluster serves no TrainJob API ({TRAINER_GROUP}/{TRAINER_VERSION})",
        ),
        version,
        Capability(
            "JobSet",
            bool(facts.jobset_versions),
            f"{JOBSET_GROUP} {', '.join(facts.jobset_versions)} is served"
            if facts.jobset_versions
            else f"the cluster serves no {JOBSET_GROUP} API: Trainer cannot run TrainJobs",
        ),
        Capability(
            "Kueue",
            bool(facts.kueue_versions),
            f"{KUEUE_GROUP} {', '.join(facts.kueue_versions)} is served: queue names a LocalQueue"
            if facts.kueue_versions
            else f"the cluster serves no {KUEUE_GROUP} API: jobs cannot name a queue",
        ),
        Capability("Namespace", facts.namespace_exists is not False, facts.namespace_reason),
    )
    access = tuple(
        Capability(
            a.check.name,
            a.allowed,
            ("allowed" if a.allowed else "denied") + (f": {a.reason}" if a.reason else ""),
        )
        for a in facts.access
    )
    return found + access


def refusals(facts: ClusterFacts, queue: str | None) -> tuple[Reason, ...]:
    """What makes every job (or every job with ``queue``) fail on this cluster."""
    found: list[Reason] = []
    if not facts.trainer_installed:
        found.append(
            Reason(
                TRAINER_API,
                f"the cluster serves no TrainJob API ({TRAINER_GROUP}/{TRAINER_VERSION}): "
                "install Kubeflow Trainer v2 or pick another cluster",
            )
        )
    elif facts.trainer.too_old:
        found.append(
            Reason(
                TRAINER_TOO_OLD,
                f"Kubeflow Trainer {facts.trainer.text} (from {facts.trainer.source}) is older "
                f"than {_minimum()}: dispatch's TrainJobs use runtimePatches and "
                "activeDeadlineSeconds, which its API drops; upgrade Trainer",
            )
        )
    if facts.namespace_exists is False:
        found.append(Reason(NAMESPACE, facts.namespace_reason))
    denied = [
        a.check.name.removeprefix("access:")
        for a in facts.access
        if a.check.for_start and not a.allowed
    ]
    if denied:
        found.append(
            Reason(
                PERMISSION,
                f"the credentials may not {', '.join(denied)} in namespace {facts.namespace!r}, "
                "which starting a job needs",
            )
        )
    if queue and not facts.kueue_versions:
        found.append(
            Reason(
                KUEUE_MISSING,
                f"the job names queue {queue!r}, but the cluster serves no {KUEUE_GROUP} API "
                "(Kueue is not installed); remove `queue` or pick another cluster",
            )
        )
    return tuple(found)
