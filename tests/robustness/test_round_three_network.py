"""A remote LLM with no network, or a server that fails every call: `lab ask` and `lab run` stop
with exit code 2 and the fix when the first calls cannot connect, and exit with code 3 (the run
written) when every answer or every judgement failed; never an empty answer with exit code 0.
"No network" is a closed port on 127.0.0.1 (connection refused); the failing server is the fake
OpenAI-compatible one of tests/remote_server.py. `lab track` to a store it cannot write, or to a
server where nothing listens, exits 2 in seconds with the path or URL and the fix."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import time
from pathlib import Path

import pytest

from lab.cli import main
from lab.config import LLMConfig
from lab.models.llm import LabLLM, LLMCallError, LLMUnreachable
from lab.models.resolve import resolve_llm
from remote_server import remote, server  # noqa: F401  (the fixture)
from report_fixtures import ACC_A, MRR_A, write_run
from runs import latest

QUESTION = "Where is Brightwater Kilns?"
FIX = ("  fix: check the network and that the server is up (for OpenAI, a proxy in HTTPS_PROXY if you need one), "
       "or correct the base_url of the config's generation LLM; finished work is cached: run the same command "
       "again once the server answers")


def closed_port() -> int:
    """A local port where nothing listens: a connection to it is refused at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def llm_yaml(url: str, backend: str = "openai_compatible") -> str:
    model = "gpt-4.1-nano" if backend == "openai" else "fake"
    return (f"    backend: {backend}\n    base_url: {url}\n    model: {model}\n    api_key_env: LAB_TEST_KEY\n"
            "    max_retries: 1\n    timeout_s: 2\n    concurrency: 1\n    price_per_mtok: [0, 0]\n")


def experiment(project: Path, name: str, generation: str, judge: str | None = None) -> list[str]:
    """experiments/NAME.yaml over the fixture project with these LLM sections; the options that
    keep everything in the project."""
    judge_yaml = "judge: null\n" if judge is None else f"judge:\n  calibration: false\n  checks: 0\n  llm:\n{judge}"
    (project / "experiments" / f"{name}.yaml").write_text(
        f"schema_version: 1\nextends: small\ndescription: remote\ngeneration:\n  llm:\n{generation}{judge_yaml}")
    return ["--experiments", project / "experiments", "--cache", project / "cache"]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("LAB_TEST_KEY", "sk-test")


# --- the LLM: a connection refused before any call got through stops; after one, it is recorded --


def test_a_refused_first_call_stops_with_the_url_and_the_fix(tmp_path, key):
    url = f"http://127.0.0.1:{closed_port()}/v1"  # backend openai: no probe at start-up, as api.openai.com
    cfg = LLMConfig(backend="openai", model="gpt-4.1-nano", base_url=url, api_key_env="LAB_TEST_KEY", max_retries=1)
    llm = LabLLM(resolve_llm(cfg, "generation", tmp_path), None)
    with pytest.raises(LLMUnreachable) as exc:
        llm.chat([{"role": "user", "content": "hello"}], "p-v1")
    assert str(exc.value) == (
        f"generation LLM (openai gpt-4.1-nano at {url}): no connection after 1 retries "
        "(ConnectError: [Errno 111] Connection refused); stopped before any answer was recorded, "
        f"since every call would fail the same way\n{FIX}")
    assert exc.value.exit_code == 2
    t0 = time.perf_counter()  # the calls after it stop at once, without trying again
    with pytest.raises(LLMUnreachable):
        llm.chat([{"role": "user", "content": "another"}], "p-v1")
    assert time.perf_counter() - t0 < 0.1


def test_a_server_that_answered_once_and_then_went_away_is_a_recorded_failure(server, tmp_path, monkeypatch):  # noqa: F811
    s = server()
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=0, timeout_s=1.0)
    assert llm.chat([{"role": "user", "content": "hello"}], "p-v1").text == "echo: hello"
    s.close()
    s.httpd.server_close()
    with pytest.raises(LLMCallError, match=r"generation LLM \(tiny\) call failed after 0 retries: "
                                           r"APIConnectionError: Connection error\."):
        llm.chat([{"role": "user", "content": "again"}], "p-v1")


