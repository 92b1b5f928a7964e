"""`lab compare --designs-table`, the docs' design tables, on two hand-made runs (tests/report_fixtures.py):
every cell checked against the fixture's own numbers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from report_fixtures import MRR_A, MRR_B, write_pair
from runs import ROOT


def _rows(stdout: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split(" | ") for line in stdout.splitlines() if line.startswith("| `")]
    return {r[0].strip(" `"): [c.strip() for c in r[1:]] for r in rows}


def test_designs_table_rows_by_hand(tmp_path):
    base, better = write_pair(tmp_path)
    p = subprocess.run([sys.executable, "-m", "lab", "compare", "base", "better", "--reports", str(tmp_path),
                        "--designs-table"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    head = next(line for line in p.stdout.splitlines() if line.startswith("| design"))
    assert head == ("| design | MRR | nDCG | passages / q | context chars (mean / max) | ms / question | "
                    "LLM calls / q | MRR vs base (95% CI, p adj.) |")
    rows = _rows(p.stdout)
    chars = [json.loads(line)["metrics"]["context_chars"] for line in open(base / "samples.jsonl")]
    assert sum(MRR_A) / 15 == pytest.approx(0.58333, abs=1e-5) and sum(MRR_B) / 15 == pytest.approx(0.83333, abs=1e-5)
    assert rows["base"][:6] == ["0.5833", "0.5833",  # the fixture's nDCG is its MRR
                                "1.00",  # one passage a question
                                f"{sum(chars) / 15:,.0f} / {max(chars):,.0f}",
                                "1.3",  # retrieve_s 0.02 over 15 questions
                                "1"]  # 15 generation calls over 15 questions
    assert rows["base"][6] == "(base)"
    # B - A: +0.25 on average; 8 questions better, none worse: the exact permutation p is 2 / 2^8
    assert rows["better"][0] == "0.8333"
    assert rows["better"][6].startswith("+0.2500 [") and rows["better"][6].endswith("p adj. 0.008: **better**")
    assert "15 questions; p adj.: Holm over the 1 designs compared with base." in p.stdout
