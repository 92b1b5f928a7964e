"""A finished run in MLflow: one lab run becomes one MLflow run, read from the run's files alone.

What is logged, under which names (``lab track`` and ``lab run --track`` both come here):

- params: the resolved config (``results.json``'s ``config``), flattened to dotted keys
  (``retriever.top_k``, ``generation.llm.model``); lists and nulls as JSON, values cut at
  MLflow's 6,000 characters (the whole config is the ``config.yaml`` artifact);
- metrics (step 0, timestamped at the run's end): every metric's overall mean ``mrr`` and its
  95% bootstrap interval ``mrr.ci_low``/``mrr.ci_high`` (the report's intervals: same seed),
  the same per category ``direct_fact.mrr``, ``direct_fact.mrr.ci_low``, ...; ``n_questions``
  and ``<category>.n_questions``; timings ``time.<stage>_s``; LLM usage per role
  ``llm.<role>.prompt_tokens`` (and completion_tokens, calls, cached, failed, seconds,
  cost_usd), the totals ``tokens.prompt``, ``tokens.completion`` and ``cost_usd``; counters
  ``count.<name>``; answer and judge counts ``answers.<field>``, ``judge.<field>``; the loss funnel
  ``funnel.lost.<stage>`` and ``funnel.kept`` (questions);
- tags: ``lab.run`` (``NAME/RUN-ID``, the key that makes logging idempotent), ``lab.run_id``,
  ``lab.experiment``, ``lab.config_fingerprint``, ``lab.eval_sha256``, ``lab.corpus_sha256``,
  ``lab.git_commit`` (also ``mlflow.source.git.commit``), ``lab.git_dirty``, ``lab.sample``,
  ``lab.retrieval_only``, ``lab.run_dir``, ``lab.version``; the description as the MLflow run's
  note;
- artifacts: ``report.html``, ``results.json``, ``samples.jsonl``, ``config.yaml``.

Keys are made safe for MLflow (letters, digits, ``_ - . /`` and spaces; at most 250 characters):
other characters become ``_``, and a key that was altered or cut keeps a short hash of the
original. A run already logged (an active MLflow run with the same ``lab.run`` tag in the
experiment, finished) is skipped, never duplicated; an unfinished one (a logging that was
interrupted) is deleted and logged again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lab.errors import LabError
from lab.paths import safe_name
from lab.report.mlflow_store import DEFAULT_DB, check_store, shown_uri
from lab.runfiles import load_run, values
from lab.stats.paired import bootstrap_ci

log = logging.getLogger(__name__)

INSTALL_HINT = ("pip install '.[mlflow]' in the lab's folder (or drop --track and the config's tracking: "
                "section)")
#: Artifacts of a local SQLite store, beside the database file: ``mlartifacts/<experiment>/``.
ARTIFACT_DIR = "mlartifacts"
ARTIFACTS = ("report.html", "results.json", "samples.jsonl", "config.yaml")
RUN_TAG = "lab.run"
# MLflow's limits (mlflow.utils.validation): key length, param and tag value length, batch sizes.
KEY_MAX = 250
PARAM_VALUE_MAX = 6000
TAG_VALUE_MAX = 8000
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
#: Characters MLflow accepts in a param or metric name on every platform (no ``:`` on Windows).
_BAD_KEY_CHARS = re.compile(r"[^\w.\- /]", re.ASCII)
USAGE_FIELDS = ("calls", "cached", "failed", "prompt_tokens", "completion_tokens", "seconds", "cost_usd")
COUNT_SECTIONS = ("answers", "judge")


@dataclass(frozen=True)
class Logged:
    """Where a run went: the store (password masked), MLflow experiment and run id, and whether
    the run was there already (``skipped``)."""

    uri: str
    experiment: str
    experiment_id: str
    mlflow_run_id: str
    skipped: bool
    url: str | None = None  # the run's page, when the store is a tracking server


# ---------------------------------------------------------------------------------------------
# MLflow itself: imported on use, quiet, offline


def import_mlflow() -> Any:
    """``mlflow``, imported now (seconds: deferred to the verbs that track) with its telemetry off
    (``MLFLOW_DISABLE_TELEMETRY``/``DO_NOT_TRACK`` are read when mlflow is imported; an explicit
    setting of the user's is kept) and its INFO chatter (database creation, "View run" links)
    silenced. Without the ``mlflow`` extra: a LabError that says how to install it."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    try:
        import mlflow  # heavy (seconds): only when a run is tracked
    except ImportError as exc:
        raise LabError(f"MLflow tracking needs the mlflow extra, which is not installed here ({exc})",
                       hint=INSTALL_HINT) from None
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


def default_uri(project_root: Path) -> str:
    return f"sqlite:///{(project_root / DEFAULT_DB).resolve()}"


def resolve_uri(uri: str | None, project_root: Path) -> str:
    """The store to log to: ``uri`` (from --uri or the config), else ``$MLFLOW_TRACKING_URI``, else
    ``sqlite:///<project root>/mlruns.db``. A relative SQLite path is taken from the project root,
    as every path in a config is. A file store (a bare path or ``file:``) is refused up front, as
    MLflow 3 refuses it, unless MLFLOW_ALLOW_FILE_STORE is set."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or default_uri(project_root)
    scheme = urlsplit(uri).scheme
    if scheme == "sqlite" and uri.startswith("sqlite:///"):
        path, sep, query = uri[len("sqlite:///"):].partition("?")
        if path and not Path(path).is_absolute() and path != ":memory:":
            uri = f"sqlite:///{(project_root / path).resolve()}{sep}{query}"
    elif scheme in ("", "file") and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
        raise LabError(f"tracking URI {uri!r} is an MLflow file store, which MLflow 3 no longer opens",
                       hint=f"use a SQLite store (sqlite:///{DEFAULT_DB}, the default) or a tracking server "
                            "(http://host:5000); to keep a file store set MLFLOW_ALLOW_FILE_STORE=true")
    return uri


def _artifact_location(uri: str, experiment: str) -> str | None:
    """Beside a local SQLite file; elsewhere the store's own choice (a server's artifact root)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].partition("?")[0]
    if path == ":memory:":
        return None
    return (Path(path).parent / ARTIFACT_DIR / safe_name(experiment)).as_uri()


