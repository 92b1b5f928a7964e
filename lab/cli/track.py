"""MLflow tracking: ``lab track RUN...`` logs finished runs; ``lab run --track`` (or a config's
``tracking:`` section) logs a run as it finishes. Needs the ``mlflow`` extra."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parsers(sub: Any, common: Any) -> None:
    pass


def after_run(args: argparse.Namespace, run_dir: Path, tracking: Any) -> None:
    """Called by ``lab run`` after a run is written, when ``--track`` is given or the config has a
    ``tracking:`` section (``tracking`` is that section, or None)."""


COMMANDS: dict = {}
