"""Schema migrations, applied in order on open. Never edit a released step; append a new one.

The schema version is the number of steps applied: SQLite's ``user_version``, PostgreSQL's
``dispatch_schema.version``. Both stores have the same steps, the same tables and columns
(step *n* of one is step *n* of the other), in each database's own types.
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
    # 3: who submitted the job (NULL for older jobs)
    """
    ALTER TABLE jobs ADD COLUMN submitted_by TEXT
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)

#: the same steps for PostgreSQL: times as double precision (seconds since the epoch, the
#: injected clock's), sequence numbers from identity columns
POSTGRES_MIGRATIONS: tuple[str, ...] = (
    # 1: the initial schema
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        cluster TEXT NOT NULL,
        spec TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL,
        cause TEXT,
        summary TEXT NOT NULL DEFAULT '',
        updated_at DOUBLE PRECISION NOT NULL,
        cancel_actor TEXT,
        cancel_reason TEXT,
        cancel_at DOUBLE PRECISION,
        release_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX jobs_by_state ON jobs (state);
    CREATE INDEX jobs_by_created ON jobs (created_at);

    CREATE TABLE attempts (
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        handle TEXT,
        outcome TEXT,
        state TEXT NOT NULL DEFAULT 'pending',
        ended_at DOUBLE PRECISION,
        PRIMARY KEY (job_id, attempt)
    );

    CREATE TABLE evidence (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        observed_at DOUBLE PRECISION NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL,
        UNIQUE (job_id, attempt, key)
    );

    CREATE TABLE log (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        at DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX log_by_job ON log (job_id, seq);

    CREATE TABLE intents (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        attempt INTEGER,
        operation TEXT NOT NULL,
        owner TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL,
        result TEXT,
        closed_at DOUBLE PRECISION
    );
    CREATE INDEX intents_open ON intents (status, job_id);

    CREATE TABLE leases (
        job_id TEXT PRIMARY KEY REFERENCES jobs (id),
        owner TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        epoch INTEGER NOT NULL
    )
    """,
    # 2: the environment captured from the submitting process (JSON; NULL for older jobs)
    """
    ALTER TABLE jobs ADD COLUMN environment TEXT
    """,
    # 3: who submitted the job (NULL for older jobs)
    """
    ALTER TABLE jobs ADD COLUMN submitted_by TEXT
    """,
)