# ---------------------------------------------------------------------------------------------
# What a run's files become


def key(*parts: str) -> str:
    """An MLflow param/metric key from dotted parts: characters MLflow refuses become ``_``, no
    part starts with ``.`` (MLflow reads keys as paths); an altered or over-long key keeps a hash
    of the original so that two names never meet."""
    original = ".".join(parts)
    clean = ".".join("_" + p if p.startswith(".") else p for p in (_BAD_KEY_CHARS.sub("_", p) for p in parts))
    if clean == original and len(clean) <= KEY_MAX:
        return clean
    tag = hashlib.sha256(original.encode()).hexdigest()[:8]
    return f"{clean[:KEY_MAX - 9]}-{tag}"


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > PARAM_VALUE_MAX:
        marker = f"... [cut: {len(text)} characters; see config.yaml]"
        text = text[:PARAM_VALUE_MAX - len(marker)] + marker
    return text


def flatten(tree: dict, prefix: tuple[str, ...] = ()) -> dict[str, str]:
    """A nested config as ``{dotted.key: text}``: dicts are walked (an empty one is ``{}``), every
    other value is one param (strings as they are, the rest as JSON: ``null``, ``true``, ``[...]``)."""
    out: dict[str, str] = {}
    for name, value in tree.items():
        path = (*prefix, str(name))
        if isinstance(value, dict) and value:
            out.update(flatten(value, path))
        else:
            out[key(*path)] = _param_value(value)
    return out


def params(results: dict) -> dict[str, str]:
    return flatten(results.get("config") or {})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _metric_cells(out: dict, prefix: tuple[str, ...], row: dict, samples: list[dict], category: str | None) -> None:
    for metric, cell in row.items():
        if not isinstance(cell, dict) or _number(cell.get("mean")) is None:
            continue
        out[key(*prefix, metric)] = float(cell["mean"])
        ci = bootstrap_ci(values(samples, metric, category)) if samples else None
        if ci is not None:
            out[key(*prefix, metric, "ci_low")], out[key(*prefix, metric, "ci_high")] = ci


