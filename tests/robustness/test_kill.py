"""kill -9 at points of a run (while indexing, while reranking, while answering, while judging),
then the same command again: the run resumes, finished work is not recomputed, the index and
the caches are intact, and the results equal an uninterrupted run's."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs import lab, lab_env, latest, load

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rows(db: Path, table: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def kill_when(project: Path, name: str, ready) -> None:
    """Start ``lab run name``, SIGKILL it as soon as ``ready(project)`` holds."""
    p = subprocess.Popen([sys.executable, "-m", "lab", "run", name, "--no-progress"], cwd=project,
                         env=lab_env(project), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None and not ready(project):
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before it could be interrupted"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert not (project / "reports" / name / "LATEST").exists()


def comparable(run: Path) -> tuple:
    results, samples = load(run)
    return (results["metrics"], [(s["id"], [c["id"] for c in s["retrieved"]], (s.get("answer") or {}).get("text"),
                                  {k: (s.get("judgement") or {}).get(k) for k in ("status", "accuracy", "feedback")})
                                 for s in samples])


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """Uninterrupted runs of the two fixture experiments used below, in a project of their own."""
    project = tmp_path_factory.mktemp("baseline") / "project"
    shutil.copytree(FIXTURES, project)
    out = {}
    for name in ("small", "small-llm-rerank"):
        p = lab(project, "run", name, "--no-progress")
        assert p.returncode == 0, p.stderr
        out[name] = comparable(latest(project, name))
    out["llm_cache"] = project / "cache" / "llm.sqlite"
    return out


def fresh(tmp_path: Path, llm_cache: Path | None = None) -> Path:
    """A new project; with ``llm_cache``, its LLM cache starts as a copy of that one (for a fault
    that strikes before the first model call or after the last, whose calls are not the point)."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURES, project)
    if llm_cache is not None:
        (project / "cache").mkdir()
        with sqlite3.connect(llm_cache) as src, sqlite3.connect(project / "cache" / "llm.sqlite") as dst:
            src.backup(dst)
    return project


def resume_and_compare(project: Path, name: str, baseline: dict) -> dict:
    p = lab(project, "run", name, "--no-progress")
    assert p.returncode == 0, p.stderr
    run = latest(project, name)
    assert comparable(run) == baseline[name]
    assert not list((project / "reports" / name).glob(".*tmp*"))
    assert not list((project / "cache" / "indexes").glob(".*tmp*"))
    for db in (project / "cache").glob("*.sqlite"):
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",), db
    return load(run)[0]


def test_killed_while_indexing(tmp_path, baseline):
    """SIGKILL at the last moment of an index build: the table is written, not yet renamed. The
    model calls come from the uninterrupted run's cache: this fault strikes before the first."""
    project = fresh(tmp_path, baseline["llm_cache"])
    p = lab(project, "run", "small", "--no-progress", LAB_FAULT="index.before_rename")
    assert p.returncode == -9
    indexes = project / "cache" / "indexes"
    assert list(indexes.glob(".*.tmp-*")) and not [d for d in indexes.iterdir() if d.is_dir() and d.name[0] != "."]
    embedded = rows(project / "cache" / "embeddings.sqlite", "vectors")
    results = resume_and_compare(project, "small", baseline)
    assert results["index"]["reused"] is False  # the half-built index was thrown away and built again
    assert results["index"]["texts_embedded"] == 0 and embedded > 0  # chunk vectors from the cache
    assert all(u["calls"] == 0 for u in results["llm_usage"].values())


def test_killed_while_writing_the_run(tmp_path, baseline):
    """SIGKILL after every file of the run is written, before the folder is renamed into place (the
    model calls from the uninterrupted run's cache: what is tested is the run's folder)."""
    project = fresh(tmp_path, baseline["llm_cache"])
    p = lab(project, "run", "small", "--no-progress", LAB_FAULT="run.before_rename")
    assert p.returncode == -9
    assert list((project / "reports" / "small").glob(".*.tmp-*"))  # the half-written run, not a run
    assert not (project / "reports" / "small" / "LATEST").exists()
    results = resume_and_compare(project, "small", baseline)  # which also checks the debris is gone
    u = results["llm_usage"]
    assert u["generation"]["calls"] == 0 and u["judge"]["calls"] == 0


def test_killed_while_reranking(tmp_path, baseline):
    project = fresh(tmp_path)
    kill_when(project, "small-llm-rerank", lambda p: rows(p / "cache" / "scores.sqlite", "vectors") >= 5)
    stored = rows(project / "cache" / "scores.sqlite", "vectors")
    results = resume_and_compare(project, "small-llm-rerank", baseline)
    assert results["counters"]["rerank_scores_cached"] == stored  # nothing scored twice
    assert results["counters"]["rerank_scores_computed"] == 24 - stored


def test_killed_while_answering(tmp_path, baseline):
    project = fresh(tmp_path)
    kill_when(project, "small", lambda p: rows(p / "cache" / "llm.sqlite", "calls") >= 2)
    stored = rows(project / "cache" / "llm.sqlite", "calls")
    results = resume_and_compare(project, "small", baseline)
    u = results["llm_usage"]  # the resumed run added exactly the calls it computed: every stored one reused
    assert rows(project / "cache" / "llm.sqlite", "calls") == stored + sum(u[role]["calls"] for role in u)


def test_killed_while_judging(tmp_path, baseline):
    project = fresh(tmp_path)
    kill_when(project, "small", lambda p: rows(p / "cache" / "llm.sqlite", "calls") >= 9)  # 6 answers + 3
    stored = rows(project / "cache" / "llm.sqlite", "calls")
    results = resume_and_compare(project, "small", baseline)
    u = results["llm_usage"]
    assert u["generation"]["calls"] == 0
    assert rows(project / "cache" / "llm.sqlite", "calls") == stored + sum(u[role]["calls"] for role in u)
