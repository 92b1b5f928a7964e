"""Power and minimum detectable effects, checked against statsmodels' TTestPower and by hand, and
``lab power`` on hand-made runs."""

import math
import re
import statistics

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from lab.cli import main
from lab.stats.power import detectable, effect_size, mde, min_permutation_n, needed_n, plan, t_power
from report_fixtures import CATEGORIES, MRR_A, MRR_B, write_pair

TT = TTestPower()


@pytest.mark.parametrize("d, n", [(0.2, 150), (0.5, 10), (0.5, 34), (1.0, 6), (0.05, 2000), (3.0, 2)])
def test_power_of_the_paired_t_test_matches_statsmodels(d, n):
    assert t_power(d, n) == pytest.approx(TT.power(effect_size=d, nobs=n, alpha=0.05), rel=1e-9)
    assert t_power(-d, n) == pytest.approx(t_power(d, n))  # two-sided


def test_power_where_scipy_loses_the_wrong_sign_tail():
    # d = 3 with 10 pairs: the non-centrality is 9.5 and scipy's nct.cdf of the lower tail is nan
    # (statsmodels' power is nan too); the tail is below 1e-12, the power all but 1
    assert t_power(3.0, 10) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("n", [2, 3, 6, 10, 25, 121, 150])
def test_effect_size_matches_statsmodels(n):
    want = TT.solve_power(effect_size=None, nobs=n, alpha=0.05, power=0.8, alternative="two-sided")
    assert effect_size(n) == pytest.approx(want, rel=1e-5)
    assert t_power(effect_size(n), n) == pytest.approx(0.8, abs=1e-9)
    assert effect_size(1) is None


@pytest.mark.parametrize("d", [0.1, 0.3, 0.5, 1.0])
def test_needed_n_is_the_ceiling_of_statsmodels_n(d):
    want = TT.solve_power(effect_size=d, nobs=None, alpha=0.05, power=0.8, alternative="two-sided")
    n = needed_n(d)
    assert n == math.ceil(want)  # 0.1: 787, 0.3: 90, 0.5: 34, 1.0: 10
    assert t_power(d, n) >= 0.8 > t_power(d, n - 1)


def test_needed_n_is_never_under_what_a_permutation_test_needs():
    # the t-test needs 2.5 pairs for d = 5, but 5 deltas give at best p = 2/32 = 0.0625
    assert needed_n(5.0) == 6 and needed_n(20.0) == 6 and needed_n(0.0) is None
    assert needed_n(5.0, alpha=0.01) == 8  # 2/2**7 = 0.0156 is not under 0.01; 2/2**8 is


@pytest.mark.parametrize("alpha, n", [(0.05, 6), (0.01, 8), (0.0625, 6), (0.5, 3), (0.05 / 7, 9)])
def test_min_permutation_n(alpha, n):
    # the smallest n with 2 / 2**n < alpha
    assert 2 / 2 ** n < alpha <= 2 / 2 ** (n - 1)
    assert min_permutation_n(alpha) == n


def test_detectable_is_effect_size_times_the_deltas_sd():
    deltas = [0.5, 0, 0, 1, -0.5, 0, 0.25, 0, 0, 0.5]
    x = detectable(deltas)
    assert x["n"] == 10 and x["sd"] == pytest.approx(statistics.stdev(deltas))
    d10 = TT.solve_power(effect_size=None, nobs=10, alpha=0.05, power=0.8)  # 0.996
    assert x["mde"] == pytest.approx(d10 * statistics.stdev(deltas), rel=1e-5) and x["mde_why"] is None
    assert mde(10, x["sd"]) == x["mde"]


def test_detectable_says_why_there_is_no_figure():
    assert detectable([]) == {"n": 0, "sd": None, "mde": None, "mde_why":
                              "n=0: a permutation test of fewer than 6 questions cannot reach p < 0.05"}
    assert detectable([1.0])["mde_why"].startswith("n=1:")
    assert detectable([0.5, 1, 1, 0, 0])["mde"] is None  # 5 questions: at best p = 0.0625
    assert detectable([0.0] * 8) == {"n": 8, "sd": 0.0, "mde": None, "mde_why": "no question changed"}
    assert detectable([0.25] * 8)["mde_why"] == "sd 0: every question moved by the same amount"
    assert mde(8, 0.0) is None and mde(8, None) is None and mde(5, 0.3) is None