def metrics(results: dict, samples: list[dict]) -> dict[str, float]:
    """Every number worth a chart, by the names in this module's docstring."""
    m = results["metrics"]
    out: dict[str, float] = {"n_questions": float(results["sample"]["n_questions"])}
    _metric_cells(out, (), m["overall"], samples, None)
    for cat, row in m["by_category"].items():
        out[key(cat, "n_questions")] = float(row["n"])
        _metric_cells(out, (cat,), row, samples, cat)
    for stage, seconds in (results.get("timings") or {}).items():
        if _number(seconds) is not None:
            out[key("time", stage)] = float(seconds)
    usage = results.get("llm_usage") or {}
    for role, u in usage.items():
        out.update({key("llm", role, f): float(u[f]) for f in USAGE_FIELDS if _number(u.get(f)) is not None})
    if usage:
        out["tokens.prompt"] = float(sum(u.get("prompt_tokens") or 0 for u in usage.values()))
        out["tokens.completion"] = float(sum(u.get("completion_tokens") or 0 for u in usage.values()))
    if _number(results.get("cost_usd")) is not None:
        out["cost_usd"] = float(results["cost_usd"])
    for name, n in (results.get("counters") or {}).items():
        if _number(n) is not None:
            out[key("count", name)] = float(n)
    for section in COUNT_SECTIONS:
        for name, n in (results.get(section) or {}).items():
            if _number(n) is not None:
                out[key(section, name)] = float(n)
    funnel = results.get("funnel")  # the loss funnel: questions lost at each stage, and kept
    if isinstance(funnel, dict) and funnel.get("n"):
        overall = funnel["overall"]
        for stage, n in overall["lost"].items():
            out[key("funnel", "lost", stage)] = float(n)
        out[key("funnel", "kept")] = float(overall["kept"])
    return out


def run_key(results: dict) -> str:
    """The identity of a lab run in MLflow: ``NAME/RUN-ID``."""
    return f"{results['name']}/{results['run_id']}"


def tags(results: dict, run_dir: Path) -> dict[str, str]:
    env = results.get("environment") or {}
    data = results.get("data") or {}
    sample = results["sample"]
    config = results.get("config") or {}
    out = {
        RUN_TAG: run_key(results),
        "lab.run_id": str(results["run_id"]),
        "lab.experiment": results["name"],
        "lab.config_fingerprint": str(results.get("config_fingerprint")),
        "lab.eval_sha256": str(data.get("eval_sha256")),
        "lab.corpus_sha256": str(data.get("corpus_sha256")),
        "lab.git_commit": str(env.get("git_commit")),
        "lab.git_dirty": json.dumps(env.get("git_dirty")),
        "lab.sample": (f"{sample['n_questions']} of {sample['n_total']} (seed {sample.get('seed')})"
                       if sample.get("is_sample") else f"all {sample['n_total']}"),
        "lab.retrieval_only": json.dumps(config.get("generation", {}) is None),
        "lab.run_dir": str(run_dir.resolve()),
        "lab.version": str(env.get("lab")),
        "mlflow.note.content": results.get("description") or "",
    }
    if env.get("git_commit"):
        out["mlflow.source.git.commit"] = env["git_commit"]
    return {k: v[:TAG_VALUE_MAX] for k, v in out.items()}


