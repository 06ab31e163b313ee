"""Cancel, release and hold from the UI, each recorded in the job's history with its actor.

Each goes through the Python API where it has the operation (``AsyncClient.cancel``,
``release``), exactly as ``dispatch cancel`` and ``dispatch release`` do. The actor is the
user who started the UI (``--actor``, default the login name), as for the CLI. A cancel's
actor is recorded by the store itself (``Records.request_cancel``); a release records no
actor there, so the UI adds a ``ui-action`` entry to the job's history naming the action and
the actor (the supervisor's fold ignores kinds it does not know).

Hold: dispatch holds a job only before its first attempt (a hold requested at submission,
``LogKind.HOLD_REQUESTED`` with ``attempt: 0``) or through its recovery policy between
attempts. The UI's hold is the first: a pending job with no attempt yet is held (its
supervisor records it ``held``); any other job is refused with why. If a supervisor claimed
attempt 1 while the hold was written, the hold does not apply and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dispatch.api import AsyncClient
from dispatch.model import PermanentError, State
from dispatch.records import LogKind

#: the history entry kind the UI adds for an action the store records no actor for
UI_ACTION = "ui-action"


class Action(StrEnum):
    CANCEL = "cancel"
    RELEASE = "release"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class Done:
    """The answer to an action: whether it was carried out, and a sentence for the page."""

    ok: bool
    message: str


async def perform(api: AsyncClient, action: Action, job: str, actor: str, where: str) -> Done:
    """Carry out ``action`` on ``job`` for ``actor``; ``where`` names the UI in reasons.
    Raises ``NotFound`` for an unknown job."""
    job_id = api.resolve(job)
    before = await api.get(job_id)
    if action is Action.CANCEL:
        if before.is_terminal:
            return Done(
                False, f"job {job_id} already ended ({before.state.value}): nothing to cancel"
            )
        await api.cancel(job_id, actor=actor, reason=f"cancelled from the web UI ({where})")
        return Done(True, f"cancel requested by {actor}: the supervisor stops {job_id}")
    if action is Action.RELEASE:
        try:
            await api.release(job_id)
        except PermanentError as exc:
            return Done(False, str(exc))
        api.records.append_log(job_id, UI_ACTION, {"action": "release", "actor": actor})
        return Done(True, f"released by {actor}: a supervisor starts the next attempt")
    return _hold(api, job_id, before.state, actor)


def _hold(api: AsyncClient, job_id: str, state: State, actor: str) -> Done:
    records = api.records
    if state is State.HELD:
        return Done(False, f"job {job_id} is already held")
    if state is not State.PENDING or records.attempts(job_id):
        return Done(
            False,
            f"job {job_id} is {state.value}: only a job that has not started its first attempt "
            "can be held (cancel it to stop it)",
        )
    records.append_log(job_id, LogKind.HOLD_REQUESTED, {"attempt": 0, "actor": actor})
    if records.attempts(job_id):
        return Done(False, f"too late: attempt 1 of {job_id} started while the hold was written")
    return Done(True, f"held by {actor}: no attempt starts until it is released")
