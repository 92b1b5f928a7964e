"""The cache on a full or read-only disk (a real tmpfs, mounted for the test): every fault is exit
2 with the path, what filled or refused, and the fix; no debris is left; and the next run on a
healthy disk equals a clean one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runs import lab, latest, load

pytestmark = pytest.mark.slow


@pytest.fixture
def tiny(tmp_path):
    """A 4 MB tmpfs: a disk that really fills up (and can be made read-only)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until ``leave`` bytes are free."""
    free = shutil.disk_usage(disk).free
    with open(disk / "ballast", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))


def comparable(run: Path) -> tuple:
    results, samples = load(run)
    return results["metrics"], [(s["id"], [c["id"] for c in s["retrieved"]]) for s in samples]


def clean_run(tmp_path: Path, project: Path, name: str) -> tuple:
    healthy = tmp_path / "healthy"
    shutil.copytree(project, healthy, ignore=shutil.ignore_patterns("cache", "reports"))
    p = lab(healthy, "run", name, "--no-progress")
    assert p.returncode == 0, p.stderr
    return comparable(latest(healthy, name))


def assert_clear(p, *says: str) -> None:
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    for s in says:
        assert s in p.stderr, (s, p.stderr[-2000:])
    assert "fix:" in p.stderr


def no_debris(cache: Path) -> None:
    assert not list(cache.rglob(".*tmp*")), list(cache.rglob(".*tmp*"))


def test_embedding_cache_on_a_full_disk(project, tiny, tmp_path):
    fill(tiny, 24 * 1024)
    p = lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache"))
    assert_clear(p, f"the cache {tiny / 'cache'}", "the disk is full", "free disk space")
    no_debris(tiny)
    (tiny / "ballast").unlink()
    again = lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache"))
    assert again.returncode == 0, again.stderr
    assert comparable(latest(project, "small-retrieval")) == clean_run(tmp_path, project, "small-retrieval")


def test_index_build_on_a_full_disk(project, tiny, tmp_path):
    """The embeddings are cached already (a run elsewhere); only the LanceDB table is written."""
    warm = tmp_path / "warm-cache"
    assert lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(warm)).returncode == 0
    shutil.copytree(warm, tiny / "cache", ignore=shutil.ignore_patterns("indexes"))
    fill(tiny, 60 * 1024)  # room for SQLite's shared-memory file (32 KB), not for the table (~53 KB)
    p = lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache"))
    assert_clear(p, f"the cache {tiny / 'cache' / 'indexes'}", "free disk space")
    no_debris(tiny)
    assert not [d for d in (tiny / "cache" / "indexes").iterdir() if d.is_dir()]
    (tiny / "ballast").unlink()
    again = lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache"))
    assert again.returncode == 0, again.stderr
    assert comparable(latest(project, "small-retrieval")) == clean_run(tmp_path, project, "small-retrieval")


def test_bm25_index_on_a_full_disk(project, tiny, tmp_path):
    """The table exists (a vector run built it); the full-text index is built later, on a full disk."""
    assert lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache")).returncode == 0
    fill(tiny, 40 * 1024)  # SQLite reopens with a 32 KB shared-memory file; the full-text index needs ~12 KB more
    p = lab(project, "run", "small-bm25", "--no-progress", "--cache", str(tiny / "cache"))
    assert_clear(p, f"the cache {tiny / 'cache' / 'indexes'}", "free disk space")
    no_debris(tiny)
    (tiny / "ballast").unlink()
    again = lab(project, "run", "small-bm25", "--no-progress", "--cache", str(tiny / "cache"))
    assert again.returncode == 0, again.stderr
    assert comparable(latest(project, "small-bm25")) == clean_run(tmp_path, project, "small-bm25")


def test_a_read_only_cache(project, tiny):
    (tiny / "cache").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(tiny)], check=True)
    p = lab(project, "run", "small-retrieval", "--no-progress", "--cache", str(tiny / "cache"))
    assert_clear(p, f"the cache {tiny / 'cache'}", "Read-only file system", "make the cache folder writable")
