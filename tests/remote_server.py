"""A fake OpenAI-compatible server and a remote LLM against it, shared by the remote-LLM tests
(tests/models/test_remote_llm.py) and the robustness ones."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lab.config import LLMConfig
from lab.models.llm import LabLLM
from lab.models.resolve import resolve_llm

SENTINEL_KEY = "sk-sentinel-remote-0123456789"


class FakeServer:
    """Answers /v1/chat/completions; ``script`` lists what the first requests get: an HTTP status,
    "timeout" (no answer for 3 s), "badjson" (200 with a body that is not JSON) or "empty" (200
    with an empty answer)."""

    def __init__(self, script=(), delay=0.0):
        self.script, self.delay = list(script), delay
        self.requests, self.in_flight, self.max_in_flight = [], 0, 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                    status = server.script.pop(0) if server.script else 200
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                time.sleep(3.0 if status == "timeout" else server.delay)
                with server.lock:
                    server.in_flight -= 1
                if status == "badjson":
                    data = b'{"id": "x", "choices": [ this is not json'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if status not in (200, "timeout", "empty"):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "busy"}}')
                    return
                question = body["messages"][-1]["content"]
                payload = {
                    "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant",
                                             "content": "" if status == "empty" else f"echo: {question}"}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def server():
    servers = []

    def make(*args, **kw):
        servers.append(FakeServer(*args, **kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def remote(url, tmp_path, monkeypatch, **cfg):
    monkeypatch.setenv("LAB_TEST_KEY", SENTINEL_KEY)
    c = LLMConfig(backend="openai_compatible", model="tiny", base_url=url, api_key_env="LAB_TEST_KEY",
                  price_per_mtok=(1.0, 2.0), **cfg)
    from lab.caches import CallCache

    return LabLLM(resolve_llm(c, "generation", tmp_path), CallCache(tmp_path / "llm.sqlite"))
