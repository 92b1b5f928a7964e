"""``lab power``: how many questions a difference needs, from a run's per-question values.
Reads run files only."""

from __future__ import annotations

from typing import Any


def add_parsers(sub: Any, common: Any) -> None:
    pass


COMMANDS: dict = {}
