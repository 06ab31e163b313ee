"""The simulator's records store: the real records store (SQLite in memory, or a new database
on a PostgreSQL server), which also notes the jobs whose status was written, so that the
invariants re-read only those after a step."""

from __future__ import annotations

import secrets
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from dispatch.clock import Clock, CountingIds
from dispatch.model import Cause, State
from dispatch.records import Lease, Records, SqliteRecords


class SimStore(Records, Protocol):
    """A records store that says which jobs' status changed since it was last asked."""

    def take_touched(self) -> set[str]: ...


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
        fence: Lease | None = None,
    ) -> bool:
        changed = super().set_job_status(
            job_id, state, cause, summary, if_open=if_open, fence=fence
        )
        if changed:
            self.touched.add(job_id)
        return changed


def postgres_store(server_url: str, clock: Clock) -> SimStore:
    """A new, empty database on the PostgreSQL server at ``server_url`` (a URL of any database
    there, whose user may create databases), dropped again by the store's ``close``."""
    import psycopg

    from dispatch.records.postgres import PostgresRecords

    class PostgresSimRecords(PostgresRecords):
        def __init__(self, url: str, admin_url: str, name: str) -> None:
            super().__init__(url, clock=clock, ids=CountingIds(), pool_size=2)
            self.touched: set[str] = set()
            self._admin_url, self._name = admin_url, name

        def take_touched(self) -> set[str]:
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
            fence: Lease | None = None,
        ) -> bool:
            changed = super().set_job_status(
                job_id, state, cause, summary, if_open=if_open, fence=fence
            )
            if changed:
                self.touched.add(job_id)
            return changed

        def close(self) -> None:
            super().close()
            with psycopg.connect(self._admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self._name}"'.encode())

    name = f"dispatch_sim_{secrets.token_hex(6)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    return PostgresSimRecords(url, server_url, name)
