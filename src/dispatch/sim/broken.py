"""Deliberately broken supervisors, to show the simulator catches them.

The ``Supervisor`` itself is not touched: each mode is a records store that lies to it in
one specific way, which is exactly what a supervisor with that bug would write.

* ``skip-intent``: intents are never written (a supervisor that calls the adapter without
  leaving a marker first; a crash mid-call leaves nothing to reconcile).
* ``start-before-claim``: the attempt number is only checked before ``start`` and claimed
  after it returned (a check-then-act race: an execution exists before its claim, and a
  crash or an unknown outcome in between leaves an execution nobody claimed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.model import AttemptHandle
from dispatch.records import Intent, IntentOperation, IntentStatus, Lease
from dispatch.sim.store import SimRecords

SKIP_INTENT = "skip-intent"
START_BEFORE_CLAIM = "start-before-claim"
BROKEN_MODES = (SKIP_INTENT, START_BEFORE_CLAIM)


class SkipIntentRecords(SimRecords):
    """Intents are acknowledged but never stored."""

    def open_intent(
        self,
        job_id: str,
        operation: IntentOperation,
        owner: str,
        *,
        attempt: int | None = None,
        data: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> Intent:
        return Intent(
            id=-1,
            job_id=job_id,
            attempt=attempt,
            operation=operation,
            owner=owner,
            created_at=self.clock.now(),
            status=IntentStatus.OPEN,
            data=dict(data or {}),
        )

    def close_intent(
        self,
        intent_id: int,
        *,
        status: IntentStatus = IntentStatus.DONE,
        result: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> None:
        if intent_id != -1:
            super().close_intent(intent_id, status=status, result=result, fence=fence)


class StartBeforeClaimRecords(SimRecords):
    """``create_attempt`` only checks; the claim is written when the handle is recorded."""

    def create_attempt(self, job_id: str, attempt: int, *, fence: Lease | None = None) -> bool:
        claimed = {a.attempt for a in self.attempts(job_id)}
        return attempt not in claimed and (attempt == 1 or attempt - 1 in claimed)

    def set_handle(
        self, job_id: str, attempt: int, handle: AttemptHandle, *, fence: Lease | None = None
    ) -> None:
        super().create_attempt(job_id, attempt, fence=fence)
        super().set_handle(job_id, attempt, handle, fence=fence)


def records_class(mode: str | None) -> type[SimRecords]:
    """The store class for a broken mode (None: the real one)."""
    if mode is None:
        return SimRecords
    classes = {SKIP_INTENT: SkipIntentRecords, START_BEFORE_CLAIM: StartBeforeClaimRecords}
    if mode not in classes:
        raise ValueError(f"unknown broken mode {mode!r}; known: {', '.join(BROKEN_MODES)}")
    return classes[mode]
