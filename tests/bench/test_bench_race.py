"""bench/race.py --smoke: two made-up runs of 40 questions (a difference of about 0.3 MRR): the
betting and eb sequences make no false claim on paths with the signs flipped where a t-test read
after every question does, cover the mean, and the betting races all decide, on the fixed-n
test's side, sooner than eb's."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_race_smoke():
    proc = subprocess.run([sys.executable, "bench/race.py", "--smoke"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)
    assert proc.returncode == 0 and "smoke: ok" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    m = re.search(r"races, seeds 1-5, betting: decided 5, 5 on the fixed-n test's side", proc.stdout)
    assert m, proc.stdout
    assert re.search(r"false claims betting 0\.\d\d%, eb 0\.\d\d%", proc.stdout), proc.stdout
    assert "judged (simulated), mean 0, skewed" in proc.stdout
    assert "wrote" not in proc.stdout  # the smoke writes no file
