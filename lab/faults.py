"""Named fault points, for proving that a run survives being killed at an exact moment.

``point("index.before_rename")`` does nothing unless the environment variable ``LAB_FAULT``
names that point, in which case the process kills itself with SIGKILL there (no cleanup, no
``finally``), as a power cut or an OOM kill would. The robustness tests use it; nothing else sets
``LAB_FAULT``.
"""

from __future__ import annotations

import os
import signal

POINTS = ("index.before_rename", "run.before_rename", "tune.after_checkpoint", "tune.before_rename")


def point(name: str) -> None:
    if os.environ.get("LAB_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
