"""The generation bench's smoke mode runs in `make test`: its figures print and add up."""

import re
import subprocess
import sys

import pytest

from runs import ROOT

pytestmark = pytest.mark.slow


def test_generate_bench_smoke_extractive():
    out = subprocess.run([sys.executable, "bench/generate.py", "--smoke"], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    m = re.search(r"^(\d+) accepted of (\d+) candidates \((\d+)%\) from 4 documents; model smollm2-135m-instruct; "
                  r"mode extractive$", out.stdout, re.M)
    assert m and 1 <= int(m.group(2)) <= 2 and int(m.group(1)) <= 1, out.stdout
    m = re.search(r"^raw replay ([\d.]+) s \((\d+) calls, (\d+) texts differ\); ratio ([\d.]+)$", out.stdout, re.M)
    assert m and int(m.group(2)) == int(re.search(r"of (\d+) candidates", out.stdout).group(1)), out.stdout
    assert re.search(r"^round trip among \d+ sentences: passed by words only \d+, by meaning only \d+$", out.stdout,
                     re.M), out.stdout
    assert out.stdout.rstrip().endswith("smoke: ok")


def test_generate_bench_smoke_answer_check():
    out = subprocess.run([sys.executable, "bench/generate.py", "--smoke", "--answer-check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert re.search(r"; mode extractive, --answer-check$", out.stdout, re.M), out.stdout
    checks = re.search(r"^answer check: (\d+) calls, (\d+) questions rejected$", out.stdout, re.M)
    candidates = int(re.search(r"of (\d+) candidates", out.stdout).group(1))
    assert checks and int(checks.group(2)) <= int(checks.group(1)) <= candidates, out.stdout
    # the raw replay makes the writer's calls and the check's: one a candidate, one a question the rules passed
    m = re.search(r"^raw replay ([\d.]+) s \((\d+) calls, (\d+) texts differ\)", out.stdout, re.M)
    assert m and int(m.group(2)) == candidates + int(checks.group(1)), out.stdout
    refused = subprocess.run([sys.executable, "bench/generate.py", "--smoke", "--answer-check", "--mode", "abstractive"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--answer-check checks the extractive mode's questions" in refused.stderr


def test_generate_bench_smoke():
    out = subprocess.run([sys.executable, "bench/generate.py", "--smoke", "--mode", "abstractive"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    m = re.search(r"^(\d+) accepted of (\d+) candidates \((\d+)%\) from 4 documents; model smollm2-135m-instruct; "
                  r"excerpts held$", out.stdout, re.M)
    assert m and 1 <= int(m.group(2)) <= 2 and int(m.group(1)) <= 1, out.stdout  # n 1, at most 2 candidates
    m = re.search(r"^accepted per minute ([\d.]+); lab ([\d.]+) s; (\d+) tokens written, (\d+) per accepted question$",
                  out.stdout, re.M)
    assert m, out.stdout
    lab_s = float(m.group(2))
    m = re.search(r"^raw replay ([\d.]+) s \((\d+) calls, (\d+) texts differ\); ratio ([\d.]+)$", out.stdout, re.M)
    assert m, out.stdout
    raw_s = float(m.group(1))
    # both times print to 0.1 s and the ratio to 0.01: the ratio of the printed times may differ by that rounding
    slack = lab_s / raw_s * (0.05 / lab_s + 0.05 / raw_s) + 0.005
    assert int(m.group(2)) >= 2 and float(m.group(4)) == pytest.approx(lab_s / raw_s, abs=slack)
    m = re.search(r"^paraphrased excerpts placed in their window \(near_excerpts\): (\d+) of the accepted; spans "
                  r"moved to where the window states the answer \(moved_spans\): (\d+)$", out.stdout, re.M)
    assert m and int(m.group(1)) == 0 and int(m.group(2)) <= 1, out.stdout  # held excerpts are never paraphrases
    assert out.stdout.rstrip().endswith("smoke: ok")
