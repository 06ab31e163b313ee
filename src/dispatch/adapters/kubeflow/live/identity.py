"""The uid fence: dispatch acts on, and judges, only the TrainJob it created (no I/O).

A name is not an identity: once dispatch's TrainJob is deleted, anybody may create another
TrainJob under the same name. ``start`` records the uid of the TrainJob it created (or adopted)
in the attempt's handle (``data["uid"]``), and from then on:

* every read is checked against it: a TrainJob under the name with another uid is not the
  attempt's, and its state is never the attempt's outcome (``replaced_by``);
* every write carries it, so the API server itself refuses another object: deletes send
  ``preconditions.uid`` (409 Conflict), merge patches ``metadata.uid`` (422, uid is immutable);
* the attempt then ends ``unknown`` with a ``guard`` record naming both uids
  (``replaced_evidence``/``replaced_outcome``), and nothing of the other owner is touched:
  no annotation, no deletion, no retirement of it or of its JobSet; nor is it recorded as
  the attempt's evidence (``made_before``).

Handles recorded before uids were (no ``uid`` in their data) keep acting by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.model import AttemptHandle, Cause, Evidence, Outcome, State

#: ``Evidence.data["guard"]`` of the record saying the name holds another object
REPLACED = "replaced"


def recorded_uid(handle: AttemptHandle) -> str | None:
    """The uid of the TrainJob ``start`` created for this attempt, or None for a handle
    recorded before uids were."""
    uid = handle.data.get("uid")
    return str(uid) if uid else None


def replaced_by(obj: Mapping[str, Any] | None, uid: str | None) -> str | None:
    """The uid of ``obj`` when it is not the object ``uid`` names (None: it is, or no uid was
    recorded, or there is no object)."""
    if obj is None or not uid:
        return None
    found = text_of(dig(obj, "metadata", "uid"))
    return found if found and found != uid else None


def replaced_evidence(namespace: str, name: str, uid: str, found: str, at: float) -> Evidence:
    """The record proving that TrainJob ``namespace/name`` is no longer dispatch's."""
    return Evidence(
        kind="guard",
        key=f"guard/{name}/{REPLACED}/{found}",
        observed_at=at,
        summary=(
            f"TrainJob {namespace}/{name} is not the one dispatch created (uid {uid}): the name "
            f"now holds another TrainJob (uid {found}); dispatch leaves it alone"
        ),
        data={
            "guard": REPLACED,
            "trainJob": name,
            "namespace": namespace,
            "uid": uid,
            "found": found,
            "cause": Cause.UNKNOWN.value,
        },
    )


def replaced_outcome(evidence: Evidence) -> Outcome:
    """The attempt's end once its TrainJob was replaced: ``unknown``, with the proof."""
    return Outcome(State.FAILED, Cause.UNKNOWN, summary=evidence.summary, evidence=(evidence,))


def is_replaced(outcome: Outcome) -> bool:
    return any(e.kind == "guard" and e.data.get("guard") == REPLACED for e in outcome.evidence)


def made_before(records: Iterable[Evidence], other: Mapping[str, Any] | None) -> list[Evidence]:
    """The records of objects created before the TrainJob ``other`` that replaced the
    attempt's: the other owner's TrainJob, JobSet, pods and Events come later, and are not
    the attempt's evidence. Records of no object (guards) are kept."""
    since = text_of(dig(other, "metadata", "creationTimestamp"))
    kept = []
    for record in records:
        created = text_of(dig(record.data, "metadata", "creationTimestamp"))
        if not since or not created or created < since:
            kept.append(record)
    return kept