# ---------------------------------------------------------------------------------------------
# lab power on the report fixtures: runs "base" (MRR_A) and "better" (MRR_B), 12 direct_fact and
# 3 temporal questions


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "reports"
    write_pair(root)
    return root


def test_plan_from_one_run_assumes_the_sd_of_a_difference(root):
    from lab.report.compare import load_runs

    (base,) = load_runs(["base"], root)
    p = plan([("base", base.samples)], "mrr", delta=0.1)
    overall, direct, temporal = p["rows"]
    # rho 0.5: sd of a difference = sd(MRR) * sqrt(2 * 0.5) = sd(MRR)
    sd = statistics.stdev(MRR_A)
    assert (overall["name"], overall["n"], overall["sd_d"]) == ("overall", 15, pytest.approx(sd))
    assert overall["mde"] == pytest.approx(TT.solve_power(None, nobs=15, alpha=0.05, power=0.8) * sd, rel=1e-5)
    assert overall["needed"] == math.ceil(TT.solve_power(0.1 / sd, nobs=None, alpha=0.05, power=0.8))
    assert direct["name"] == "direct_fact" and direct["n"] == 12
    assert direct["sd_d"] == pytest.approx(statistics.stdev(MRR_A[:12]))
    assert temporal["n"] == 3 and temporal["mde"] is None and temporal["mde_why"].startswith("n=3:")
    assert temporal["needed"] == needed_n(0.1 / statistics.stdev(MRR_A[12:]))  # planning ahead is still possible
    rho = plan([("base", base.samples)], "mrr", delta=0.1, rho=0.8)["rows"][0]
    assert rho["sd_d"] == pytest.approx(sd * math.sqrt(2 * 0.2))


def test_plan_from_two_runs_uses_the_observed_paired_sd(root):
    from lab.report.compare import load_runs

    base, better = load_runs(["base", "better"], root)
    p = plan([("base", base.samples), ("better", better.samples)], "mrr", delta=0.1, category="direct_fact")
    assert [r["name"] for r in p["rows"]] == ["overall", "direct_fact"] and p["rho"] is None
    deltas = [b - a for a, b in zip(MRR_A, MRR_B)]
    overall, direct = p["rows"]
    assert overall["sd_d"] == pytest.approx(statistics.stdev(deltas))
    assert overall["mde"] == pytest.approx(detectable(deltas)["mde"])
    assert overall["needed"] == math.ceil(TT.solve_power(0.1 / statistics.stdev(deltas), nobs=None, alpha=0.05,
                                                         power=0.8))
    direct_deltas = [d for d, c in zip(deltas, CATEGORIES) if c == "direct_fact"]
    assert direct["n"] == 12 and direct["sd_d"] == pytest.approx(np.std(direct_deltas, ddof=1))


def test_cli_power(root, capsys):
    assert main(["power", "--run", "base", "--run", "better", "--delta", "0.1", "--reports", str(root)]) == 0
    out = capsys.readouterr().out
    deltas = [b - a for a, b in zip(MRR_A, MRR_B)]
    sd = statistics.stdev(deltas)
    row = re.search(r"^overall\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d,]+)$", out, re.M)
    assert row, out
    assert int(row[1]) == 15 and float(row[2]) == pytest.approx(sd, abs=5e-5)
    assert float(row[3]) == pytest.approx(detectable(deltas)["mde"], abs=5e-5)
    assert int(row[4]) == math.ceil(TT.solve_power(0.1 / sd, nobs=None, alpha=0.05, power=0.8))
    assert "sd of the paired differences better - base, observed" in out
    assert re.search(r"^temporal\s+3 .* \(n=3: a permutation test of fewer than 6 questions", out, re.M)
    assert "pass --alpha 0.025 (alpha / 2" in out

    assert main(["power", "--run", "base", "--reports", str(root)]) == 0
    out = capsys.readouterr().out
    assert "assumed: sd(mrr) of base x sqrt(2 x (1 - rho)), rho = 0.5" in out and "needed for" not in out


