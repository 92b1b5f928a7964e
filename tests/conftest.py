"""Shared fixtures. Every test runs offline and must not touch LlamaIndex's global Settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("OPENAI_API_KEY", None)


def pytest_collection_modifyitems(config, items):
    """The browser tests drive Debian's chromium: where it is not installed (``make test`` installs it
    first, ``make test-fast`` does not) they are skipped with the reason and the fix, not errors."""
    from pages import CHROMIUM  # tests/pages.py: the one place that names the browser

    if Path(CHROMIUM).is_file():
        return
    skip = pytest.mark.skip(reason="chromium not installed: make browser")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _one_gguf(tmp_path_factory):
    """Tests that run the packaged Qwen each have their own cache; they share one assembled copy
    of its 1.1 GB GGUF (beside the workers' temporary folders), not one copy per test."""
    shared = tmp_path_factory.getbasetemp().parent / "gguf"
    previous = os.environ.get("LAB_GGUF_DIR")
    os.environ["LAB_GGUF_DIR"] = str(shared)
    yield
    if previous is None:
        os.environ.pop("LAB_GGUF_DIR", None)
    else:
        os.environ["LAB_GGUF_DIR"] = previous


@pytest.fixture(autouse=True)
def _no_global_settings(monkeypatch):
    """Fail any test in which something reaches for Settings.llm / Settings.embed_model
    (LlamaIndex's defaults silently fall back to OpenAI)."""
    from llama_index.core.settings import _Settings

    def boom(self):
        raise AssertionError("code reached for LlamaIndex's global Settings; pass models explicitly")

    monkeypatch.setattr(_Settings, "llm", property(boom))
    monkeypatch.setattr(_Settings, "embed_model", property(boom))


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the fixture project (kb/, eval.jsonl, experiments/) in a temporary folder."""
    dst = tmp_path / "project"
    shutil.copytree(FIXTURES, dst)
    return dst


@pytest.fixture(scope="session")
def minilm():
    """The real packaged all-MiniLM-L6-v2, loaded once per session, with no cache."""
    from lab.models.embeddings import LabEmbedding
    from lab.models.resolve import resolve_hf_model

    return LabEmbedding(resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model"), None)


@pytest.fixture
def cli(capsys):
    """``lab ARGS`` in this process: (exit code, stdout, stderr); argparse's errors exit 2 too."""
    from lab.cli import main

    def run(*args) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium (tests/pages.py: Debian's chromium driven by Playwright), one per test module."""
    from pages import browser

    with browser() as b:
        yield b

