"""Schema migrations, applied in order on open. Never edit a released step; append a new one.

The schema version is SQLite's ``user_version``: the number of steps applied.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: the initial schema
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        cluster TEXT NOT NULL,
        spec TEXT NOT NULL,
        created_at REAL NOT NULL,
        state TEXT NOT NULL,
        cause TEXT,
        summary TEXT NOT NULL DEFAULT '',
        updated_at REAL NOT NULL,
        cancel_actor TEXT,
        cancel_reason TEXT,
        cancel_at REAL,
        release_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX jobs_by_state ON jobs (state);
    CREATE INDEX jobs_by_created ON jobs (created_at);

    CREATE TABLE attempts (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER NOT NULL,
        created_at REAL NOT NULL,
        handle TEXT,
        outcome TEXT,
        state TEXT NOT NULL DEFAULT 'pending',
        ended_at REAL,
        PRIMARY KEY (job_id, attempt)
    );

    CREATE TABLE evidence (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        observed_at REAL NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL,
        UNIQUE (job_id, attempt, key)
    );

    CREATE TABLE log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX log_by_job ON log (job_id, seq);

    CREATE TABLE intents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER,
        operation TEXT NOT NULL,
        owner TEXT NOT NULL,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL,
        result TEXT,
        closed_at REAL
    );
    CREATE INDEX intents_open ON intents (status, job_id);

    CREATE TABLE leases (
        job_id TEXT PRIMARY KEY REFERENCES jobs (id),
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL,
        epoch INTEGER NOT NULL
    );
    """,
    # 2: the environment captured from the submitting process (JSON; NULL for older jobs)
    """
    ALTER TABLE jobs ADD COLUMN environment TEXT
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
