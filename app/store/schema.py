"""The store's schema: numbered migrations, applied in order.

Each migration runs in its own transaction and is recorded in ``PRAGMA user_version``,
so an older file is upgraded in place; the store refuses a file whose version is newer
than ``len(MIGRATIONS)`` (a later phasewatch wrote it).
"""

from __future__ import annotations

import sqlite3

__all__ = ["MIGRATIONS", "migrate", "user_version"]

MIGRATIONS: tuple[str, ...] = (
    # 1: the data path
    """
    CREATE TABLE streams(
        id INTEGER PRIMARY KEY,
        target TEXT NOT NULL,
        model_name TEXT NOT NULL,
        UNIQUE(target, model_name)
    );
    CREATE TABLE layouts(id INTEGER PRIMARY KEY, bounds TEXT NOT NULL UNIQUE);
    CREATE TABLE intervals(
        stream_id INTEGER NOT NULL,
        end_ts REAL NOT NULL,
        start_ts REAL NOT NULL,
        reset INTEGER NOT NULL,
        payload BLOB NOT NULL,
        PRIMARY KEY(stream_id, end_ts)
    ) WITHOUT ROWID;
    CREATE TABLE scrapes(
        target TEXT NOT NULL,
        ts REAL NOT NULL,
        ok INTEGER NOT NULL,
        error_kind TEXT,
        error TEXT,
        duration REAL NOT NULL,
        bytes INTEGER NOT NULL,
        parse_errors INTEGER NOT NULL,
        PRIMARY KEY(target, ts)
    ) WITHOUT ROWID;
    CREATE TABLE last_snapshot(
        target TEXT NOT NULL,
        model_name TEXT NOT NULL,
        ts REAL NOT NULL,
        payload BLOB NOT NULL,
        PRIMARY KEY(target, model_name)
    ) WITHOUT ROWID;
    """,
    # 2: diagnoses, alerting (state, history, outbox, silences)
    """
    CREATE TABLE diagnoses(
        stream_id INTEGER NOT NULL,
        end_ts REAL NOT NULL,
        start_ts REAL NOT NULL,
        class TEXT NOT NULL,
        payload BLOB NOT NULL,
        PRIMARY KEY(stream_id, end_ts)
    ) WITHOUT ROWID;
    CREATE TABLE alert_state(
        fingerprint TEXT PRIMARY KEY,
        payload TEXT NOT NULL
    );
    CREATE TABLE alert_history(
        id INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        alertname TEXT NOT NULL,
        state TEXT NOT NULL,
        at REAL NOT NULL,
        labels TEXT NOT NULL,
        annotations TEXT NOT NULL
    );
    CREATE INDEX alert_history_at ON alert_history(at);
    CREATE TABLE outbox(
        id INTEGER PRIMARY KEY,
        receiver TEXT NOT NULL,
        dedup_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        created REAL NOT NULL,
        next_attempt REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        delivered REAL,
        UNIQUE(receiver, dedup_key)
    );
    CREATE INDEX outbox_due ON outbox(delivered, next_attempt);
    CREATE TABLE silences(
        id TEXT PRIMARY KEY,
        matchers TEXT NOT NULL,
        starts_at REAL NOT NULL,
        ends_at REAL NOT NULL,
        created_by TEXT NOT NULL,
        comment TEXT NOT NULL
    );
    """,
    # 3: outbox delivery order and outcome. Rows of one alert go out in id order per
    # receiver (a "resolved" never overtakes its "firing"); ``kind`` is event or update
    # (Alertmanager: only the newest row per alert is sent); ``outcome`` says how a row
    # ended (sent, rejected, superseded, expired) — ``delivered`` is when.
    """
    ALTER TABLE outbox ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
    ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'event';
    ALTER TABLE outbox ADD COLUMN outcome TEXT;
    CREATE INDEX outbox_order ON outbox(receiver, fingerprint, id);
    """,
    # 4: blocks and roll-ups (app.store.rollups). ``intervals`` keeps only the deltas not
    # rolled up yet; an older store's rows are rolled up from there, oldest first, and
    # the rows of new deltas are binary (app.store.deltacodec) with their ``shapes``.
    # Blocks, roll-ups and diagnoses are rowid tables: a row of a few kB stays on its
    # page there, where a WITHOUT ROWID table moves all past ~1 kB to an overflow page of
    # its own (a 2 kB diagnosis took 4 kB of pages).
    """
    CREATE TABLE shapes(id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
    CREATE TABLE interval_blocks(
        stream_id INTEGER NOT NULL,
        end_ts REAL NOT NULL,
        payload BLOB NOT NULL
    );
    CREATE UNIQUE INDEX interval_blocks_key ON interval_blocks(stream_id, end_ts);
    CREATE TABLE rollups(
        stream_id INTEGER NOT NULL,
        res INTEGER NOT NULL,
        end_ts REAL NOT NULL,
        payload BLOB NOT NULL
    );
    CREATE UNIQUE INDEX rollups_key ON rollups(stream_id, res, end_ts);
    CREATE TABLE rollup_marks(stream_id INTEGER PRIMARY KEY, until REAL NOT NULL);
    CREATE TABLE diagnoses_rows(
        stream_id INTEGER NOT NULL,
        end_ts REAL NOT NULL,
        start_ts REAL NOT NULL,
        class TEXT NOT NULL,
        payload BLOB NOT NULL
    );
    INSERT INTO diagnoses_rows SELECT stream_id, end_ts, start_ts, class, payload FROM diagnoses;
    DROP TABLE diagnoses;
    ALTER TABLE diagnoses_rows RENAME TO diagnoses;
    CREATE UNIQUE INDEX diagnoses_key ON diagnoses(stream_id, end_ts);
    """,
    # 5: what a stopping service leaves for the next one (app.store.resume): one row per
    # kind of state, taken (read and deleted) by the next start.
    """
    CREATE TABLE resume_state(
        name TEXT PRIMARY KEY,
        taken REAL NOT NULL,
        fingerprint TEXT NOT NULL,
        payload BLOB NOT NULL
    );
    """,
)


def user_version(db: sqlite3.Connection) -> int:
    """The number of the last migration applied to ``db`` (0: none)."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version)


def migrate(db: sqlite3.Connection, version: int) -> None:
    """Apply the migrations after ``version`` to ``db``, each in one transaction."""
    for number in range(version + 1, len(MIGRATIONS) + 1):
        db.execute("BEGIN")
        for statement in MIGRATIONS[number - 1].split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {number}")
        db.execute("COMMIT")
