"""Ctrl-C, SIGTERM or SIGKILL in the middle of embedding a knowledge base, then the same
command: what was embedded before the signal stays in the cache, the rerun embeds only the rest,
no temporary folder is left, and the results equal an uninterrupted run's."""

from __future__ import annotations

import os
import random
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
SLICE = 64  # lab.models.embeddings.SLICE_BATCHES (8) * the fixture's batch size (8)
WORDS = ("policy claim premium broker underwriting coverage deductible renewal portfolio hazard marine "
         "liability aviation reinsurance actuarial settlement clause endorsement exposure rider").split()


def project_with_many_chunks(root: Path) -> Path:
    """The fixture project plus 16 generated documents: about 750 chunks of 200 characters, so a
    signal sent after the first committed slice lands while many slices are still to come, even on
    a loaded machine."""
    project = root / "project"
    shutil.copytree(FIXTURES, project)
    rng = random.Random(7)
    for d in range(16):
        paragraphs = [f"Section {d}.{p}: " + " ".join(rng.choice(WORDS) for _ in range(60)) + f" (ref {d}-{p})."
                      for p in range(12)]
        (project / "kb" / "generated").mkdir(exist_ok=True)
        (project / "kb" / "generated" / f"doc{d:02d}.md").write_text("\n\n".join(paragraphs) + "\n")
    return project


def vectors(project: Path) -> int:
    db = project / "cache" / "embeddings.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def comparable(run: Path) -> tuple:
    results, samples = load(run)
    return results["metrics"], [(s["id"], [c["id"] for c in s["retrieved"]]) for s in samples]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    project = project_with_many_chunks(tmp_path_factory.mktemp("clean"))
    p = lab(project, "run", "small-retrieval", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, _ = load(latest(project, "small-retrieval"))
    return {"n_chunks": results["index"]["n_chunks"], "run": comparable(latest(project, "small-retrieval"))}


@pytest.mark.parametrize("sig,code,says", [
    (signal.SIGINT, 130, "interrupted: finished work is cached"),
    (signal.SIGTERM, 143, "terminated (SIGTERM): finished work is cached"),
    (signal.SIGKILL, -9, None),
])
def test_a_signal_mid_embedding_keeps_what_was_embedded(tmp_path, uninterrupted, sig, code, says):
    n_chunks = uninterrupted["n_chunks"]
    assert n_chunks > 3 * SLICE  # slices left to stop in
    project = project_with_many_chunks(tmp_path)
    # Ctrl-C as a terminal delivers it: a run started in the background of a non-interactive shell (CI
    # runners, `make test &`) inherits SIGINT ignored, and Python then keeps ignoring it, so every SIGINT
    # below was lost; the child starts with SIGINT at its default, as a command typed at a prompt does
    p = subprocess.Popen([sys.executable, "-m", "lab", "run", "small-retrieval", "--no-progress"], cwd=project,
                         env=lab_env(project), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None and vectors(project) < SLICE:
        time.sleep(0.02)
    assert p.poll() is None, "the run ended before it could be interrupted"
    os.kill(p.pid, sig)
    # should a signal still be lost, signal again, as a user presses Ctrl-C again, while the run goes
    # on; the assertions below hold for whichever signal stopped it
    for _ in range(5):
        try:
            _, err = p.communicate(timeout=2)
            break
        except subprocess.TimeoutExpired:
            os.kill(p.pid, sig)
    else:
        _, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    if says:
        assert says in err and "Traceback" not in err
    kept = vectors(project)
    assert SLICE <= kept < n_chunks  # committed slice by slice, not at the end
    debris = list((project / "cache" / "indexes").glob(".*tmp*"))
    if sig == signal.SIGKILL:  # no handler runs: the streamed build stays under its temporary name
        assert len(debris) <= 1 and not [p for p in (project / "cache" / "indexes").iterdir()
                                         if p.is_dir() and not p.name.startswith(".")]
    else:
        assert not debris
    reports = project / "reports" / "small-retrieval"
    left = [p.name for p in reports.glob(".*tmp*")] if reports.exists() else []
    if sig == signal.SIGKILL:  # no handler runs: a kill while the status file is replaced leaves its temporary
        assert all(name.startswith(f"..running-{p.pid}.json.tmp-") for name in left), left
    else:
        assert not left

    again = lab(project, "run", "small-retrieval", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert not list(reports.glob(".*tmp*"))  # the next run sweeps a killed run's temporary files
    results, _ = load(latest(project, "small-retrieval"))
    assert results["index"]["texts_embedded"] == n_chunks - kept  # only what was missing
    assert not list((project / "cache" / "indexes").glob(".*tmp*"))  # a killed build's folder is gone
    assert comparable(latest(project, "small-retrieval")) == uninterrupted["run"]
    with sqlite3.connect(project / "cache" / "embeddings.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
