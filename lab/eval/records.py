"""The run files' only writer (their schema and reader: :mod:`lab.runfiles`).

:func:`write_run` writes the folder under a temporary name and renames it into place when
complete: a folder that exists is a finished run.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from llama_index.core.schema import NodeWithScore

import lab
from lab import faults
from lab.config import ExperimentConfig, dump_yaml
from lab.errors import LabError
from lab.paths import LATEST, LATEST_FULL, inside
from lab.rag.postprocess import score_float
from lab.report.html import render_run
from lab.runfiles import Results, Retrieved, Sample

#: Packages whose versions every run records.
PACKAGES = (
    "llama-index-core",
    "llama-index-vector-stores-lancedb",
    "lancedb",
    "sentence-transformers",
    "torch",
    "langchain-text-splitters",
    "llama-cpp-python",
    "pydantic",
)


def retrieved_record(rank: int, n: NodeWithScore, first_rank: tuple[int, float | None]) -> Retrieved:
    node = n.node
    return Retrieved(rank=rank, id=node.node_id, source=node.metadata.get("source"), page=node.metadata.get("page"),
                     doc_type=node.metadata.get("doc_type"), score=score_float(n.score), first_stage_rank=first_rank[0],
                     first_stage_score=score_float(first_rank[1]), start_char_idx=node.start_char_idx,
                     end_char_idx=node.end_char_idx, text=node.get_content())


def environment(project_root: Path) -> dict:
    """Versions, machine and git commit of a run."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    commit, dirty = None, None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project_root, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        status = subprocess.run(["git", "status", "--porcelain"], cwd=project_root, capture_output=True,
                                text=True, timeout=10).stdout
        dirty = bool(status.strip()) if commit else None
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "lab": lab.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
        "git_commit": commit,
        "git_dirty": dirty,
    }


# ---------------------------------------------------------------------------------------------
# The writer


def write_run(results: Results, samples: list[Sample], cfg: ExperimentConfig, reports_root: Path) -> Path:
    """Write the run folder atomically (temporary folder, then rename) and render its report."""
    try:
        return _write_run(results, samples, cfg, reports_root)
    except OSError as exc:  # disk full, read-only folder, a file where a folder should be
        raise LabError(f"cannot write the run into {reports_root / cfg.name}: {exc.strerror or exc}",
                       hint="free disk space or make the folder writable (or pass --reports DIR); every model "
                            "call is cached, so the rerun costs seconds") from None


def _write_run(results: Results, samples: list[Sample], cfg: ExperimentConfig, reports_root: Path) -> Path:
    base = inside(reports_root, cfg.name)  # sweep points are named after user values: confined
    base.mkdir(parents=True, exist_ok=True)
    for debris in base.glob(".*.tmp-*"):  # left by a run killed while writing (its process is gone)
        pid = debris.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not faults.pid_alive(int(pid)):
            shutil.rmtree(debris, ignore_errors=True) if debris.is_dir() else debris.unlink(missing_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    suffix = 1
    while (base / run_id).exists():
        suffix += 1
        run_id = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{suffix}"
    results["run_id"] = run_id
    tmp = base / f".{run_id}.tmp-{os.getpid()}"
    tmp.mkdir()
    try:
        (tmp / "config.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
        (tmp / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
        with open(tmp / "samples.jsonl", "w", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(s, default=str) + "\n")
        render_run(tmp)
        faults.point("run.before_rename")
        os.replace(tmp, base / run_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # LATEST: the newest run; LATEST-FULL: the newest over the whole eval set, what a NAME stands for
    # in lab gate, track and compare (lab.report.latest), so that a --limit sample never does silently
    pointers = [LATEST] + ([] if results["sample"]["is_sample"] else [LATEST_FULL])
    for pointer in pointers:
        latest_tmp = base / f".{pointer}.tmp-{os.getpid()}"
        try:
            latest_tmp.write_text(run_id + "\n")
            os.replace(latest_tmp, base / pointer)
        except OSError as exc:  # the run is complete; only the pointer to it could not be moved
            latest_tmp.unlink(missing_ok=True)
            raise LabError(f"the run is complete in {base / run_id}, but {base / pointer} could not be updated: "
                           f"{exc.strerror or exc}",
                           hint=f"free disk space; meanwhile pass the folder itself: lab show {base / run_id}") from None
    return base / run_id
