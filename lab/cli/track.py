"""MLflow tracking: ``lab track RUN...`` logs finished runs; ``lab run --track`` (or a config's
``tracking:`` section) logs a run as it finishes. Needs the ``mlflow`` extra; without it nothing
here imports mlflow until tracking is asked for (lab.report.tracking imports it on use)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.errors import LabError
from lab.report import tracking as tr
from lab.report.mlflow_store import check_store
from lab.report.latest import choose_run
from lab.runfiles import read_results


def add_parsers(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        "track", help="log finished runs to MLflow: config as params, metrics with 95%% intervals, report",
        description="Log each RUN as one MLflow run: the resolved config as params (dotted keys), every metric "
                    "overall and per category with its 95% bootstrap interval (mrr, mrr.ci_low, mrr.ci_high, "
                    "direct_fact.mrr, ...), timings, token counts and cost as metrics, the run id, config "
                    "fingerprint, eval-set hash and git commit as tags, and report.html, results.json, "
                    "samples.jsonl and config.yaml as artifacts. A run already logged to the experiment is "
                    "skipped (found by its lab.run tag). Needs the mlflow extra: pip install '.[mlflow]'. "
                    "`lab run NAME --track` (or a tracking: section in the config) does the same as a run ends.",
        epilog="example: lab track turn13 turn18 --experiment company-kb")
    p.add_argument("runs", nargs="+", metavar="RUN", help="an experiment NAME (its latest run) or a run folder")
    p.add_argument("--uri", help="MLflow tracking URI: a server (http://host:5000) or sqlite:///FILE.db (relative to "
                                 "the project root); default: the run's tracking.uri, else $MLFLOW_TRACKING_URI, "
                                 f"else sqlite:///{tr.DEFAULT_DB} in the project root")
    p.add_argument("--experiment", metavar="NAME",
                   help="MLflow experiment (default: the run's tracking.experiment, else its lab experiment name)")
    options.reports(p)
    common(p)


def _project_root(args: argparse.Namespace) -> Path:
    return args.experiments.resolve().parent


def _destination(args: argparse.Namespace, tracking: dict | None) -> tuple[str, str | None]:
    """(URI, MLflow experiment or None): the command line, else the config's tracking section,
    else the environment and the defaults (lab.report.tracking.resolve_uri)."""
    tracking = tracking or {}
    uri = getattr(args, "uri", None) or tracking.get("uri")
    return tr.resolve_uri(uri, _project_root(args)), getattr(args, "experiment", None) or tracking.get("experiment")


def _line(run: str, out: tr.Logged) -> str:
    where = out.url or f"{out.uri}, experiment {out.experiment!r}"
    if out.skipped:
        return f"mlflow: {run} is logged already ({where}, MLflow run {out.mlflow_run_id}): skipped"
    return f"mlflow: logged {run} to {where}, MLflow run {out.mlflow_run_id}"


def _tracking_dict(tracking: Any) -> dict | None:
    if tracking is None or isinstance(tracking, dict):
        return tracking
    return tracking.model_dump()


def require(args: argparse.Namespace, cfg: Any) -> None:
    """Before ``lab run`` runs anything: when tracking is asked for (``--track`` or a
    ``tracking:`` section), mlflow must import and the store's URI must be one MLflow opens and
    can write to (checked in seconds, so a run is not made only to find its store unusable)."""
    if getattr(args, "track", False) or cfg.tracking is not None:
        tr.import_mlflow()
        check_store(_destination(args, _tracking_dict(cfg.tracking))[0])


def after_run(args: argparse.Namespace, run_dir: Path, tracking: Any) -> None:
    """Called by ``lab run`` after a run is written, when ``--track`` is given or the config has a
    ``tracking:`` section (``tracking`` is that section, or None)."""
    uri, experiment = _destination(args, _tracking_dict(tracking))
    try:
        out = tr.log_run(run_dir, uri, experiment)
    except LabError as exc:
        raise LabError(f"the run is complete in {run_dir}, but logging it to MLflow failed: {exc.message}",
                       hint=f"{exc.hint + '; then ' if exc.hint else ''}log it with: lab track {run_dir}") from None
    print(_line(f"{run_dir.parent.name}/{run_dir.name}", out))


def cmd_track(args: argparse.Namespace) -> int:
    tr.import_mlflow()  # fails first, with the fix, when the extra is missing
    chosen = [choose_run(ref, args.reports) for ref in args.runs]  # a NAME: its latest full run
    for note in (c.note for c in chosen if c.note):
        print(f"note: {note}")
    folders = [c.folder for c in chosen]
    for folder in folders:
        config = read_results(folder).get("config") or {}
        uri, experiment = _destination(args, config.get("tracking"))
        print(_line(f"{folder.parent.name}/{folder.name}", tr.log_run(folder, uri, experiment)))
    return 0


COMMANDS = {"track": cmd_track}
