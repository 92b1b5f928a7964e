"""A local HTTP target for tests and the overhead bench: answers the lab's JSON contract from the
fixture knowledge base, misbehaves on request, and counts.

Each POST is ``{question, history, id, answers}``; the reply's behaviour is chosen by the
question's id in ``Server.modes`` (``ok`` unless named): ``slow`` sleeps past any test timeout,
``slowok`` sleeps ``delay`` and answers, ``500`` fails, ``echo500`` fails with the request's
Authorization header in its body, ``flaky`` fails its first call then answers, ``badjson``,
``huge`` (a body of ``huge_mb``), ``noanswer``, ``notlist`` (contexts a string), ``hold`` (waits
until ``release`` is set: a call in flight when a test kills its client). The server counts calls
per id, the calls in flight at once (``max_inflight``: from the request until its reply starts; not
the ``slow`` ones, which the client has given up on) and records each request's headers. Only
127.0.0.1; it stops with the test.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KB = Path(__file__).resolve().parents[1] / "fixtures" / "kb"


def passage(source: str, start: int, end: int) -> dict:
    text = (KB / source).read_text(encoding="utf-8")[start:end]
    return {"text": text, "source": source}


#: A fixed reply: the answer to every question, with two contexts from the fixture knowledge base.
FIXED = {"answer": "The Ember 90 costs 8,400 euros [1].",
         "contexts": [passage("products/ember90.md", 0, 200), passage("company/about.md", 0, 120)],
         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.001}}


class Server:
    def __init__(self, reply: dict | None = None, delay: float = 0.0, version: str | None = None):
        self.reply = reply or FIXED
        self.modes: dict[str, str] = {}
        self.delay = delay  # seconds every ok reply waits (the bench's "100 ms target")
        self.version = version
        self.huge_mb = 2.0
        self.calls: dict[str, int] = {}
        self.headers: list[dict] = []
        self.inflight = 0
        self.max_inflight = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/rag"

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self._answered()  # in flight until the reply starts: a huge body the client refuses is not
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if server.version:
                    self.send_header("X-Rag-Version", server.version)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # the lab's start-up check
                self._send(405, b'{"error": "POST a question"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(length) or b"{}")
                qid = str(req.get("id"))
                mode = server.modes.get(qid, "ok")
                self._counted = mode != "slow"  # a slow call outlives the client's timeout: no longer the client's
                with server._lock:
                    server.calls[qid] = server.calls.get(qid, 0) + 1
                    server.headers.append(dict(self.headers))
                    server.inflight += self._counted
                    server.max_inflight = max(server.max_inflight, server.inflight)
                    n = server.calls[qid]
                try:
                    self._reply(mode, n)
                finally:
                    self._answered()

            def _answered(self) -> None:
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.inflight -= 1

            def _reply(self, mode: str, n: int) -> None:
                ok = json.dumps(server.reply).encode()
                if mode == "slow":
                    time.sleep(3.0)
                    return self._send(200, ok)
                if mode == "hold":
                    server.release.wait(30)
                    return self._send(200, ok)
                if mode == "500" or (mode == "flaky" and n == 1):
                    return self._send(500, b"internal error")
                if mode == "echo500":  # an error page that echoes the request's headers, secrets included
                    return self._send(500, ("bad request from " + str(self.headers.get("Authorization"))).encode())
                if mode == "badjson":
                    return self._send(200, b'{"answer": "cut off')
                if mode == "huge":
                    return self._send(200, b'{"answer": "' + b"x" * int(server.huge_mb * 1024 * 1024) + b'"}')
                if mode == "noanswer":
                    return self._send(200, json.dumps({"contexts": []}).encode())
                if mode == "notlist":
                    return self._send(200, json.dumps({"answer": "a", "contexts": "one passage"}).encode())
                if server.delay or mode == "slowok":
                    time.sleep(server.delay or 0.3)
                return self._send(200, ok)

        return Handler
