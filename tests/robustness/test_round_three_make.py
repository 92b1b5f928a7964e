"""The Makefile and the test suite on a fresh machine: a value with an apostrophe reaches `lab` as
one argument, and the browser tests skip with the fix where chromium is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str) -> subprocess.CompletedProcess:
    """``make -s ARGS`` with ``lab`` replaced by printf (each argument it gets in brackets) and no
    venv prerequisite: what the recipe passes on, without running anything."""
    return subprocess.run(["make", "-s", "-C", str(ROOT), "STAMP=", "LAB=printf [%s]", *args],
                          capture_output=True, text=True, timeout=60)


@needs_make
def test_make_experiment_passes_an_apostrophe_in_kb_as_one_argument():
    p = make("experiment", "NAME=x", "KB=/tmp/it's here", "EVAL=a \"b\" $$HOME `id`", "LIMIT=2")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[run][x][--kb][/tmp/it's here][--eval][a \"b\" $HOME `id`][--limit][2]"


@needs_make
def test_make_ask_passes_a_question_with_quotes_as_one_argument():
    p = make("ask", "NAME=turn13", "Q=it's \"here\"?")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[ask][turn13][it's \"here\"?]"


@needs_make
def test_make_experiment_dry_run_prints_the_value_quoted():
    p = subprocess.run(["make", "-n", "-C", str(ROOT), "STAMP=", "experiment", "NAME=x", "KB=/tmp/it's here"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert ".venv/bin/lab run 'x' --kb '/tmp/it'\\''s here'" in p.stdout


def test_browser_tests_skip_with_the_fix_where_chromium_is_missing(tmp_path):
    env = {**os.environ, "LAB_CHROMIUM": str(tmp_path / "no-chromium")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "tests/report/test_browser.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-2000:]
    assert "chromium not installed: make browser" in p.stdout
    assert " skipped" in p.stdout.splitlines()[-1] and "error" not in p.stdout.splitlines()[-1]