@pytest.mark.parametrize("argv, says", [
    (["--metric", "mmr"], "error: --metric: unknown metric 'mmr'\n  fix: did you mean 'mrr'?"),
    (["--category", "nope"],
     "error: --category: base has no category 'nope'\n  fix: categories: direct_fact, temporal"),
    (["--delta", "0"], "error: --delta 0.0: give the difference to detect as a positive number"),
    (["--run", "better", "--run", "base"], "error: --run given 3 times"),
])
def test_cli_power_bad_input_exits_2(root, capsys, argv, says):
    assert main(["power", "--run", "base", "--reports", str(root), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and "Traceback" not in err


def test_cli_power_needs_per_question_values(root, capsys):
    for s in (root / "base").glob("*/samples.jsonl"):
        lines = s.read_text().splitlines()
        s.write_text("".join(re.sub(r'"accuracy": [^,]+,', "", x) + "\n" for x in lines))
    assert main(["power", "--run", "base", "--metric", "accuracy", "--reports", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: base has no per-question accuracy values\n  fix: pass --metric with one of: ")
    for s in (root / "base").glob("*/samples.jsonl"):
        s.unlink()
    assert main(["power", "--run", "base", "--reports", str(root)]) == 2
    assert "has no samples.jsonl: no per-question values" in capsys.readouterr().err


def test_sequential_questions_to_a_decision():
    """The anytime-valid rule's questions to a decision, simulated: a larger true difference needs
    fewer; the simulation is seeded; a judge score's differences range over [-4, 4]."""
    from lab.stats.power import diff_range, sequential_n

    small = sequential_n(0.05, 0.3, "mrr", max_n=3000)
    large = sequential_n(0.2, 0.3, "mrr", max_n=3000)
    assert large["median"] < small["median"] and large["decided"] == 1.0
    assert sequential_n(0.2, 0.3, "mrr", max_n=3000) == large  # seeded
    # at the planned effect a confidence sequence pays for looking after every question: more than
    # the fixed-n t-test needs (needed_n(0.2 / 0.3) = 20), fewer than five times that
    fixed = needed_n(0.2 / 0.3)
    assert fixed < large["median"] < 5 * fixed
    assert diff_range("accuracy") == (-4.0, 4.0) and diff_range("mrr") == (-1.0, 1.0)
    assert sequential_n(0.1, 0.0, "mrr") is None
    # observed deltas are resampled around the shifted mean
    obs = sequential_n(0.2, 0.3, "mrr", deltas=[-0.5, 0.0, 0.5, 0.25, -0.25], max_n=3000)
    assert obs["decided"] == 1.0 and obs["median"] < small["median"]
    # each sequence of lab race on the same paths: the betting sequence (the default) needs fewer than
    # the empirical-Bernstein one; the normal mixture, asymptotic, fewer still
    eb = sequential_n(0.2, 0.3, "mrr", max_n=3000, sequence="eb")
    nm = sequential_n(0.2, 0.3, "mrr", max_n=3000, sequence="normal-mixture", t_opt=100)
    assert nm["median"] < large["median"] < eb["median"]


def test_power_with_a_delta_gives_the_questions_to_a_decision_under_each_sequence(tmp_path):
    from lab.stats.power import plan, plan_lines

    rng = np.random.default_rng(0)
    a = [{"id": f"q{i}", "category": "c", "metrics": {"mrr": float(v)}} for i, v in enumerate(rng.random(60))]
    b = [{**s, "metrics": {"mrr": min(1.0, s["metrics"]["mrr"] + float(rng.choice([0.0, 0.25, 0.5])))}} for s in a]
    p = plan([("a", a), ("b", b)], "mrr", delta=0.1)
    seq = p["rows"][0]["sequential"]
    assert list(seq) == ["betting", "eb", "normal-mixture"]
    assert seq["betting"]["median"] < seq["eb"]["median"]
    out = "\n".join(plan_lines(p))
    assert "betting" in out and "normal-mixture" in out
    assert f"{seq['betting']['median']:,} / {seq['betting']['p90']:,}" in out
