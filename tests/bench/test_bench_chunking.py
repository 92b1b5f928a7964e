"""The chunking bench's smoke mode runs in `make test`: linear chunking stays linear."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_chunking_bench_smoke():
    out = subprocess.run([sys.executable, "bench/chunking.py", "--smoke"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and all("(same chunks)" in line for line in lines[:2])
    # 200,000 characters in chunks of 1000 with overlap 200 and no separator: windows stepping 800
    assert re.search(r"no spaces\s+200,000 chars\s+lab\s+[\d.]+ s\s+250 chunks", lines[1]), lines[1]
    ratio = float(re.search(r"ratio no spaces / spaces \(lab\): ([\d.]+)", lines[2]).group(1))
    assert ratio > 0
