"""An MLflow store: where it is, shown without its password, and whether it can be used, checked in
seconds before :mod:`lab.report.tracking` logs to it (MLflow itself retries a store it cannot open
for minutes before its traceback)."""

from __future__ import annotations

import socket
import sqlite3
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from lab.errors import LabError

#: The default store, in the project root: MLflow 3's own default is a SQLite file (``mlflow.db``
#: in the working directory); its file store (``./mlruns``) refuses to open unless
#: MLFLOW_ALLOW_FILE_STORE=true.
DEFAULT_DB = "mlruns.db"
#: Seconds a tracking server has to accept a connection before logging gives up: MLflow's own
#: retries (7, with backoff) would keep a user waiting about 4 minutes before saying anything.
CONNECT_TIMEOUT_S = 5.0


def shown_uri(uri: str) -> str:
    """``uri`` without a password (``https://user:secret@host`` -> ``https://user:***@host``)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def check_store(uri: str) -> None:
    """Stop in seconds, with the path or URL and the fix, when the store cannot be used: a SQLite
    file that cannot be opened for writing (a read-only folder, a folder in its place, a file
    that is not a database), or a tracking server that does not accept a connection within
    :data:`CONNECT_TIMEOUT_S` (not checked behind a proxy, which MLflow's requests go through).
    MLflow itself retries both for minutes before its traceback."""
    parts = urlsplit(uri)
    if parts.scheme == "sqlite" and uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):].partition("?")[0]
        if path and path != ":memory:":
            _check_sqlite(Path(path))
    elif parts.scheme in ("http", "https") and parts.hostname:
        _check_server(uri, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


def _check_sqlite(db: Path) -> None:
    problem, writable = None, False
    if db.is_dir():
        problem = "is a folder, not a database file"
    else:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)  # as MLflow does
            con = sqlite3.connect(db, timeout=CONNECT_TIMEOUT_S)
            try:
                con.execute("PRAGMA schema_version").fetchone()  # a file that is not a database fails here
                con.execute("BEGIN IMMEDIATE")  # a write lock: fails where the file or its folder is read-only
                con.rollback()
            finally:
                con.close()
        except OSError as exc:
            problem, writable = f"its folder cannot be made ({exc.strerror or exc})", True
        except sqlite3.Error as exc:
            problem, writable = str(exc), isinstance(exc, sqlite3.OperationalError)
    if problem:
        raise LabError(f"MLflow store {db}: {problem}",
                       hint=f"give --uri (or tracking.uri) another SQLite file, e.g. sqlite:///{DEFAULT_DB} (the "
                            "default, in the project root)"
                            + (f", or make {db.parent} writable" if writable else ""))


def _check_server(uri: str, host: str, port: int) -> None:
    scheme = urlsplit(uri).scheme
    if urllib.request.getproxies().get(scheme) and not urllib.request.proxy_bypass(host):
        return  # reached through the proxy: a direct connection says nothing
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise LabError(f"MLflow tracking server at {shown_uri(uri)} does not answer ({reason}; waited at most "
                       f"{CONNECT_TIMEOUT_S:g} s)",
                       hint=f"start it (mlflow server --host {host} --port {port}), or give another store with "
                            f"--uri, tracking.uri or MLFLOW_TRACKING_URI (sqlite:///{DEFAULT_DB} needs no "
                            "server)") from None
