"""Every run under a reports folder, as the served runs table lists it, and the runs in progress.

A run is a folder ``<reports>/<NAME>/<run-id>/`` holding ``results.json`` (dot folders are runs
being written: :func:`lab.eval.records.write_run` renames a finished one into place, so a run is
never seen half-written). Its row is read from ``results.json`` and ``samples.jsonl`` once and
kept until ``results.json`` changes (size and modification time): a table of a thousand runs is
then a directory listing and a ``stat`` per run.

The headline intervals are the run page's: a percentile bootstrap of the mean over questions
(:func:`lab.stats.paired.bootstrap_ci`, 2,000 resamples, seeded).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.faults import pid_alive
from lab.metrics import catalog
from lab.report.html import judge_method
from lab.report.latest import is_sample
from lab.runfiles import RUNNING_GLOB, load_run, read_running, values
from lab.stats.paired import bootstrap_ci

#: The metrics the runs table shows, where a run has them (the catalogue's "runs" view).
HEADLINE = catalog.names(view="runs")
#: What a run's or an experiment's folder name may be in an address (what lab.paths.safe_name writes).
SAFE = re.compile(r"[A-Za-z0-9_@-][A-Za-z0-9_.@-]*")
#: A status file not replaced for this long, of a process on another host, is taken for a dead run.
STALE_S = 600


def run_key(results: dict) -> str:
    """How the server names a run: ``<name>/<run id>`` (what a labels file calls it too)."""
    return f"{results['name']}/{results['run_id']}"


def _short_kb(path: str | None) -> str:
    return "/".join(str(path or "").replace("\\", "/").split("/")[-2:])


def summarise(folder: Path, rel: str) -> dict:
    """A run's row (see the module): raises :class:`lab.errors.LabError` for a damaged run."""
    results, samples = load_run(folder)
    data, sample = results.get("data") or {}, results.get("sample") or {}
    judge = (results.get("models") or {}).get("judge")
    overall = results["metrics"].get("overall") or {}
    metrics = {}
    for m in HEADLINE:
        cell = overall.get(m)
        if cell and cell.get("mean") is not None:
            ci = bootstrap_ci(values(samples, m))
            metrics[m] = {"mean": cell["mean"], "n": cell.get("n"), "ci": list(ci) if ci else None,
                          "text": catalog.fmt(m, cell["mean"])}
    status = ("race" if results.get("sequential") else "sample" if is_sample(results) else "full")
    return {
        "key": f"{rel}", "name": results.get("name"), "run_id": results.get("run_id"),
        "created_at": results.get("created_at"), "description": results.get("description") or "",
        "eval_set": Path(str(data.get("eval_set") or "-")).name, "eval_sha": str(data.get("eval_sha256") or "")[:10],
        "kb": _short_kb(data.get("knowledge_base")), "corpus_sha": str(data.get("corpus_sha256") or "")[:10],
        "n": sample.get("n_questions", len(samples)), "n_total": sample.get("n_total"), "status": status,
        "judge": f"{judge.get('model')} ({judge_method(results)})" if judge else "",
        "judged": any(s.get("judgement") for s in samples),
        "fingerprint": results.get("config_fingerprint"), "metrics": metrics,
        "total_s": (results.get("timings") or {}).get("total_s"),
    }


@dataclass
class RunIndex:
    """The runs of ``root`` (see the module); safe to share between the server's threads."""

    root: Path
    _rows: dict = field(default_factory=dict)  # rel -> (stamp, row or error)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def folders(self) -> list[tuple[str, Path]]:
        """(``NAME/run-id``, folder) of every finished run, newest name first within a name."""
        out = []
        try:
            names = sorted(os.scandir(self.root), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        for name in names:
            if not name.is_dir() or not SAFE.fullmatch(name.name):
                continue
            for run in os.scandir(name.path):
                if run.is_dir() and SAFE.fullmatch(run.name) and os.path.isfile(os.path.join(run.path, "results.json")):
                    out.append((f"{name.name}/{run.name}", Path(run.path)))
        return out

    def rows(self) -> tuple[list[dict], list[dict]]:
        """(the runs' rows, the runs that cannot be read with why), each run read once per change."""
        rows, broken = [], []
        seen = set()
        for rel, folder in self.folders():
            seen.add(rel)
            try:
                st = os.stat(folder / "results.json")
                stamp = (st.st_mtime_ns, st.st_size)
            except OSError:
                continue
            with self._lock:
                cached = self._rows.get(rel)
            if cached is None or cached[0] != stamp:
                try:
                    row: dict | str = summarise(folder, rel)
                except LabError as exc:
                    row = str(exc)
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    row = f"{folder}: cannot be read ({exc})"
                with self._lock:
                    self._rows[rel] = cached = (stamp, row)
            if isinstance(cached[1], str):
                broken.append({"key": rel, "why": cached[1]})
            else:
                rows.append(cached[1])
        with self._lock:
            for gone in set(self._rows) - seen:
                del self._rows[gone]
        rows.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
        return rows, broken

    def folder(self, name: str, run_id: str) -> Path | None:
        """The folder of run ``name/run_id``, or None: a name that is not a plain folder name, or
        no finished run there (nothing outside the reports folder is ever reached)."""
        if not (SAFE.fullmatch(name) and SAFE.fullmatch(run_id)):
            return None
        folder = self.root / name / run_id
        try:
            if not folder.resolve().is_relative_to(self.root.resolve()):
                return None
        except OSError:
            return None
        return folder if (folder / "results.json").is_file() else None

    def running(self) -> list[dict]:
        """The runs in progress: each status file whose process is alive (or, on another host,
        that changed in the last :data:`STALE_S` seconds), with the run's progress and ETA."""
        out = []
        host = socket.gethostname()
        for path in self.root.glob(f"*/{RUNNING_GLOB}"):
            doc = read_running(path)
            if doc is None:
                continue
            alive = pid_alive(doc["pid"]) if doc.get("host") == host else time.time() - doc.get("updated_at", 0) < STALE_S
            if alive:
                row = {k: doc.get(k) for k in ("name", "pid", "stage", "done", "total", "elapsed_s", "eta_s",
                                               "started_at", "updated_at")}
                row["running_s"] = round(max(0.0, time.time() - (doc.get("started_at") or time.time())), 1)
                out.append(row)
        return sorted(out, key=lambda d: d.get("started_at") or 0)


def groups(rows: list[dict]) -> list[dict]:
    """The runs grouped by eval set (its file and hash): only runs of one group are comparable."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["eval_sha"], r["eval_set"])
        g = out.setdefault(key, {"id": f"g{len(out)}", "eval_set": r["eval_set"], "eval_sha": r["eval_sha"],
                                 "kbs": set(), "runs": []})
        g["kbs"].add(r["kb"])
        g["runs"].append(r)
    result = list(out.values())
    for g in result:
        g["kbs"] = sorted(g["kbs"])
        g["metrics"] = [m for m in HEADLINE if any(m in r["metrics"] for r in g["runs"])]
    return result
