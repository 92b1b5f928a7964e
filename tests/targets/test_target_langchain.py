"""The LangChain example (examples/langchain_rag) on the fixture project, as a python target and,
behind its Starlette app, as an http target: the same questions give the same contexts, answers
and metrics both ways. Real parts: langchain-experimental's semantic chunker, a Chroma store, the
packaged MiniLM, and the packaged SmolLM2 answering through LangChain's llama.cpp chat model (the
example's default is the Qwen the lab packages; SmolLM2 keeps the test short)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from runs import ROOT, lab, latest, load
from test_target_python import _diff_target

pytestmark = pytest.mark.slow

BASE = """schema_version: 1
data:
  knowledge_base: kb
  eval_set: eval.jsonl
judge: null
target:
"""


def _serve(app) -> tuple[str, object]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/rag", server


def test_langchain_app_as_python_and_http_target(project, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(project / "cache"))  # the app's Chroma store and LLM cache, shared
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ (a package of the same name may be installed)
    from examples.langchain_rag.serve import create_app

    experiments = project / "experiments"
    (experiments / "lc.yaml").write_text(BASE + "  python: examples.langchain_rag.app:chain\n  kwargs:\n    kb: kb\n"
                                         "    model: smollm2-135m-instruct\n"
                                         "  request:\n    question: question\n  version: '1'\n")
    (experiments / "lc-retriever.yaml").write_text(BASE + "  python: examples.langchain_rag.app:retriever\n"
                                                   "  kwargs:\n    kb: kb\n  version: '1'\n")
    for name, extra in (("lc-retriever", ("--retrieval-only",)), ("lc", ())):
        proc = lab(project, "run", name, "--no-progress", *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
    url, server = _serve(create_app(str(project / "kb"), "smollm2-135m-instruct"))
    try:
        (experiments / "lc-http.yaml").write_text(BASE + f"  http: {url}\n  version_header: X-Rag-Version\n"
                                                  "  timeout_s: 120\n")
        for args in (("--retrieval-only",), ()):
            proc = lab(project, "run", "lc-http", "--no-progress", *args)
            assert proc.returncode == 0, proc.stderr[-3000:]
            diff = _diff_target().differences(latest(project, "lc-retriever" if args else "lc"), latest(project, "lc-http"))
            assert diff == [], diff
    finally:
        server.should_exit = True
    results, samples = load(latest(project, "lc-http"))
    t = results["target"]
    assert (t["version"], t["failed"], t["contexts"]["not_located"]) == ("2", 0, 0)
    assert t["contexts"]["n"] == load(latest(project, "lc"))[0]["target"]["contexts"]["n"] >= 6
    assert all(s["answer"]["text"] for s in samples)
    assert not (project / "network.log").exists() or not (project / "network.log").read_text().strip()
