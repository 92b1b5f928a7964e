"""API keys never appear in results, reports, logs (even debug logs) or error messages."""

import json
import shutil
from pathlib import Path

import pytest

from runs import lab, latest
from remote_server import SENTINEL_KEY, FakeServer

pytestmark = pytest.mark.slow


def test_a_sentinel_key_appears_nowhere(tmp_path):
    s = FakeServer([500] * 3)  # the first answer fails after its retries: an error message is written
    try:
        project = tmp_path / "project"
        shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures", project)
        llm = (f"    backend: openai_compatible\n    base_url: {s.url}\n    model: fake\n"
               f"    api_key_env: LAB_TEST_KEY\n    max_retries: 2\n")
        (project / "experiments" / "remote.yaml").write_text(
            f"schema_version: 1\nextends: small\ngeneration:\n  llm:\n{llm}judge: null\n")
        p = lab(project, "-v", "run", "remote", "--no-progress", LAB_TEST_KEY=SENTINEL_KEY)
        assert p.returncode == 0, p.stderr
        assert "call failed after 2 retries" in p.stderr or "failed" in json.dumps(
            json.loads((latest(project, "remote") / "results.json").read_text())["answers"])
        assert any(r["auth"] == f"Bearer {SENTINEL_KEY}" for r in s.requests)  # it was really sent
        assert SENTINEL_KEY not in p.stdout and SENTINEL_KEY not in p.stderr
        for path in project.rglob("*"):
            if path.is_file():
                assert SENTINEL_KEY.encode() not in path.read_bytes(), path
    finally:
        s.close()


def test_a_missing_key_message_names_the_variable_not_a_value(project):
    (project / "experiments" / "k.yaml").write_text(
        "schema_version: 1\nextends: small\ngeneration:\n  llm:\n    backend: openai\n    model: gpt-4.1-nano\n")
    p = lab(project, "run", "k")
    assert p.returncode == 2 and "OPENAI_API_KEY is not set" in p.stderr and "sk-" not in p.stderr
