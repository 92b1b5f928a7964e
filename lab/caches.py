"""The content caches, all SQLite: WAL mode, one connection per thread, safe across processes
(two runs sharing a cache each see the other's commits).

- :class:`VectorCache`: float32 vectors by content key (``embeddings.sqlite``: chunk and query
  embeddings; ``scores.sqlite``: the LLM reranker's scores);
- :class:`CallCache`: LLM responses by call key (``llm.sqlite``);
- :class:`SemanticQueryCache`: earlier questions' embeddings and retrievals (``semantic.sqlite``).

Keys are made by the callers from content (model fingerprint, prompt, text); a store only
keeps and returns them.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from lab.errors import LabError


def cache_fault(path: Path, exc: BaseException) -> LabError:
    """A disk or permission fault on the cache as the error users see: the path, what happened
    (SQLite and Lance often say only "disk I/O error" or "unable to open database file", so the
    disk itself is asked whether it is read-only or full) and what to do. Everything committed
    before the fault stays cached."""
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
    folder = next((p for p in (path, *path.parents) if p.exists()), None)
    if folder is not None:
        disk = os.statvfs(folder)
        if disk.f_flag & os.ST_RDONLY:
            reason = f"Read-only file system ({reason})"
        elif disk.f_bavail * disk.f_frsize < 1 << 20:
            reason = f"the disk is full, {disk.f_bavail * disk.f_frsize // 1024} KB free ({reason})"
    full = any(w in reason.lower() for w in ("full", "no space"))
    hint = ("free disk space on the cache's disk, or set LAB_CACHE (or --cache) to a folder with room; "
            "what was computed before is cached" if full else
            "make the cache folder writable, or set LAB_CACHE (or --cache) to a writable folder")
    return LabError(f"the cache {path} cannot be written: {reason}", hint=hint)


def _when_unlocked(fn, wait_s: float = 60.0):
    """``fn()``, retried with backoff while SQLite answers "database is locked" (up to ``wait_s``)."""
    delay, waited = 0.01, 0.0
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or waited >= wait_s:
                raise
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 1.0)


#: Every open connection: (its store, weakly; the thread it serves; the connection). Those whose
#: store is gone or whose thread has ended are closed as new ones open.
_OPEN: list[tuple[weakref.ref, threading.Thread, sqlite3.Connection]] = []
_OPEN_LOCK = threading.Lock()


def _opened(store: "SqliteStore", conn: sqlite3.Connection) -> None:
    with _OPEN_LOCK:
        live = [(s, t, c) for s, t, c in _OPEN if s() is not None and t.is_alive()]
        ended = [c for s, t, c in _OPEN if s() is None or not t.is_alive()]
        _OPEN[:] = live + [(weakref.ref(store), threading.current_thread(), conn)]
    for c in ended:
        _close(c)


def _close(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:
        pass


@atexit.register
def close_all() -> None:
    """Close every connection. At exit SQLite then folds the WAL into the database and removes the
    ``-wal`` and ``-shm`` files; without this they would stay, because exit no longer collects the
    objects that hold the connections (:mod:`lab.heap` freezes them; often they are in cycles)."""
    with _OPEN_LOCK:
        conns = [c for _, _, c in _OPEN]
        _OPEN.clear()
    for c in conns:
        _close(c)


class SqliteStore:
    """A table ``(key TEXT PRIMARY KEY, <column> <type> NOT NULL)`` in a file of its own. A full
    disk or a read-only folder raises :func:`cache_fault`'s error, naming the file."""

    schema = ""  # e.g. "vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)"

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _when_unlocked(lambda: self._create())
        except (sqlite3.OperationalError, OSError) as exc:
            raise cache_fault(path, exc) from None

    def _create(self) -> None:
        with self._conn() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.schema}")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # one connection per thread; not checked, so that close_all() may close them at exit
            conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            try:
                # switching a new file to WAL can fail at once with "database is locked" while another
                # process switches it (SQLite does not wait on its busy timeout there): retry
                _when_unlocked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
                conn.execute("PRAGMA synchronous=NORMAL")
            except BaseException:
                conn.close()
                raise
            self._local.conn = conn
            _opened(self, conn)
        return conn

    def _write(self, sql: str, rows: list[tuple]) -> None:
        """One transaction: all the rows, or (disk full, read-only) none and a clear error."""
        conn = self._conn()
        try:
            with conn:
                conn.executemany(sql, rows)
        except sqlite3.OperationalError as exc:
            raise cache_fault(self.path, exc) from None


class VectorCache(SqliteStore):
    """A content-addressed store of float32 vectors."""

    schema = "vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)"

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        conn = self._conn()
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            marks = ",".join("?" * len(batch))
            for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", batch):
                out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        self._write("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)",
                    [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()])


class CallCache(SqliteStore):
    """Content-addressed store of LLM responses (one commit per call)."""

    schema = "calls (key TEXT PRIMARY KEY, body TEXT NOT NULL)"

    def get(self, key: str) -> dict | None:
        row = self._conn().execute("SELECT body FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, body: dict) -> None:
        self._write("INSERT OR REPLACE INTO calls (key, body) VALUES (?, ?)", [(key, json.dumps(body))])


class SemanticQueryCache(SqliteStore):
    """Questions asked before, within one ``scope`` (index, retriever, embedding): a question
    whose embedding is at least ``threshold`` cosine close to one of them reuses its retrieval
    (see :mod:`lab.rag.semantic_cache`)."""

    schema = "entries (key TEXT PRIMARY KEY, scope TEXT NOT NULL, question TEXT NOT NULL, vec BLOB NOT NULL, " \
             "hits TEXT NOT NULL)"

    def __init__(self, path: Path, scope: str, threshold: float):
        super().__init__(path)
        self.scope = scope
        self.threshold = threshold
        rows = self._conn().execute("SELECT question, vec, hits FROM entries WHERE scope = ?", (scope,)).fetchall()
        self._questions = [r[0] for r in rows]
        self._hits = [json.loads(r[2]) for r in rows]
        self._matrix = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows else None

    def lookup(self, vec: np.ndarray) -> dict | None:
        """The closest earlier question at or above the threshold: {question, similarity, nodes}."""
        if self._matrix is None:
            return None
        sims = self._matrix @ np.asarray(vec, dtype=np.float32)
        best = int(np.argmax(sims))
        if float(sims[best]) < self.threshold:
            return None
        return {"question": self._questions[best], "similarity": float(sims[best]), "nodes": self._hits[best]}

    def put_many(self, items: Sequence[tuple[str, np.ndarray, list]]) -> None:
        """Store (question, embedding, [[node id, score], ...]) entries."""
        rows = [(hashlib.sha256(f"{self.scope}\x00{q}".encode()).hexdigest(), self.scope, q,
                 np.asarray(v, dtype=np.float32).tobytes(), json.dumps(hits)) for q, v, hits in items]
        self._write("INSERT OR REPLACE INTO entries (key, scope, question, vec, hits) VALUES (?, ?, ?, ?, ?)", rows)