def test_a_server_error_is_not_a_lost_connection(server, tmp_path, monkeypatch):  # noqa: F811
    s = server([500] * 5)
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=1, timeout_s=1.0)
    with pytest.raises(LLMCallError, match="InternalServerError"):
        llm.chat([{"role": "user", "content": "hello"}], "p-v1")


# --- lab ask ---------------------------------------------------------------------------------------


def test_ask_with_no_network_exits_2_naming_the_url_and_the_fix(cli, project, key):
    url = f"http://127.0.0.1:{closed_port()}/v1"  # backend openai: no probe at start-up, as api.openai.com
    opts = experiment(project, "remote", llm_yaml(url, "openai"))
    code, out, err = cli("ask", "remote", QUESTION, *opts)
    assert code == 2
    assert out == ""
    assert err == (f"error: generation LLM (openai gpt-4.1-nano at {url}): no connection after 1 retries "
                   "(ConnectError: [Errno 111] Connection refused); stopped before any answer was "
                   f"recorded, since every call would fail the same way\n{FIX}\n")


def test_ask_shows_a_failed_answer_and_exits_3(cli, project, key, server):  # noqa: F811
    s = server([500] * 10)
    opts = experiment(project, "remote", llm_yaml(s.url))
    code, out, err = cli("ask", "remote", QUESTION, *opts)
    assert code == 3
    assert out.splitlines()[0] == "(no answer: the LLM call failed; the error is below)"
    assert err.startswith("error: 1 answer failed: generation LLM (fake) call failed after 1 retries: "
                          "InternalServerError: Error code: 500")
    assert err.endswith("\n  fix: fix the LLM or its server and ask again; answers that were made are cached\n")


# --- lab run -------------------------------------------------------------------------------------


def test_run_with_no_network_stops_at_the_first_answers_with_exit_2(cli, project, key):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    opts = experiment(project, "remote", llm_yaml(url, "openai"))
    t0 = time.perf_counter()
    code, out, err = cli("run", "remote", "--no-progress", "--reports", project / "reports", *opts)
    assert code == 2
    assert f"error: generation LLM (openai gpt-4.1-nano at {url}): no connection after 1 retries " in err
    assert err.endswith(f"{FIX}\n")
    assert not (project / "reports" / "remote").exists()  # nothing written that looks like a result
    assert time.perf_counter() - t0 < 60  # the index is built first; the calls stop within seconds


def test_run_in_which_every_answer_failed_is_written_and_exits_3(cli, project, key, server):  # noqa: F811
    s = server([500] * 100)  # a server that answers, with an error: each answer is recorded as failed
    opts = experiment(project, "remote", llm_yaml(s.url))
    code, out, err = cli("run", "remote", "--no-progress", "--reports", project / "reports", *opts)
    assert code == 3
    run = latest(project, "remote")
    results = json.loads((run / "results.json").read_text())
    assert results["answers"]["failed"] == results["answers"]["n"] == 6
    assert out.splitlines()[-1] == f"report: {run / 'report.html'}"
    last = err.split("error: ", 1)[1]
    assert last.startswith("every answer failed (6 of 6): generation LLM (fake) call failed after 1 retries: "
                           "InternalServerError: Error code: 500")
    assert last.endswith(f"\n  the run in {run} is kept, but its scores of that stage measure nothing\n"
                         "  fix: fix the LLM or its server (the error above) and run the same command again; "
                         "what succeeded is cached\n")


def test_run_in_which_every_judgement_failed_exits_3(cli, project, key, server):  # noqa: F811
    answers, judge = server(), server([500] * 100)
    opts = experiment(project, "remote", llm_yaml(answers.url), llm_yaml(judge.url))
    code, out, err = cli("run", "remote", "--no-progress", "--reports", project / "reports", *opts)
    assert code == 3
    results = json.loads((latest(project, "remote") / "results.json").read_text())
    assert results["answers"]["failed"] == 0 and results["judge"]["n_failed"] == 6
    assert "error: every judgement failed (6 of 6): " in err


