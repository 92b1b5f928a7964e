"""SQLite stores for the content caches: WAL mode, one connection per thread, safe across
processes (two runs sharing a cache each see the other's commits)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class SqliteStore:
    """A table ``(key TEXT PRIMARY KEY, <column> <type> NOT NULL)`` in a file of its own."""

    schema = ""  # e.g. "vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)"

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.schema}")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn
