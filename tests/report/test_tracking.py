"""MLflow tracking (lab.report.tracking, `lab track`, `lab run --track`): a hand-made run
(tests/report_fixtures.py's run A) logged to a real MLflow SQLite store in a temporary folder and
read back through MLflow's own client; idempotence; and the lab without the mlflow extra."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest

from lab.cli import main
from lab.errors import LabError
from lab.report import tracking as tr
from lab.stats.paired import bootstrap_ci
from report_fixtures import ACC_A, MRR_A, write_run
from runs import ROOT

needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                  reason="the mlflow extra is not installed")
RUN_ID = "20261122-100000"
LONG = "x" * 7000
CONFIG = {"name": "base", "description": "fixture",
          "data": {"knowledge_base": "kb", "categories": ["direct_fact", "temporal"], "labels": None},
          "retriever": {"name": "vector", "top_k": 4},
          "generation": {"llm": {"model": "qwen2.5-coder-1.5b-instruct", "temperature": 0.0}},
          "report": {"thresholds": {}}, "tracking": None, "note": LONG}


@pytest.fixture
def run(tmp_path) -> Path:
    """Run A with a nested config (one value over MLflow's 6,000 characters) and the files a run
    has beside results.json and samples.jsonl."""
    folder = write_run(tmp_path / "reports", "base", RUN_ID, MRR_A, ACC_A, "A")
    results = json.loads((folder / "results.json").read_text())
    results["config"] = CONFIG
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "report.html").write_text("<html>report</html>")
    (folder / "config.yaml").write_text("name: base\n")
    return folder


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """One SQLite store for the module (creating one runs MLflow's migrations: seconds); each
    test logs to its own experiment."""
    return tmp_path_factory.mktemp("store") / "mlflow.db"


def _client(uri: str):
    import mlflow  # heavy: only in the tests that need it

    return mlflow.tracking.MlflowClient(tracking_uri=uri)


def _only_run(uri: str, experiment: str):
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return client, runs[0]


# --------------------------------------------------------------------------------------------
# pure: keys, params, URIs


@pytest.mark.parametrize("parts, expected", [
    (("retriever", "top_k"), "retriever.top_k"),                # already safe: as it is
    (("direct_fact", "mrr", "ci_low"), "direct_fact.mrr.ci_low"),
    (("multi hop", "mrr"), "multi hop.mrr"),                    # spaces are allowed
])
def test_safe_keys_stay_as_they_are(parts, expected):
    assert tr.key(*parts) == expected


def test_unsafe_keys_are_cleaned_and_keep_a_hash_of_the_original():
    a, b = tr.key("what?", "mrr"), tr.key("what!", "mrr")
    assert a.startswith("what_.mrr-") and b.startswith("what_.mrr-") and a != b  # never the same key
    assert tr.key("..hidden", "mrr").startswith("_..hidden.mrr-")              # MLflow reads keys as paths
    long = tr.key("c" * 300, "mrr")
    assert len(long) == tr.KEY_MAX and long.startswith("c" * 200)


def test_flatten_dots_nested_keys_and_writes_the_rest_as_json():
    flat = tr.flatten(CONFIG)
    assert flat["retriever.top_k"] == "4"
    assert flat["generation.llm.model"] == "qwen2.5-coder-1.5b-instruct"
    assert flat["generation.llm.temperature"] == "0.0"
    assert flat["data.categories"] == '["direct_fact", "temporal"]'
    assert flat["data.labels"] == "null" and flat["tracking"] == "null" and flat["report.thresholds"] == "{}"
    note = flat["note"]
    assert len(note) == tr.PARAM_VALUE_MAX and note.endswith("... [cut: 7000 characters; see config.yaml]")


def test_uri_precedence_and_relative_sqlite(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tr.resolve_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlruns.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tr.resolve_uri(None, tmp_path) == "http://127.0.0.1:5000"
    assert tr.resolve_uri("sqlite:///t/x.db", tmp_path) == f"sqlite:///{tmp_path.resolve()}/t/x.db"
    assert tr.resolve_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(LabError, match="file store") as exc:
        tr.resolve_uri("./mlruns", tmp_path)
    assert "sqlite:///mlruns.db" in exc.value.hint
    assert tr.shown_uri("https://me:secret@mlflow.example:8443/x") == "https://me:***@mlflow.example:8443/x"


# --------------------------------------------------------------------------------------------
# the round trip through a real MLflow store


@needs_mlflow
def test_a_run_reads_back_from_mlflow_with_its_values(run, store, tmp_path):
    uri = f"sqlite:///{store}"
    out = tr.log_run(run, uri)
    assert (out.uri, out.experiment, out.skipped) == (uri, "base", False)
    client, r = _only_run(uri, "base")
    assert r.info.run_id == out.mlflow_run_id and r.info.status == "FINISHED"
    start = int(datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp() * 1000)  # created_at
    assert (r.info.start_time, r.info.end_time) == (start, start + 55_000)              # + total_s
    p, m, t = r.data.params, r.data.metrics, r.data.tags
    assert p["retriever.top_k"] == "4" and p["generation.llm.model"] == "qwen2.5-coder-1.5b-instruct"
    assert len(p["note"]) == 6000
    # MRR of run A: 8.75 / 15 overall, 7.25 / 12 direct_fact, 1.5 / 3 temporal; the interval is
    # the report's (same bootstrap, same seed)
    assert m["mrr"] == pytest.approx(8.75 / 15, abs=1e-12)
    lo, hi = bootstrap_ci(MRR_A)
    assert (m["mrr.ci_low"], m["mrr.ci_high"]) == (lo, hi) and lo < m["mrr"] < hi
    assert m["direct_fact.mrr"] == pytest.approx(7.25 / 12, abs=1e-12)
    assert (m["direct_fact.mrr.ci_low"], m["direct_fact.mrr.ci_high"]) == bootstrap_ci(MRR_A[:12])
    assert m["temporal.mrr"] == 0.5 and m["temporal.n_questions"] == 3 and m["n_questions"] == 15
    judged = [a for a in ACC_A if a is not None]                # the failed judgement is left out
    assert m["accuracy"] == pytest.approx(sum(judged) / len(judged), abs=1e-12)
    assert m["time.total_s"] == 55.0 and m["time.judge_s"] == 30.0
    assert m["llm.generation.prompt_tokens"] == 1500 and m["tokens.completion"] == 150 and m["cost_usd"] == 0.0
    assert m["judge.n_failed"] == 1 and m["count.embeddings_computed"] == 0
    assert t["lab.run"] == f"base/{RUN_ID}" and t["lab.run_id"] == RUN_ID and t["lab.experiment"] == "base"
    assert t["lab.config_fingerprint"] == "basebase" and t["lab.eval_sha256"] == "e" * 64
    assert t["mlflow.source.git.commit"] == "0" * 40 and t["lab.sample"] == "all 15"
    assert t["lab.retrieval_only"] == "false" and t["mlflow.runName"] == f"base-{RUN_ID}"
    assert sorted(a.path for a in client.list_artifacts(r.info.run_id)) == [
        "config.yaml", "report.html", "results.json", "samples.jsonl"]
    local = Path(client.download_artifacts(r.info.run_id, "results.json", str(tmp_path)))
    assert json.loads(local.read_text())["run_id"] == RUN_ID
    # artifacts sit beside the database, under the experiment's name
    assert (store.parent / "mlartifacts" / "base" / r.info.run_id / "artifacts" / "report.html").is_file()


@needs_mlflow
def test_logging_twice_skips_and_an_interrupted_logging_is_replaced(run, store):
    uri = f"sqlite:///{store}"
    first = tr.log_run(run, uri, "shared")
    again = tr.log_run(run, uri, "shared")
    assert again.skipped and again.mlflow_run_id == first.mlflow_run_id
    client, _ = _only_run(uri, "shared")
    # a logging killed half-way leaves a RUNNING run with the tag: it is deleted and logged again
    client.delete_run(first.mlflow_run_id)
    exp = client.get_experiment_by_name("shared")
    half = client.create_run(exp.experiment_id, tags={tr.RUN_TAG: f"base/{RUN_ID}", "lab.run_id": RUN_ID})
    redo = tr.log_run(run, uri, "shared")
    assert not redo.skipped and redo.mlflow_run_id != half.info.run_id
    _, r = _only_run(uri, "shared")
    assert r.info.run_id == redo.mlflow_run_id and r.data.metrics["mrr"] == pytest.approx(8.75 / 15)
    assert client.get_run(half.info.run_id).info.lifecycle_stage == "deleted"


@needs_mlflow
def test_lab_track_prints_one_line_per_run(run, store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    reports = str(tmp_path / "reports")
    assert main(["track", "base", "--reports", reports, "--experiment", "cli"]) == 0
    assert main(["track", str(run), "--reports", reports, "--experiment", "cli"]) == 0
    lines = capsys.readouterr().out.splitlines()
    _, r = _only_run(f"sqlite:///{store}", "cli")
    assert lines == [
        f"mlflow: logged base/{RUN_ID} to sqlite:///{store}, experiment 'cli', MLflow run {r.info.run_id}",
        f"mlflow: base/{RUN_ID} is logged already (sqlite:///{store}, experiment 'cli', "
        f"MLflow run {r.info.run_id}): skipped"]


# --------------------------------------------------------------------------------------------
# `lab run`: tracked from the config's section; without the extra, untouched or refused up front


@pytest.fixture
def fake_runner(monkeypatch, run):
    """lab.eval.runner standing in for the real one: "running" returns run A's folder, and the
    calls are counted (no model is loaded)."""
    calls = []
    fake = types.ModuleType("lab.eval.runner")
    fake.RunOptions = lambda **kw: kw
    fake.run_experiment = lambda cfg, opts: calls.append(cfg.name) or run
    monkeypatch.setitem(sys.modules, "lab.eval.runner", fake)
    return calls


def _experiments(project: Path, tracking: str = "") -> list[str]:
    (project / "experiments" / "tracked.yaml").write_text(
        f"schema_version: 1\nextends: small-retrieval\ndescription: tracked\n{tracking}")
    return ["--experiments", str(project / "experiments"), "--cache", str(project / "cache"), "--no-progress"]


@needs_mlflow
def test_lab_run_logs_where_the_config_says(project, fake_runner, store, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # the config's uri wins over it
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")       # (were it used, fail fast)
    opts = _experiments(project, f"tracking:\n  uri: sqlite:///{store}\n  experiment: from-config\n")
    assert main(["run", "tracked", *opts]) == 0
    assert fake_runner == ["tracked"]
    last = capsys.readouterr().out.splitlines()[-1]
    _, r = _only_run(f"sqlite:///{store}", "from-config")
    assert last == (f"mlflow: logged base/{RUN_ID} to sqlite:///{store}, experiment 'from-config', "
                    f"MLflow run {r.info.run_id}")


@pytest.fixture
def no_mlflow(monkeypatch):
    """The lab without the extra: `import mlflow` fails."""
    monkeypatch.setitem(sys.modules, "mlflow", None)


def test_without_the_extra_tracking_fails_before_running_with_the_fix(project, fake_runner, no_mlflow, run, capsys):
    with pytest.raises(LabError) as exc:
        tr.import_mlflow()
    assert exc.value.exit_code == 2 and "pip install '.[mlflow]'" in exc.value.hint
    opts = _experiments(project, "tracking:\n  experiment: x\n")
    assert main(["run", "small-retrieval", "--track", *opts]) == 2
    assert main(["run", "tracked", *opts]) == 2                 # a tracking: section asks the same
    assert fake_runner == []                                   # nothing ran
    err = capsys.readouterr().err
    assert err.count("error: MLflow tracking needs the mlflow extra") == 2 and "fix: pip install '.[mlflow]'" in err
    assert main(["track", str(run)]) == 2
    assert "fix: pip install '.[mlflow]'" in capsys.readouterr().err


def test_without_the_extra_untracked_runs_and_other_verbs_are_unchanged(project, fake_runner, no_mlflow, run,
                                                                         capsys):
    assert main(["run", "small-retrieval", *_experiments(project)]) == 0
    assert fake_runner == ["small-retrieval"]
    assert main(["show", str(run)]) == 0
    assert main(["list", "--experiments", str(project / "experiments")]) == 0
    assert "report:" in capsys.readouterr().out


def test_the_cli_imports_no_mlflow():
    """In a fresh interpreter: building the parser and parsing a tracking command import no mlflow."""
    code = ("import sys; from lab.cli import build_parser; build_parser().parse_args(['track', 'x']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mlflow'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


@needs_mlflow
def test_mlflow_telemetry_is_off_for_the_lab(monkeypatch):
    """MLflow turns telemetry off by itself under pytest or CI; here that guess is undone, so only
    the variables the lab sets (before importing mlflow) can turn it off."""
    monkeypatch.delenv("MLFLOW_DISABLE_TELEMETRY", raising=False)
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    tr.import_mlflow()
    from mlflow.telemetry import utils

    monkeypatch.setattr(utils, "_IS_IN_CI_ENV_OR_TESTING", False)
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true" and utils.is_telemetry_disabled()
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    monkeypatch.setenv("DO_NOT_TRACK", "false")
    assert not utils.is_telemetry_disabled()  # the check itself can fail


def test_the_loss_funnels_counts_are_metrics(tmp_path):
    results = json.loads((write_run(tmp_path, "f", "20261126-100000", MRR_A, ACC_A, "A")
                          / "results.json").read_text())
    results["funnel"] = {"stages": ["kb", "first_stage"], "n": 15, "overall": {"n": 15, "lost": {"kb": 1, "first_stage": 4},
                                                                              "kept": 10}, "by_category": {}}
    m = tr.metrics(results, [])
    assert (m["funnel.lost.kb"], m["funnel.lost.first_stage"], m["funnel.kept"]) == (1.0, 4.0, 10.0)
    del results["funnel"]
    assert not any(k.startswith("funnel.") for k in tr.metrics(results, []))  # older runs: no such metric
