"""The content caches, all SQLite: WAL mode, one connection per thread, safe across processes
(two runs sharing a cache each see the other's commits).

- :class:`VectorCache`: float32 vectors by content key (``embeddings.sqlite``: chunk and query
  embeddings; ``scores.sqlite``: the LLM reranker's and the cross-encoders' scores);
- :class:`CallCache`: LLM responses by call key (``llm.sqlite``);
- :class:`SemanticQueryCache`: earlier questions' embeddings and retrievals (``semantic.sqlite``).

Keys are made by the callers from content (model fingerprint, prompt, text); a store only
keeps and returns them.

A damaged file (SQLite finds it malformed, or not a database) is moved aside as
``NAME.corrupt-<time>`` with a warning naming both paths, and a new file is made from the rows
that can still be read; a damaged entry (a vector that is not float32 or not finite, a response
that is not JSON) is never returned: it is computed again and replaced.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from lab.errors import CacheError, LabError

log = logging.getLogger(__name__)


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


#: SQLite's primary result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_DAMAGED_CODES = {11, 26}


def damaged(exc: BaseException) -> bool:
    """Whether SQLite says the file itself is damaged (not locked, not a full or read-only disk)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGED_CODES
    return any(w in str(exc) for w in ("malformed", "not a database"))


def set_aside(path: Path, why: str) -> Path:
    """Move a damaged cache file or folder out of the way, as ``NAME.corrupt-<time>`` beside it
    (SQLite's ``-wal`` and ``-shm`` files follow a database); returns the new path. Where it cannot
    be moved, the error names it and says to delete it."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            if path.with_name(path.name + suffix).exists():
                os.replace(path.with_name(path.name + suffix), aside.with_name(aside.name + suffix))
    except OSError as exc:
        raise CacheError(f"{path} is damaged ({why}) and cannot be moved aside: {exc.strerror or exc}",
                         hint=f"delete {path}: it is a cache, and what it held is computed again") from None
    return aside


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


#: How many times each file was set aside in this process: a connection opened before is reopened.
_GENERATION: dict[Path, int] = {}


def _forget(path: Path) -> None:
    """Close every connection to ``path`` in this process (all stores, all threads) before the
    file is moved aside: a connection closed later would remove the new file's ``-wal`` by name."""
    with _OPEN_LOCK:
        _GENERATION[path] = _GENERATION.get(path, 0) + 1
        alive = [(s(), t, c) for s, t, c in _OPEN]
        mine = [c for s, _, c in alive if s is not None and s.path == path]
        _OPEN[:] = [(weakref.ref(s), t, c) for s, t, c in alive if s is not None and s.path != path]
    for c in mine:
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
    disk or a read-only folder raises :func:`cache_fault`'s error, naming the file; a damaged file
    is set aside and made again from its readable rows (:meth:`_guarded`)."""

    schema = ""  # e.g. "vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)"

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._guarded(lambda conn: _when_unlocked(lambda: self._create()))
        except (sqlite3.OperationalError, OSError) as exc:
            raise cache_fault(path, exc) from None

    @property
    def table(self) -> str:
        return self.schema.split(" ", 1)[0]

    def _create(self) -> None:
        with self._conn() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.schema}")

    def _guarded(self, fn):
        """``fn(connection)``; where SQLite finds the file damaged, it is set aside, made again from
        the rows that can be read, and ``fn`` runs once more on the new file."""
        try:
            return fn(self._conn())
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self._recover(str(exc))
        try:
            return fn(self._conn())
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            raise CacheError(f"the cache {self.path} is damaged ({exc}), also after it was made again",
                             hint=f"delete {self.path}: it is a cache, and what it held is computed again") from None

    def _recover(self, why: str) -> None:
        """Under a lock beside the file (one process, one thread at a time): unless another has
        already replaced it (``PRAGMA quick_check`` passes), set the file aside, make a new one and
        copy into it every row that can still be read."""
        lock = self.path.with_name(self.path.name + ".lock")
        with _RECOVERING, open(lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            _forget(self.path)
            if _passes_quick_check(self.path):
                return
            aside = set_aside(self.path, why)
            self._create()
            kept = self._salvage(aside)
            log.warning("%s is damaged (%s): moved aside to %s; %d entries kept from it, the others are "
                        "computed again when asked for (delete %s when no longer wanted)",
                        self.path, why, aside, kept, aside)

    def _salvage(self, aside: Path, batch: int = 10_000) -> int:
        """Copy the rows of the damaged file that SQLite can read, in order, up to the first that
        it cannot; returns how many."""
        kept, part = 0, []

        def flush() -> None:
            nonlocal kept
            if part:
                self._write(f"INSERT OR REPLACE INTO {self.table} VALUES ({','.join('?' * len(part[0]))})", part)
                kept += len(part)
                part.clear()

        try:
            old = sqlite3.connect(aside, timeout=5)
        except sqlite3.Error:
            return 0
        try:
            # a truncated file is refused whole unless SQLite may read its schema "writable" (it is
            # only read here): then the pages that are there can be read
            old.execute("PRAGMA writable_schema=ON")
            for row in old.execute(f"SELECT * FROM {self.table}"):
                part.append(row)
                if len(part) >= batch:
                    flush()
        except sqlite3.DatabaseError:
            pass  # the first row it cannot read: the rest is computed again
        finally:
            old.close()
        flush()
        return kept

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.generation != _GENERATION.get(self.path, 0):
            conn = None  # a connection to a file since set aside (closed by _forget)
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
            self._local.generation = _GENERATION.get(self.path, 0)
            _opened(self, conn)
        return conn

    def _write(self, sql: str, rows: list[tuple]) -> None:
        """One transaction: all the rows, or (disk full, read-only) none and a clear error."""

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany(sql, rows)

        try:
            self._guarded(write)
        except sqlite3.OperationalError as exc:
            raise cache_fault(self.path, exc) from None


_RECOVERING = threading.Lock()


def _passes_quick_check(path: Path) -> bool:
    try:
        conn = sqlite3.connect(path, timeout=60)
        try:
            return conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False


def _vector(blob: object) -> np.ndarray | None:
    """A stored blob as float32, or None where it is not one (a length that is not a multiple of 4,
    a value that is not finite)."""
    if not isinstance(blob, bytes) or len(blob) % 4:
        return None
    vec = np.frombuffer(blob, dtype=np.float32)
    return vec if np.isfinite(vec).all() else None


class VectorCache(SqliteStore):
    """A content-addressed store of float32 vectors."""

    schema = "vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)"

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The vectors stored under ``keys``; a damaged one (see :func:`_vector`) is left out, so
        the caller computes it again, with a warning."""

        def rows(conn: sqlite3.Connection) -> list[tuple]:
            out = []
            for start in range(0, len(keys), 500):
                batch = keys[start : start + 500]
                marks = ",".join("?" * len(batch))
                out += conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", batch).fetchall()
            return out

        out: dict[str, np.ndarray] = {}
        bad = 0
        for key, blob in self._guarded(rows):
            vec = _vector(blob)
            if vec is None:
                bad += 1
            else:
                out[key] = vec
        if bad:
            log.warning("%s: %d damaged entries (not float32, or not finite) are computed again", self.path, bad)
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
        """The response stored under ``key``; a damaged one (not JSON) is None, with a warning."""
        row = self._guarded(lambda conn: conn.execute("SELECT body FROM calls WHERE key = ?", (key,)).fetchone())
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):
            log.warning("%s: the entry %s is damaged (not JSON) and is computed again", self.path, key)
            return None

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
        rows = self._guarded(lambda conn: conn.execute(
            "SELECT question, vec, hits FROM entries WHERE scope = ?", (scope,)).fetchall())
        kept = [(q, v, h) for q, v, h in ((r[0], _vector(r[1]), _hits(r[2])) for r in rows)
                if v is not None and h is not None]
        if kept:  # an entry of another length than most is damaged too
            dim = max(set(len(v) for _, v, _ in kept), key=[len(v) for _, v, _ in kept].count)
            kept = [e for e in kept if len(e[1]) == dim]
        if len(kept) < len(rows):
            log.warning("%s: %d damaged entries are left out", self.path, len(rows) - len(kept))
        self._questions = [q for q, _, _ in kept]
        self._hits = [h for _, _, h in kept]
        self._matrix = np.stack([v for _, v, _ in kept]) if kept else None

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
        for q, v, hits in items:  # and served from now on in this process too (a conversation in `lab ask`)
            vec = np.asarray(v, dtype=np.float32)[None, :]
            self._matrix = vec if self._matrix is None else np.vstack([self._matrix, vec])
            self._questions.append(q)
            self._hits.append(hits)


def _hits(text: object) -> list | None:
    """A semantic entry's hits, ``[[node id, score], ...]``, or None where they are damaged (not
    JSON, not pairs, a score that is not a finite number)."""
    try:
        hits = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    ok = isinstance(hits, list) and all(
        isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)
        and (h[1] is None or (isinstance(h[1], (int, float)) and math.isfinite(h[1]))) for h in hits)
    return hits if ok else None
