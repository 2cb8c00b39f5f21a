"""Persistent verdict cache: SQLite in WAL mode, one row per (judge identity, rubric, settings, prompt).

The key holds what changes the answer (``cache_key``): the judge's identity, the rubric's name and
content hash, whether an answer id is required, and the exact messages; never a key. A value is a
verdict, scored or unscored with its reason and the settings that produced it, so a later run can
tell a failure worth asking again (``judge.runner``) from a final one. Writes come from one thread
in batches (``put_many``, one transaction each), off the requests' hot path; a killed run loses at
most the last quarter second's verdicts (``runner._CACHE_FLUSH_S``). SQLite's locking makes several processes (data-parallel ranks) safe;
``INSERT OR REPLACE`` of the same key by two writers stores one equal value.

Claims (table ``claims``: key, owner, lease expiry) keep concurrent runs sharing a cache from paying
twice for one verdict: a run claims the keys it is about to ask for; another run that needs one of
them waits for the verdict the claimant writes (the write deletes the claim in the same transaction)
instead of asking. A live run renews its leases (``LEASE_S``); a killed run's claims expire and are
taken over. Claims are best effort: one that cannot be made within ``CLAIM_BUSY_S`` (the cache locked)
is not made, and the run asks as it did before claims existed.
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
LEASE_S = 30.0  # a claim's lease: a run killed while asking holds others back at most this long
CLAIM_BUSY_S = 2.0  # how long claiming or renewing waits for another writer's lock before it gives up
_CHUNK = 500  # keys per IN (...) query, under SQLite's bound-parameter limit


def claim_busy_s() -> float:
    return min(CLAIM_BUSY_S, BUSY_TIMEOUT_S)  # never longer than a verdict write would wait


def new_owner() -> str:
    """An id for one run's claims: host, process and a random part (a process may run several panels)."""
    import os
    import socket
    import uuid

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def cache_key(judge_identity: dict[str, Any], rubric: dict[str, Any] | str, messages: list[dict[str, str]]) -> str:
    """``rubric``: ``{"name", "hash", "require_answer_id"}`` (what changes how a reply is read)."""
    blob = json.dumps(
        {"judge": judge_identity, "rubric": rubric, "messages": messages}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class VerdictCache:
    def __init__(self, path: str | Path) -> None:
        from medeval_metrics.safe_files import create_private_file

        self.path = Path(path).expanduser()
        # verdicts quote the judged answers: a new cache is 0600 (SQLite gives its -wal and -shm files the
        # database's mode) in folders made 0700, whatever the umask; an existing one keeps its mode
        create_private_file(self.path)
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
                    conn.execute(
                        "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL)"
                    )
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 + 0.05 * random.random() * (attempt + 1))

    def _connect(self, busy_s: float | None = None) -> sqlite3.Connection:
        """This thread's connection; ``busy_s``: another one, for claims, that waits only that long for a lock."""
        name = "conn" if busy_s is None else "claims_conn"
        conn = getattr(self._local, name, None)
        if conn is None:
            busy_s = BUSY_TIMEOUT_S if busy_s is None else busy_s
            conn = sqlite3.connect(self.path, timeout=busy_s)
            conn.execute(f"PRAGMA busy_timeout={int(busy_s * 1000)}")
            # WAL + NORMAL: a committed verdict survives a killed process (not a power cut) without an fsync per verdict
            conn.execute("PRAGMA synchronous=NORMAL")
            setattr(self._local, name, conn)
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

    def put_many(self, rows: Iterable[tuple[str, dict[str, Any]]], owner: str | None = None) -> None:
        """Store verdicts; ``owner``: also end that run's claims on their keys, in the same transaction (a run
        waiting for one of them never sees the claim gone before the verdict is there)."""
        rows = [(key, json.dumps(value)) for key, value in rows]
        if not rows:
            return
        conn = self._connect()
        with conn:
            conn.executemany("INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)", rows)
            if owner is not None:
                conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(key, owner) for key, _ in rows])

    # ------------------------------------------------------------------ claims
    def claim(self, keys: list[str], owner: str, lease_s: float = LEASE_S) -> dict[str, str]:
        """Claim ``keys`` for ``owner`` for ``lease_s`` seconds, in one transaction. Returns the keys another
        run holds, with their owner: a claim of another owner whose lease has not expired. Every other key
        (free, expired, already ``owner``'s) is ``owner``'s now. Raises ``sqlite3.Error`` when the cache stays
        locked past ``CLAIM_BUSY_S``."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        conn = self._connect(claim_busy_s())
        held: dict[str, str] = {}
        # IMMEDIATE: the write lock from the start, so two runs claiming at once are serialised, not both told "free"
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = time.time()
            conn.execute("DELETE FROM claims WHERE expires <= ?", (now,))  # killed runs' leftovers count as free
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, owner FROM claims WHERE key IN ({marks}) AND owner != ?"
                held.update(conn.execute(query, [*chunk, owner]).fetchall())
            conn.executemany(
                "INSERT OR REPLACE INTO claims (key, owner, expires) VALUES (?, ?, ?)",
                [(key, owner, now + lease_s) for key in keys if key not in held],
            )
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return held

    def claims(self, keys: list[str]) -> dict[str, tuple[str, float]]:
        """The claims on ``keys``: key -> (owner, lease expiry as ``time.time()``)."""
        out: dict[str, tuple[str, float]] = {}
        conn = self._connect()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, owner, expires in conn.execute(
                f"SELECT key, owner, expires FROM claims WHERE key IN ({marks})", chunk
            ):
                out[key] = (owner, expires)
        return out

    def renew(self, owner: str, lease_s: float = LEASE_S) -> None:
        conn = self._connect(claim_busy_s())
        with conn:
            conn.execute("UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + lease_s, owner))

    def release(self, owner: str) -> None:
        """End every claim ``owner`` still holds (asks it did not finish)."""
        conn = self._connect(claim_busy_s())
        with conn:
            conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
