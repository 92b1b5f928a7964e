"""Helpers for end-to-end tests: run the CLI in a project copy and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lab_env(project: Path, **extra: str) -> dict:
    """The environment of a run in ``project``: its own cache, no OpenAI key, and the network
    guard (``tests/netguard``), which refuses and logs to ``project/network.log`` every
    connection that leaves the machine."""
    env = {**os.environ, "LAB_CACHE": str(project / "cache"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "netguard"), str(ROOT)]),
           "LAB_NETGUARD_LOG": str(project / "network.log"), **extra}
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


def page_text(report: Path) -> str:
    """A run page's HTML with its questions' details (JSON in the page, shown on opening) appended,
    as the reader sees them once opened: escaped HTML."""
    import re

    html = report.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="q-details"[^>]*>(.*?)</script>', html, re.S)
    return html + ("".join(json.loads(m.group(1))) if m else "")