def test_run_with_some_answers_failed_exits_0(cli, project, key, server):  # noqa: F811
    s = server([500, 500])  # the first answer fails (the call and its retry); the others are answered
    opts = experiment(project, "remote", llm_yaml(s.url))
    code, out, err = cli("run", "remote", "--no-progress", "--reports", project / "reports", *opts)
    assert code == 0, err
    results = json.loads((latest(project, "remote") / "results.json").read_text())
    assert results["answers"]["failed"] == 1 and results["answers"]["n"] == 6


# --- lab track: a store that cannot be written, a server where nothing listens ---------------------

needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                  reason="the mlflow extra is not installed")


@pytest.fixture
def finished(tmp_path) -> Path:
    """A finished run (tests/report_fixtures.py's run A) to log."""
    return write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder in which no file can be made: read-only for a user; /proc for root, whom
    permissions do not stop."""
    if os.geteuid() == 0:
        return Path("/proc")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


@needs_mlflow
def test_track_to_a_read_only_folder_exits_2_with_the_path_and_the_fix(cli, finished, tmp_path):
    folder = unwritable_folder(tmp_path)
    t0 = time.perf_counter()
    code, out, err = cli("track", finished, "--uri", f"sqlite:///{folder}/m.db")
    assert code == 2 and out == ""
    assert err == (f"error: MLflow store {folder}/m.db: unable to open database file\n"
                   "  fix: give --uri (or tracking.uri) another SQLite file, e.g. sqlite:///mlruns.db (the default, "
                   f"in the project root), or make {folder} writable\n")
    assert time.perf_counter() - t0 < 10  # MLflow alone retried for 100 s, then a traceback


@needs_mlflow
def test_track_to_a_folder_or_a_file_that_is_not_a_database_exits_2(cli, finished, tmp_path):
    (tmp_path / "dir.db").mkdir()
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    fix = ("  fix: give --uri (or tracking.uri) another SQLite file, e.g. sqlite:///mlruns.db (the default, in the "
           "project root)\n")
    assert cli("track", finished, "--uri", f"sqlite:///{tmp_path}/dir.db") == (
        2, "", f"error: MLflow store {tmp_path}/dir.db: is a folder, not a database file\n{fix}")
    assert cli("track", finished, "--uri", f"sqlite:///{tmp_path}/notes.db") == (
        2, "", f"error: MLflow store {tmp_path}/notes.db: file is not a database\n{fix}")


@needs_mlflow
def test_track_to_a_server_where_nothing_listens_fails_in_seconds(cli, finished, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    port = closed_port()
    t0 = time.perf_counter()
    code, out, err = cli("track", finished, "--uri", f"http://127.0.0.1:{port}")
    assert code == 2 and out == ""
    assert err == (f"error: MLflow tracking server at http://127.0.0.1:{port} does not answer (Connection refused; "
                   "waited at most 5 s)\n"
                   f"  fix: start it (mlflow server --host 127.0.0.1 --port {port}), or give another store with --uri, "
                   "tracking.uri or MLFLOW_TRACKING_URI (sqlite:///mlruns.db needs no server)\n")
    assert time.perf_counter() - t0 < 10  # MLflow alone retried for about 4 minutes


@needs_mlflow
def test_run_with_track_to_an_unusable_store_stops_before_the_run(cli, tmp_path, monkeypatch):
    """`lab run --track` checks the store first: nothing is run, nothing is written."""
    (tmp_path / "dir.db").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/dir.db")
    reports = tmp_path / "reports"
    fixtures = Path(__file__).parents[1] / "fixtures"
    code, out, err = cli("run", "small-retrieval", "--experiments", fixtures / "experiments", "--reports", reports,
                         "--cache", tmp_path / "cache", "--track")
    assert code == 2 and out == ""
    assert err.startswith(f"error: MLflow store {tmp_path}/dir.db: is a folder, not a database file\n")
    assert not reports.exists() and not (tmp_path / "cache").exists()
