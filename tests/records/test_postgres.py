"""PostgreSQL only: migrations under concurrent opens, a server restart between calls, and
errors that name the database without its password."""

from __future__ import annotations

import threading

import psycopg
import pytest

from dispatch.clock import CountingIds
from dispatch.model import StateError, parse_spec
from dispatch.records import SchemaTooNew, open_records
from dispatch.records.migrations import POSTGRES_MIGRATIONS, SCHEMA_VERSION
from dispatch.records.postgres import PostgresRecords, shown_url
from dispatch.testing.postgres import PostgresServer

SPEC = parse_spec({"name": "train", "command": ["python", "train.py"]})


def test_both_stores_have_every_migration_step() -> None:
    assert len(POSTGRES_MIGRATIONS) == SCHEMA_VERSION


def test_concurrent_first_opens_migrate_once(postgres: PostgresServer) -> None:
    url = postgres.create_database()
    opened: list[PostgresRecords] = []
    failures: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresRecords(url))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert [store.schema_version for store in opened] == [SCHEMA_VERSION] * 4
    for store in opened:
        store.close()


def test_a_newer_schema_is_refused(postgres: PostgresServer) -> None:
    url = postgres.create_database()
    PostgresRecords(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE dispatch_schema SET version = version + 1")
    with pytest.raises(SchemaTooNew, match="Upgrade dispatch"):
        PostgresRecords(url)


def test_a_restarted_server_costs_a_reconnect_not_an_error(postgres: PostgresServer) -> None:
    store = open_records(postgres.create_database(), ids=CountingIds())
    job = store.create_job(SPEC)
    postgres.restart()  # every pooled connection is now dead
    assert store.get_job(job.id).job.id == job.id
    assert store.create_attempt(job.id, 1)
    store.close()


def test_an_unreachable_server_is_named_without_its_password(postgres: PostgresServer) -> None:
    url = f"postgresql://alice:s3cret@127.0.0.1:{postgres.port + 1}/records"
    with pytest.raises(StateError) as failure:
        PostgresRecords(url, connect_timeout=2)
    message = str(failure.value)
    assert "s3cret" not in message
    assert f"postgresql://alice:***@127.0.0.1:{postgres.port + 1}/records" in message
    assert "DISPATCH_RECORDS" in message


def test_shown_url_masks_only_the_password() -> None:
    assert shown_url("postgresql://u:p@h:5/db?sslmode=require") == (
        "postgresql://u:***@h:5/db?sslmode=require"
    )
    assert shown_url("postgresql://u@h/db") == "postgresql://u@h/db"
