"""An ``http`` target: each question POSTed as JSON, the reply read by the contract.

The request is ``{question, history, id, answers}`` (keys renamed by ``target.request``); headers come
from environment variables named in ``target.headers``, read at start-up and held in memory only
(never written to a file, a log or an error). A request has ``timeout_s`` in all (a reply that
trickles in counts too) and ``retries`` more tries, ``backoff_s`` apart and doubling, on a
timeout, a dropped connection, 429 or a 5xx; a 4xx other than 429, a body over
``max_response_mb`` or a reply that breaks the contract fails at once. :meth:`HttpTarget.probe`
says at start-up, in seconds, whether the URL answers at all.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import time
import urllib.parse
from typing import Any

from lab.config import TargetConfig
from lab.errors import ConfigError
from lab.targets.contract import TargetCallError, parse_reply

#: Seconds the start-up check waits for the URL to answer (capped by timeout_s).
PROBE_S = 5.0
RETRY_STATUS = {429, 500, 502, 503, 504}
_CHUNK = 65536


def _set(body: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        body = body.setdefault(part, {})
    body[parts[-1]] = value


class HttpTarget:
    """A service behind a URL; one connection per request (thread-safe: the run asks from
    ``concurrency`` threads)."""

    def __init__(self, cfg: TargetConfig):
        self.cfg = cfg
        self.url = urllib.parse.urlsplit(cfg.http)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        missing = [env for env in cfg.headers.values() if not os.environ.get(env)]
        if missing:
            raise ConfigError(f"field 'target.headers': the environment variable{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(missing)} {'are' if len(missing) > 1 else 'is'} not set",
                              hint=f"export {missing[0]}=... before the run (the value is read from the environment "
                                   "and written nowhere)")
        self.headers.update({name: os.environ[env] for name, env in cfg.headers.items()})
        self._secrets = sorted({os.environ[env] for env in cfg.headers.values()}, key=len, reverse=True)
        self.max_bytes = int(cfg.max_response_mb * 1024 * 1024)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        host, port = self.url.hostname or "", self.url.port
        if self.url.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(host, port, timeout=timeout)

    @property
    def _path(self) -> str:
        return (self.url.path or "/") + (f"?{self.url.query}" if self.url.query else "")

    def probe(self) -> str | None:
        """Whether the URL answers (any HTTP status will do), in at most :data:`PROBE_S` seconds;
        returns the value of ``version_header`` in its reply (None without one). An unreachable URL
        is a :class:`ConfigError` with the fix."""
        t = min(PROBE_S, self.cfg.timeout_s)
        conn = self._connection(t)
        try:
            conn.request("GET", self._path, headers=self.headers)
            resp = conn.getresponse()
            version = resp.getheader(self.cfg.version_header) if self.cfg.version_header else None
        except (OSError, http.client.HTTPException) as exc:
            raise ConfigError(f"field 'target.http': {self.cfg.http} cannot be reached ({_why(exc)}, within {t:g} s)",
                              hint="start the service (or check the host and port), then run again; try it with "
                                   f"curl -X POST {self.cfg.http} -H 'Content-Type: application/json' "
                                   "-d '{\"question\": \"test\"}'") from None
        finally:
            conn.close()
        if self.cfg.version_header and not version:
            raise ConfigError(f"field 'target.version_header': {self.cfg.http} sends no {self.cfg.version_header!r} header",
                              hint="send the header from the service (GET on the same URL), or set target.version")
        return version

    def ask(self, question: str, history: list[dict], qid: str) -> dict:
        keys = self.cfg.request
        body: dict = {}
        _set(body, keys.question, question)
        if keys.history:
            _set(body, keys.history, history)
        if keys.id:
            _set(body, keys.id, qid)
        if keys.answers:
            _set(body, keys.answers, self.cfg.answers)
        data = json.dumps(body).encode()
        wait = self.cfg.backoff_s
        for attempt in range(self.cfg.retries + 1):
            try:
                return self._once(data)
            except TargetCallError as exc:
                if not exc.retryable or attempt == self.cfg.retries:
                    if attempt:
                        exc.message += f" (after {attempt + 1} tries)"
                    raise TargetCallError(self.redact(exc.message)) from None
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")

    def redact(self, text: str) -> str:
        """``text`` with every header value from the environment masked: a service that echoes a
        request's headers in its error page must not put a secret into the run's files."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _once(self, data: bytes) -> dict:
        deadline = time.monotonic() + self.cfg.timeout_s
        conn = self._connection(self.cfg.timeout_s)
        try:
            conn.request("POST", self._path, body=data, headers=self.headers)
            resp = conn.getresponse()
            raw = self._read(resp, conn, deadline)
        except socket.timeout:
            raise TargetCallError(f"timed out after {self.cfg.timeout_s:g} s", retryable=True) from None
        except (OSError, http.client.HTTPException) as exc:
            raise TargetCallError(f"connection failed: {_why(exc)}", retryable=True) from None
        finally:
            conn.close()
        if resp.status >= 400:
            excerpt = raw[:200].decode("utf-8", "replace").strip()
            raise TargetCallError(f"HTTP {resp.status} {resp.reason}{f': {excerpt}' if excerpt else ''}",
                                  retryable=resp.status in RETRY_STATUS)
        try:
            reply = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise TargetCallError(f"the reply is not JSON ({exc}): {raw[:80]!r}") from None
        return parse_reply(reply, self.cfg.response, self.cfg.answers)

    def _read(self, resp: http.client.HTTPResponse, conn: http.client.HTTPConnection, deadline: float) -> bytes:
        declared = resp.getheader("Content-Length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise TargetCallError(f"the reply is {int(declared):,} bytes, over max_response_mb "
                                  f"({self.cfg.max_response_mb:g} MB)")
        chunks, size = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = resp.read1(_CHUNK) if hasattr(resp, "read1") else resp.read(_CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_bytes:
                raise TargetCallError(f"the reply is over max_response_mb ({self.cfg.max_response_mb:g} MB)")
            chunks.append(chunk)


def _why(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    return str(exc) or type(exc).__name__
