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

import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from lab.errors import DataError, LabError
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


#: What a JSON value is, in an error.
_KIND = {bool: "true or false", int: "a whole number", float: "a number", str: "a string", list: "a list",
         dict: "an object", type(None): "null"}
#: The fix of a damaged run folder, and of a damaged status file.
RUN_FIX = "the file was damaged or edited by hand: rerun the experiment, or move the folder away"
STATUS_FIX = "a run writes it as it goes: remove the file if no run is going"


def typed(doc: object, path: tuple[str, ...], kinds: tuple[type, ...], where: Path, fix: str = RUN_FIX) -> Any:
    """``doc[path[0]][path[1]]...``, or None where a key along the way is missing or null; a value
    of another type than ``kinds`` (an object where a string belongs, a string where a number
    does, a number that is not finite) is a :class:`DataError` naming the file and the field."""
    value = doc
    for i, key in enumerate(path):
        if not isinstance(value, dict):
            return _wrong(path[:i], value, (dict,), where, fix)
        value = value.get(key)
        if value is None:
            return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds) \
            or isinstance(value, float) and not math.isfinite(value):
        return _wrong(path, value, kinds, where, fix)
    return value


def _wrong(path: tuple[str, ...], value: object, kinds: tuple[type, ...], where: Path, fix: str = RUN_FIX
           ) -> NoReturn:
    shown = "a number that is not finite" if isinstance(value, float) and not math.isfinite(value) \
        else _KIND.get(type(value), type(value).__name__)
    raise DataError(f"{where}: {'.'.join(path) or 'the file'} is {shown}, not "
                    f"{' or '.join(_KIND[k] for k in kinds)}",
                    hint=fix)


def summarise(folder: Path, rel: str) -> dict:
    """A run's row (see the module): raises :class:`lab.errors.LabError` for a damaged run, one
    whose fields are not of their types included (:func:`typed`), so that the row is plain
    strings and finite numbers, whatever the files hold."""
    results, samples = load_run(folder)
    where = folder / "results.json"

    def get(*path: str, kinds: tuple[type, ...] = (str,)) -> Any:
        return typed(results, path, kinds, where)

    number = (int, float)
    for i, s in enumerate(samples, start=1):
        if not isinstance(s.get("metrics"), dict):
            _wrong(("metrics",), s.get("metrics"), (dict,), folder / f"samples.jsonl (question {i})")
    metrics = {}
    typed(results, ("metrics", "overall"), (dict,), where)
    for m in HEADLINE:
        mean = get("metrics", "overall", m, "mean", kinds=number)
        if mean is not None:
            ci = bootstrap_ci(values(samples, m))
            metrics[m] = {"mean": mean, "n": get("metrics", "overall", m, "n", kinds=(int,)),
                          "ci": list(ci) if ci and all(math.isfinite(x) for x in ci) else None,
                          "text": catalog.fmt(m, mean)}
    judge = get("models", "judge", kinds=(dict,))
    for path in (("judge_checks", "method"), ("config", "judge", "method")):  # what judge_method reads
        get(*path)
    n = get("sample", "n_questions", kinds=(int,))
    get("sample", "is_sample", kinds=(bool,))
    status = ("race" if results.get("sequential") else "sample" if is_sample(results) else "full")
    return {
        "key": f"{rel}", "name": get("name") or folder.parent.name, "run_id": get("run_id") or folder.name,
        "created_at": get("created_at"), "description": get("description") or "",
        "eval_set": Path(get("data", "eval_set") or "-").name, "eval_sha": (get("data", "eval_sha256") or "")[:10],
        "kb": _short_kb(get("data", "knowledge_base")), "corpus_sha": (get("data", "corpus_sha256") or "")[:10],
        "n": len(samples) if n is None else n, "n_total": get("sample", "n_total", kinds=(int,)), "status": status,
        "judge": f"{get('models', 'judge', 'model')} ({judge_method(results)})" if judge else "",
        "judged": any(s.get("judgement") for s in samples),
        "fingerprint": get("config_fingerprint"), "metrics": metrics,
        "total_s": get("timings", "total_s", kinds=number),
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
                except Exception as exc:  # noqa: BLE001 - one run's files, whatever they hold, never the whole table
                    row = f"{folder}: cannot be read ({type(exc).__name__}: {exc})"
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

    def running(self, broken: list[dict] | None = None) -> list[dict]:
        """The runs in progress: each status file whose process is alive (or, on another host,
        that changed in the last :data:`STALE_S` seconds), with the run's progress and ETA. A
        damaged status file (another type than its field's, a pid that is no process id) is added
        to ``broken`` with why, and left out."""
        out = []
        host, now = socket.gethostname(), time.time()
        for path in self.root.glob(f"*/{RUNNING_GLOB}"):
            try:
                row = status_row(path, host, now)
            except LabError as exc:
                if broken is not None:
                    broken.append({"key": f"{path.parent.name}/{path.name}", "why": str(exc)})
                continue
            if row is not None:
                out.append(row)
        return sorted(out, key=lambda d: d["started_at"] or 0)


#: The largest process id a system gives (Linux's pid_max ceiling, 2**22); 0 and -1 name groups.
MAX_PID = 2 ** 22
#: How far ahead of this machine's clock another host's may be.
CLOCK_SKEW_S = 60


def status_row(path: Path, host: str, now: float) -> dict | None:
    """The row of a run in progress from its status file, None where the run is over (the file
    gone, its process dead, or not replaced for :data:`STALE_S` seconds; the older of the file's
    own time and the time it claims counts, so a claim from the future does not keep a row);
    :class:`DataError` for a damaged file."""
    doc = read_running(path)
    if doc is None:
        if not path.is_file():
            return None  # removed as it was read: the run has just ended
        raise DataError(f"{path}: not a run's status (a JSON object with a whole-number pid)", hint=STATUS_FIX)
    pid = doc["pid"]
    if isinstance(pid, bool) or not 0 < pid <= MAX_PID:
        raise DataError(f"{path}: pid {pid} is not a process id", hint=STATUS_FIX)

    def get(key: str, *kinds: type) -> Any:
        return typed(doc, (key,), kinds, path, STATUS_FIX)

    row = {"name": get("name", str), "pid": pid, "stage": get("stage", str), "done": get("done", int),
           "total": get("total", int)}
    for key in ("elapsed_s", "eta_s", "started_at", "updated_at"):
        row[key] = get(key, int, float)
    if not row["name"]:
        raise DataError(f"{path}: name is missing", hint=STATUS_FIX)
    if get("host", str) == host:
        alive = pid_alive(pid)
    else:
        try:
            last = min(path.stat().st_mtime, row["updated_at"] or 0.0)
        except OSError:
            return None
        alive = -CLOCK_SKEW_S < now - last < STALE_S
    if not alive:
        return None
    row["running_s"] = round(max(0.0, now - (row["started_at"] or now)), 1)
    return row


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
