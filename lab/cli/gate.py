"""``lab gate BASELINE CANDIDATE``: a non-inferiority check of a candidate run against a baseline
run, for CI (exit 0 pass, 1 fail, 2 error; a JUnit XML file). Reads run files only."""

from __future__ import annotations

from typing import Any


def add_parsers(sub: Any, common: Any) -> None:
    pass


COMMANDS: dict = {}
