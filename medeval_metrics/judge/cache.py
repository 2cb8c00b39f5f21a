"""Persistent verdict cache: SQLite in WAL mode, one row per (judge identity, rubric version, prompt).

Each finished verdict is committed as soon as it exists, so a killed run keeps everything it had
judged. SQLite's locking makes concurrent writers (several processes, e.g. data-parallel ranks,
or threads) safe; ``INSERT OR REPLACE`` of the same key by two writers stores one equal value.
Only final outcomes are stored (a verdict, or a verdict that stayed unusable after the re-asks);
transport failures are not, so a re-run tries them again. Keys and values never hold API keys.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any


def cache_key(judge_identity: dict[str, Any], rubric_version: str, messages: list[dict[str, str]]) -> str:
    blob = json.dumps(
        {"judge": judge_identity, "rubric": rubric_version, "messages": messages}, sort_keys=True, ensure_ascii=False
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
            conn = sqlite3.connect(self.path, timeout=60.0)
            conn.execute("PRAGMA busy_timeout=60000")
            # WAL + NORMAL: a committed verdict survives a killed process (not a power cut) without an fsync per verdict
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._connect().execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: dict[str, Any]) -> None:
        conn = self._connect()
        with conn:
            conn.execute("INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
