"""Persistent verdict cache: SQLite in WAL mode, one row per (judge identity, rubric, settings, prompt).

The key holds what changes the answer (``cache_key``): the judge's identity, the rubric's name and
content hash, whether an answer id is required, and the exact messages; never a key. A value is a
verdict, scored or unscored with its reason and the settings that produced it, so a later run can
tell a failure worth asking again (``judge.runner``) from a final one. Writes come from one thread
in batches (``put_many``, one transaction each), off the requests' hot path; a killed run loses at
most the last quarter second's verdicts (``runner._CACHE_FLUSH_S``). SQLite's locking makes several processes (data-parallel ranks) safe;
``INSERT OR REPLACE`` of the same key by two writers stores one equal value.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_S = 60.0  # how long a write waits for another process's lock before it fails (then retried)


def cache_key(judge_identity: dict[str, Any], rubric: dict[str, Any] | str, messages: list[dict[str, str]]) -> str:
    """``rubric``: ``{"name", "hash", "require_answer_id"}`` (what changes how a reply is read)."""
    blob = json.dumps(
        {"judge": judge_identity, "rubric": rubric, "messages": messages}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class VerdictCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._initialise()

    def _initialise(self, attempts: int = 60) -> None:
        """Switch to WAL and create the table. Two processes doing this at once on a new file can get
        "database is locked" at once, without SQLite's busy handler waiting (a lock-upgrade
        deadlock), so retry with a short backoff."""
        for attempt in range(attempts):
            try:
                conn = self._connect()
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                with conn:
                    conn.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 + 0.05 * random.random() * (attempt + 1))

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            # WAL + NORMAL: a committed verdict survives a killed process (not a power cut) without an fsync per verdict
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._connect().execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        conn = self._connect()
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in conn.execute(f"SELECT key, value FROM verdicts WHERE key IN ({marks})", chunk):
                out[key] = json.loads(value)
        return out

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.put_many([(key, value)])

    def put_many(self, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        rows = [(key, json.dumps(value)) for key, value in rows]
        if not rows:
            return
        conn = self._connect()
        with conn:
            conn.executemany("INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)", rows)

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
