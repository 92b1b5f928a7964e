"""The generation bench's smoke mode runs in `make test`: its figures print and add up."""

import re
import subprocess
import sys

import pytest

from runs import ROOT

pytestmark = pytest.mark.slow


def test_generate_bench_smoke():
    out = subprocess.run([sys.executable, "bench/generate.py", "--smoke"], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    m = re.search(r"^(\d+) accepted of (\d+) candidates \((\d+)%\) from 4 documents; model smollm2-135m-instruct$",
                  out.stdout, re.M)
    assert m and int(m.group(2)) == 2 and int(m.group(1)) <= 2
    m = re.search(r"^accepted per minute ([\d.]+); lab ([\d.]+) s, raw replay ([\d.]+) s \((\d+) calls, (\d+) texts "
                  r"differ\); ratio ([\d.]+)$", out.stdout, re.M)
    assert m, out.stdout
    assert int(m.group(4)) >= 2 and float(m.group(6)) == pytest.approx(float(m.group(2)) / float(m.group(3)), abs=0.01)
    assert out.stdout.rstrip().endswith("smoke: ok")
