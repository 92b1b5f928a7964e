"""Helpers for end-to-end tests: run the CLI in a project copy and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lab_env(project: Path, **extra: str) -> dict:
    env = {**os.environ, "LAB_CACHE": str(project / "cache"), "PYTHONPATH": str(ROOT), **extra}
    env.pop("OPENAI_API_KEY", None)
    return env


def lab(project: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=project, env=lab_env(project, **extra_env),
                          capture_output=True, text=True, timeout=900)


def latest(project: Path, name: str) -> Path:
    base = project / "reports" / name
    return base / (base / "LATEST").read_text().strip()


def load(run: Path) -> tuple[dict, list[dict]]:
    results = json.loads((run / "results.json").read_text())
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    return results, samples
