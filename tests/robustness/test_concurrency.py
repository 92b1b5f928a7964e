"""Two experiments started at once on the same cache and the same index key: both finish, the
index is built once, and nothing is corrupted."""

import subprocess
import sys

import pytest

from runs import lab_env, load

pytestmark = pytest.mark.slow


def test_two_runs_at_once_build_one_index(project):
    env = lab_env(project)
    procs = [subprocess.Popen([sys.executable, "-m", "lab", "run", name, "--no-progress"], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("small-retrieval", "small-bm25")]  # same chunks and embedding: one index key
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    logs = "".join(o[1] for o in outs)
    assert logs.count("built index ") == 1 and logs.count("reusing index ") == 1
    assert logs.count("built the full-text (BM25) index") == 1
    a = load(next((project / "reports" / "small-retrieval").glob("2*")))
    b = load(next((project / "reports" / "small-bm25").glob("2*")))
    assert a[0]["index"]["key"] == b[0]["index"]["key"]
    import lancedb

    table = lancedb.connect(a[0]["index"]["path"] + "/lancedb").open_table("chunks")
    assert table.count_rows() == a[0]["index"]["n_chunks"]
    assert not list((project / "cache" / "indexes").glob(".*tmp*"))
    import sqlite3

    conn = sqlite3.connect(project / "cache" / "embeddings.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
