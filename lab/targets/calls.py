"""Asking a target every question: its identity, the cache of its replies, the bound on calls in
flight, the wall time of each call.

A reply is cached (``<cache>/targets.sqlite``) under sha256 of (target identity, question,
history) as soon as it arrives, so a rerun makes no call, a killed run resumes from the last
reply stored, and ``refresh`` asks again (and stores the new replies). A failed call is not cached:
the next run asks again. The identity is the target's kind and place (module:attr and kwargs,
URL, file sha256), its ``version`` (or the ``version_header``'s value) and what it is asked for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from lab.caches import CallCache
from lab.config import TargetConfig
from lab.paths import project_path
from lab.targets.contract import TargetCallError
from lab.targets.http import HttpTarget
from lab.targets.python import PythonTarget
from lab.targets.replay import ReplayTarget

log = logging.getLogger(__name__)

CACHE_FILE = "targets.sqlite"
#: Bumped when what a cached reply holds changes shape (old entries are then asked again).
REPLY_SCHEMA = 1


class Target(Protocol):
    def ask(self, question: str, history: list[dict], qid: str) -> dict: ...


@dataclass
class Opened:
    """A target ready to be asked: the adapter, its identity, and what the run records of it."""

    target: Target
    identity: str
    version: str | None
    record: dict  # results.json's target section: {kind, where, version, adapter, identity, ...}


def open_target(cfg: TargetConfig, project_root: Path, obj: Any = None) -> Opened:
    """Start-up: import, connect to or read the target (an unreachable URL, a missing module or
    file, an unset header variable stops here, exit 2), and name its identity. ``obj``: a Python
    object to evaluate in place of importing ``cfg.python`` (:func:`lab.api.run` with a callable)."""
    version = cfg.version
    extra: dict = {}
    if cfg.kind == "python":
        target: Target = PythonTarget(cfg, project_root, obj)
        extra["adapter"] = target.adapter
        place: dict = {"python": cfg.python, "kwargs": cfg.kwargs}
    elif cfg.kind == "http":
        target = HttpTarget(cfg)
        seen = target.probe()
        if version is None and seen is not None:
            version = seen
            extra["version_from"] = cfg.version_header
        place = {"http": cfg.http, "request": cfg.request.model_dump(), "headers": sorted(cfg.headers)}
    else:
        path = project_path(project_root, cfg.replay)
        target = ReplayTarget(cfg, path)
        extra.update(format=target.format, rows=target.n_rows, sha256=target.sha256)
        place = {"replay": target.sha256, "format": target.format}
    if version is None and cfg.kind != "replay":
        log.warning("target %s has no version: its cached replies are reused until you set target.version "
                    "(or run with --refresh)", cfg.where)
    body = {"schema": REPLY_SCHEMA, **place, "version": version, "response": cfg.response.model_dump(),
            "answers": cfg.answers}
    identity = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]
    record = {"kind": cfg.kind, "where": cfg.where, "version": version, "identity": identity, **extra}
    return Opened(target, identity, version, record)


def reply_key(identity: str, question: str, history: Sequence[dict]) -> str:
    return hashlib.sha256(json.dumps([identity, question, list(history)], sort_keys=True).encode()).hexdigest()


@dataclass
class Asked:
    """One question's call: the reply (None when it failed), the error, the target's wall time
    (None when the reply came from the cache) and whether it did."""

    reply: dict | None
    error: str | None
    seconds: float | None
    cached: bool


def ask_all(opened: Opened, questions: Sequence[tuple[str, str, list[dict]]], cache_root: Path | None, *,
            refresh: bool = False, concurrency: int = 1,
            runner: Callable[[Callable[[int], Asked], list[int], int], list[Asked]] | None = None) -> list[Asked]:
    """Ask every ``(id, question, history)``, ``concurrency`` at a time (``runner(fn, keys, n)``
    runs them; by default one after another), each reply cached as it arrives (``cache_root``
    None: no cache, as for a replay)."""
    cache = CallCache(cache_root / CACHE_FILE) if cache_root is not None else None

    def one(k: int) -> Asked:
        qid, question, history = questions[k]
        key = reply_key(opened.identity, question, history)
        if cache is not None and not refresh and (hit := _cached(cache, key)) is not None:
            return Asked(hit["reply"], None, None, True)
        t0 = time.perf_counter()
        try:
            reply = opened.target.ask(question, history, qid)
        except TargetCallError as exc:
            log.warning("target call failed for %s: %s", qid, exc.message)
            return Asked(None, exc.message, time.perf_counter() - t0, False)
        seconds = time.perf_counter() - t0
        if cache is not None:
            cache.put(key, {"reply": reply, "seconds": round(seconds, 6)})
        return Asked(reply, None, seconds, False)

    keys = list(range(len(questions)))
    if runner is None:
        return [one(k) for k in keys]
    return runner(one, keys, concurrency)


def cached_seconds(opened: Opened, questions: Sequence[tuple[str, str, list[dict]]], cache_root: Path | None
                   ) -> tuple[int, list[float]]:
    """(how many of ``questions`` have a cached reply, the wall times those replies took): what a
    dry run says of a target without asking it anything."""
    if cache_root is None or not (cache_root / CACHE_FILE).is_file():
        return 0, []
    cache = CallCache(cache_root / CACHE_FILE)
    found = [h for _, q, hist in questions if (h := _cached(cache, reply_key(opened.identity, q, hist))) is not None]
    return len(found), [float(h["seconds"]) for h in found if isinstance(h.get("seconds"), (int, float))]


def _cached(cache: CallCache, key: str) -> dict | None:
    """The cached entry ``{reply, seconds}`` of a call, or None when there is none a run can use."""
    hit = cache.get(key)
    return hit if hit is not None and isinstance(hit.get("reply"), dict) else None

