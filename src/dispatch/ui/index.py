"""Every job's row, kept in memory by the UI server so that a page never scans the store.

``load`` reads the store once at start (every job, and each job's attempts); afterwards only
the jobs the change feed names are read again (``refresh``). A page asks the index, not the
store: the jobs page of 5,000 jobs is a sort and a filter in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from dispatch.model import NotFound, StateError
from dispatch.records import Records
from dispatch.ui.rows import Filters, JobRow


class JobIndex:
    """Job rows by id, with the change feed's number of each row's last read."""

    def __init__(self) -> None:
        self.rows: dict[str, JobRow] = {}
        #: the newest log entry the index has read up to (``Records.logged_after``)
        self.seq = 0

    def load(self, records: Records) -> None:
        """Read every job and its attempts. The feed's position is taken first, so a change
        written while loading is read again on the feed's first tick."""
        _, self.seq = records.logged_after(0)
        self.rows = {
            r.id: JobRow.of(r, records.attempts(r.id), self.seq) for r in records.list_jobs()
        }

    def refresh(self, records: Records, job_ids: Iterable[str], seq: int) -> list[JobRow]:
        """Read ``job_ids`` again; returns the rows whose shown values changed (or are new)."""
        changed = []
        for job_id in job_ids:
            try:
                row = JobRow.of(records.get_job(job_id), records.attempts(job_id), seq)
            except (NotFound, StateError):  # deleted, or a record this version cannot read
                continue
            before = self.rows.get(job_id)
            if before is None or before.shown() != row.shown() or before.attempts != row.attempts:
                self.rows[job_id] = row
                changed.append(row)
        return changed

    def add_new(self, records: Records, newest: int = 100) -> list[JobRow]:
        """The ``newest`` jobs the index does not know yet (a job accepted without a log entry
        shows up here before its supervisor writes one)."""
        unknown = [r for r in records.list_jobs(limit=newest) if r.id not in self.rows]
        added = [JobRow.of(r, records.attempts(r.id), self.seq) for r in unknown]
        self.rows.update((row.id, row) for row in added)
        return added

    def newest_first(self) -> list[JobRow]:
        return sorted(self.rows.values(), key=lambda r: (r.created_at, r.id), reverse=True)

    def listing(self, filters: Filters) -> tuple[list[JobRow], int]:
        """The first ``filters.limit`` matching rows, newest first, and how many match."""
        matching = [r for r in self.newest_first() if filters.matches(r)]
        return matching[: filters.limit], len(matching)

    def changed_after(self, seq: int) -> list[JobRow]:
        """Rows read after ``seq`` (what a page that reconnects has missed)."""
        return [r for r in self.rows.values() if r.seq > seq]

    def counts(self) -> dict[str, int]:
        """Jobs by state."""
        return dict(Counter(r.state.value for r in self.rows.values()))

    def clusters(self) -> list[str]:
        return sorted({r.cluster for r in self.rows.values()})
