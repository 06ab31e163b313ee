"""The simulator's records store: the real ``SqliteRecords`` in memory, which also notes the
jobs whose status was written, so that the invariants re-read only those after a step."""

from __future__ import annotations

from dispatch.clock import Clock, CountingIds
from dispatch.model import Cause, State
from dispatch.records import SqliteRecords


class SimRecords(SqliteRecords):
    """``SqliteRecords(":memory:")`` plus the ids of jobs whose status changed (``touched``)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(":memory:", clock=clock, ids=CountingIds())
        self.touched: set[str] = set()

    def take_touched(self) -> set[str]:
        """The jobs whose status changed since the last call."""
        touched, self.touched = self.touched, set()
        return touched

    def set_job_status(
        self,
        job_id: str,
        state: State,
        cause: Cause | None = None,
        summary: str = "",
        *,
        if_open: bool = False,
    ) -> bool:
        changed = super().set_job_status(job_id, state, cause, summary, if_open=if_open)
        if changed:
            self.touched.add(job_id)
        return changed