def _millis(results: dict) -> tuple[int | None, int | None]:
    """The run's start (``created_at``) and end (start + total time), in ms since the epoch."""
    try:
        start = datetime.strptime(results["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (KeyError, TypeError, ValueError):
        return None, None
    start_ms = int(start.timestamp() * 1000)
    return start_ms, start_ms + int(1000 * ((results.get("timings") or {}).get("total_s") or 0))


# ---------------------------------------------------------------------------------------------
# The logging


def log_run(run_dir: Path, uri: str, experiment: str | None = None) -> Logged:
    """Log the run in ``run_dir`` to the MLflow store at ``uri`` (see :func:`resolve_uri`), in the
    MLflow experiment ``experiment`` (default: the lab experiment's name), unless it is there."""
    mlflow = import_mlflow()
    from mlflow.entities import Metric, Param  # part of mlflow (imported above)
    from mlflow.exceptions import MlflowException

    results, samples = load_run(run_dir)  # samples where there are (the intervals need them)
    experiment = experiment or results["name"]
    where = shown_uri(uri)
    check_store(uri)  # seconds, where MLflow would retry for minutes
    try:
        client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        exp_id = _experiment_id(client, experiment, uri, where)
        found = _find(client, exp_id, results)
        if found is not None:
            log.debug("%s is in %s already (MLflow run %s): skipped", run_key(results), where, found)
            return Logged(where, experiment, exp_id, found, True, _url(uri, exp_id, found))
        start_ms, end_ms = _millis(results)
        run = client.create_run(exp_id, start_time=start_ms, tags=tags(results, run_dir),
                                run_name=f"{results['name']}-{results['run_id']}")
        rid = run.info.run_id
        try:
            stamp = end_ms or run.info.start_time
            ps = [Param(k, v) for k, v in params(results).items()]
            ms = [Metric(k, v, stamp, 0) for k, v in metrics(results, samples).items()]
            for i in range(0, len(ps), PARAMS_PER_BATCH):
                client.log_batch(rid, params=ps[i:i + PARAMS_PER_BATCH])
            for i in range(0, len(ms), METRICS_PER_BATCH - PARAMS_PER_BATCH):
                client.log_batch(rid, metrics=ms[i:i + METRICS_PER_BATCH - PARAMS_PER_BATCH])
            for name in ARTIFACTS:
                if (run_dir / name).is_file():
                    client.log_artifact(rid, str(run_dir / name))
        except BaseException:
            client.set_terminated(rid, "FAILED")
            raise
        client.set_terminated(rid, "FINISHED", end_time=end_ms)
    except MlflowException as exc:
        raise LabError(f"MLflow at {where}: {exc.message}",
                       hint="check the tracking URI (--uri, tracking.uri or MLFLOW_TRACKING_URI) and that "
                            "the server is up") from None
    except Exception as exc:  # the database under a SQLite store, beyond what check_store saw
        if not type(exc).__module__.startswith("sqlalchemy"):
            raise
        raise LabError(f"MLflow store {where}: {str(exc).splitlines()[0]}",
                       hint="check the tracking URI (--uri, tracking.uri or MLFLOW_TRACKING_URI) and that its "
                            "file and folder can be written") from None
    return Logged(where, experiment, exp_id, rid, False, _url(uri, exp_id, rid))


def _experiment_id(client: Any, name: str, uri: str, where: str) -> str:
    from mlflow.exceptions import MlflowException  # part of mlflow (imported by the caller)

    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, artifact_location=_artifact_location(uri, name),
                                            tags={"lab.created_by": "lab"})
        except MlflowException:  # made meanwhile by another process
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage == "deleted":
        raise LabError(f"MLflow experiment {name!r} in {where} is deleted",
                       hint=f"restore it (mlflow experiments restore --experiment-id {exp.experiment_id}) or "
                            "log to another: --experiment NAME")
    return exp.experiment_id


def _find(client: Any, exp_id: str, results: dict) -> str | None:
    """The MLflow run id of this lab run if it is logged (finished) in the experiment; an
    unfinished one, from an interrupted logging, is deleted."""
    runs = client.search_runs([exp_id], filter_string=f"tags.`lab.run_id` = '{results['run_id']}'")
    mine = [r for r in runs if r.data.tags.get(RUN_TAG) == run_key(results)]
    done = [r for r in mine if r.info.status == "FINISHED"]
    for r in mine:
        if r.info.status != "FINISHED":
            log.info("deleting MLflow run %s (an interrupted logging of %s)", r.info.run_id, run_key(results))
            client.delete_run(r.info.run_id)
    return done[0].info.run_id if done else None


def _url(uri: str, exp_id: str, run_id: str) -> str | None:
    if urlsplit(uri).scheme not in ("http", "https"):
        return None
    return f"{shown_uri(uri).rstrip('/')}/#/experiments/{exp_id}/runs/{run_id}"
