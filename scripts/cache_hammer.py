"""Hammer one cache folder from several processes at once, as ``lab sweep --workers N`` does,
and check that nothing was lost: every process writes its own rows and rows every process
shares (same keys, same values: content-addressed, as the lab's keys are) into the embedding
cache (:class:`lab.caches.VectorCache`) and the LLM cache (:class:`lab.caches.CallCache`),
reading back what it and the others wrote between batches. All processes start on a cache
folder that does not exist yet, so creating the files and switching them to WAL races too.

    .venv/bin/python scripts/cache_hammer.py --procs 4 --rows 2000 --batch 50

Prints one JSON object: the errors (each process's exceptions, by type and message), the rows
missing or wrong after all processes finished, and the time taken.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from lab import caches
from lab.caches import CallCache, VectorCache

DIM = 384  # all-MiniLM-L6-v2's width: rows the size the lab writes


def vector(key: str) -> np.ndarray:
    """The vector stored under ``key``: a function of the key, so any process can check any row."""
    seed = int.from_bytes(key.encode()[-8:].rjust(8, b"\0"), "little") % (2 ** 32)
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def keys(worker: int, rows: int) -> list[str]:
    """Half of each process's rows are its own, half are shared by every process."""
    return [f"own-{worker}-{i}" if i % 2 else f"shared-{i}" for i in range(rows)]


def hammer(cache: str, worker: int, procs: int, rows: int, batch: int, busy: float | None, start: mp.Event,
           out: mp.Queue) -> None:
    errors: list[str] = []
    if busy is not None:  # the control: the caches' connections with another busy timeout
        connect = sqlite3.connect
        caches.sqlite3 = SimpleNamespace(**{**vars(sqlite3),
                                            "connect": lambda path, timeout, **kw: connect(path, timeout=busy, **kw)})
    start.wait()
    try:
        vectors = VectorCache(Path(cache) / "embeddings.sqlite")
        calls = CallCache(Path(cache) / "llm.sqlite")
        mine = keys(worker, rows)
        for lo in range(0, rows, batch):
            chunk = mine[lo:lo + batch]
            try:
                vectors.put_many({k: vector(k) for k in chunk})
                for k in chunk:  # one commit per call, as the LLM cache writes
                    calls.put(k, {"text": k, "worker": 0})
                got = vectors.get_many(chunk + keys((worker + 1) % procs, rows)[lo:lo + batch])
                if any(not np.array_equal(got[k], vector(k)) for k in chunk):
                    errors.append(f"batch {lo}: a row read back differs from the row written")
                if any(calls.get(k) != {"text": k, "worker": 0} for k in chunk):
                    errors.append(f"batch {lo}: an LLM call read back differs from the one written")
            except Exception as exc:  # noqa: BLE001  (counted and reported, never dropped)
                errors.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001  (opening the cache failed)
        errors.append(f"open: {type(exc).__name__}: {exc}")
    out.put((worker, errors))


def run(procs: int, rows: int, batch: int, cache: Path, busy: float | None = None) -> dict:
    """Start ``procs`` processes together on ``cache``; then count what is missing or wrong."""
    ctx = mp.get_context("spawn")  # fresh interpreters, as Ray's workers are
    start, out = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=hammer, args=(str(cache), w, procs, rows, batch, busy, start, out)) for w in range(procs)]
    for p in workers:
        p.start()
    time.sleep(2.0)  # every interpreter up and waiting: the writes start together
    t0 = time.perf_counter()
    start.set()
    errors = dict(out.get(timeout=600) for _ in workers)
    seconds = time.perf_counter() - t0
    for p in workers:
        p.join()
    expected = sorted({k for w in range(procs) for k in keys(w, rows)})
    got = VectorCache(cache / "embeddings.sqlite").get_many(expected)
    calls = CallCache(cache / "llm.sqlite")
    return {
        "procs": procs, "rows_per_proc": rows, "batch": batch, "busy_timeout": busy, "seconds": round(seconds, 2),
        "exit_codes": [p.exitcode for p in workers],
        "errors": {str(w): e for w, e in sorted(errors.items()) if e},
        "expected_rows": len(expected),
        "missing_vectors": sum(k not in got for k in expected),
        "wrong_vectors": sum(k in got and not np.array_equal(got[k], vector(k)) for k in expected),
        "missing_calls": sum(calls.get(k) is None for k in expected),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--rows", type=int, default=2000, help="rows each process writes")
    ap.add_argument("--batch", type=int, default=50, help="vectors per put_many")
    ap.add_argument("--cache", type=Path, help="cache folder (default: a new temporary one)")
    ap.add_argument("--busy-timeout", type=float, metavar="S",
                    help="the control: connect with this SQLite busy timeout instead of the caches' own (60 s)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.procs, args.rows, args.batch, args.cache or Path(tmp) / "cache", args.busy_timeout)
    print(json.dumps(report, indent=2))
    ok = not report["errors"] and not any(report[k] for k in ("missing_vectors", "wrong_vectors", "missing_calls"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
