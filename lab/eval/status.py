"""A run in progress, seen from outside: ``reports/<NAME>/.running-<pid>.json``.

While :func:`lab.eval.runner.run_experiment` works, every progress ticker (:mod:`lab.progress`)
also replaces this small file atomically (a reader sees the old status or the new one, never
half of one) with the stage, items done, the total and the ETA; the file is removed when the run
ends, whether it wrote its folder or failed. ``lab serve`` lists these files as runs in progress
(:class:`lab.runfiles.Running`); a file whose process is gone is a run that was killed.
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from lab.paths import write_atomic
from lab.progress import observe


class RunStatus:
    """The status file of one run (see the module)."""

    def __init__(self, folder: Path, name: str, n_questions: int | None = None):
        self.path = Path(folder) / f".running-{os.getpid()}.json"
        self.doc = {"name": name, "pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time(),
                    "updated_at": time.time(), "stage": "starting", "done": 0, "total": 0, "elapsed_s": 0.0,
                    "eta_s": None, "n_questions": n_questions}

    def write(self, **fields) -> None:
        self.doc.update(fields, updated_at=time.time())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(self.doc))

    def tick(self, stage: str, done: int, total: int, elapsed: float) -> None:
        eta = elapsed / done * (total - done) if done else None
        self.write(stage=stage, done=done, total=total, elapsed_s=round(elapsed, 1),
                   eta_s=None if eta is None else round(eta, 1))

    def remove(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:  # a reports "folder" that is a file: the run's own error says so
            pass


@contextmanager
def running(folder: Path, name: str, n_questions: int | None = None) -> Iterator[RunStatus]:
    """Keep ``folder``'s status file while the block runs (see the module); a status that cannot
    be written (a read-only reports folder) never stops the run."""
    status = RunStatus(folder, name, n_questions)
    made = []  # the folders the status file makes, removed again if the run leaves them empty
    for parent in (Path(folder), *Path(folder).parents):
        if parent.exists():
            break
        made.append(parent)
    try:
        status.write()
    except OSError:
        pass
    stop = observe(status.tick)
    try:
        yield status
    finally:
        stop()
        status.remove()
        for empty in made:  # a run that failed before writing leaves no empty folder behind
            try:
                empty.rmdir()
            except OSError:
                break
