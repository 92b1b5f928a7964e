"""lab.heap: the collector is off while libraries load, then what loaded is frozen out of its reach."""

from __future__ import annotations

import gc
import weakref

from lab import heap


def _restore(enabled: bool) -> None:
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_loading_holds_collection_then_freezes_what_loaded():
    enabled = gc.isenabled()
    gc.enable()
    gc.unfreeze()
    try:
        with heap.loading():
            assert not gc.isenabled()
            loaded = [{"i": i} for i in range(1000)]  # 1,001 tracked objects, as an import makes
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen >= 1001
        assert loaded[0] == {"i": 0}
        # a later full collection walks only what came after: the frozen count does not drop
        gc.collect()
        assert gc.get_freeze_count() == frozen
    finally:
        _restore(enabled)


def test_loading_leaves_a_disabled_collector_alone():
    enabled = gc.isenabled()
    gc.disable()
    gc.unfreeze()
    try:
        with heap.loading():
            pass
        assert not gc.isenabled() and gc.get_freeze_count() == 0  # the caller's choice, untouched
    finally:
        _restore(enabled)


def test_loading_restores_the_collector_when_the_import_fails():
    enabled = gc.isenabled()
    gc.enable()
    try:
        try:
            with heap.loading():
                raise ImportError("no such library")
        except ImportError:
            pass
        assert gc.isenabled()
    finally:
        _restore(enabled)


class Node:
    pass


def _garbage_cycle() -> weakref.ref:
    """A cycle no one refers to: only the cyclic collector frees it; the weak reference tells."""
    node = Node()
    node.me = node
    return weakref.ref(node)


def test_settle_collects_garbage_before_freezing():
    enabled = gc.isenabled()
    gc.disable()
    gc.unfreeze()
    try:
        gone = _garbage_cycle()
        heap.settle()
        assert gone() is None  # collected, not frozen

        kept = _garbage_cycle()
        heap.settle(collect=False)  # before exit: frozen as it is
        gc.collect()
        assert kept() is not None  # out of the collector's reach now
    finally:
        _restore(enabled)


def test_exit_closes_the_caches_connections(tmp_path):
    """A process that freezes its heap before exit (as ``python -m lab`` does) still closes every
    SQLite connection at exit: the WAL is folded into the database and no -wal or -shm file stays,
    also for a store that is cyclic garbage (which exit no longer collects) or used by a thread."""
    import subprocess
    import sys

    script = f"""
import gc, threading
from pathlib import Path
import numpy as np
from lab.caches import VectorCache

class Holder:  # a store in a reference cycle, as pipelines hold theirs
    pass

h = Holder(); h.me = h; h.cache = VectorCache(Path({str(tmp_path / "a.sqlite")!r}))
h.cache.put_many({{"k": np.ones(3, dtype=np.float32)}})
b = VectorCache(Path({str(tmp_path / "b.sqlite")!r}))
t = threading.Thread(target=lambda: b.put_many({{"k": np.ones(3, dtype=np.float32)}})); t.start(); t.join()
del h
gc.freeze()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite", "b.sqlite"]
    from lab.caches import VectorCache

    for name in ("a.sqlite", "b.sqlite"):  # and nothing was lost
        assert VectorCache(tmp_path / name).get_many(["k"])["k"].tolist() == [1.0, 1.0, 1.0]
