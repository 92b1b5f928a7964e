"""``lab gate``: the non-inferiority statistics on hand-made values (checked against scipy and
statsmodels), the exit codes on fixture run folders, and the JUnit file read back by a parser."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from lab.cli import main
from lab.stats.noninferiority import gate_metrics, holm, one_sided
from tests.report_fixtures import ACC_A, ACC_B, MRR_A, MRR_B, write_pair, write_run


def _values(xs):
    return {f"q{i:02d}": float(x) for i, x in enumerate(xs)}


# ---------------------------------------------------------------------------------------------
# The statistics


def test_one_sided_t_test_by_hand():
    # drops 0.1, -0.1, 0.1, -0.1: mean 0, sd sqrt(4 * 0.01 / 3) = 0.11547, se 0.11547 / 2 = 0.057735
    t = one_sided([0.1, -0.1, 0.1, -0.1], margin=0.2)
    se = math.sqrt(0.04 / 3) / 2
    assert t.n == 4 and t.mean_drop == pytest.approx(0) and t.sd == pytest.approx(math.sqrt(0.04 / 3))
    assert t.p == pytest.approx(stats.t.cdf((0 - 0.2) / se, df=3))  # t = -3.4641, p = 0.0202
    assert t.p == pytest.approx(0.0202, abs=1e-4)
    assert t.bound(0.05) == pytest.approx(0 + stats.t.ppf(0.95, 3) * se)  # 2.3534 * 0.057735 = 0.1359
    assert t.bound(0.05) == pytest.approx(0.1359, abs=1e-4)


def test_a_candidate_within_the_margin_passes():
    base = [0.5, 1, 1, 0.5, 0.25, 1, 0, 1, 0.5, 1]
    cand = [0.5, 1, 0.5, 1, 0.25, 1, 0, 1, 1, 1]  # one loss of 0.5, two gains of 0.5: mean drop -0.05
    [g] = gate_metrics({"mrr": (_values(base), _values(cand))}, {"mrr": 0.2}, {"mrr": True}, alpha=0.05)
    assert (g.baseline, g.candidate, g.mean_drop, g.n) == (pytest.approx(0.675), pytest.approx(0.725),
                                                          pytest.approx(-0.05), 10)
    # H0 mean(baseline - candidate) >= 0.2 is mean(baseline - (candidate + 0.2)) >= 0: scipy's paired test
    ref = stats.ttest_rel(base, np.asarray(cand) + 0.2, alternative="less")
    assert g.p == pytest.approx(ref.pvalue) and g.p_adjusted == g.p  # one metric: Holm changes nothing
    assert g.level == 0.05 and g.bound == pytest.approx(one_sided(np.subtract(base, cand), 0.2).bound(0.05))
    assert g.p < 0.05 and g.bound < 0.2 and g.passed
    # with 10 questions, a margin of 0.1 is too tight to show: the worst plausible drop is 0.1145
    [tight] = gate_metrics({"mrr": (_values(base), _values(cand))}, {"mrr": 0.1}, {"mrr": True}, alpha=0.05)
    assert tight.bound == pytest.approx(0.1145, abs=1e-4) and not tight.passed


def test_a_candidate_that_may_be_worse_than_the_margin_fails():
    base = [1, 1, 1, 1, 0.5, 1, 0.5, 1]
    cand = [0.5, 1, 1, 0.5, 0.5, 1, 0.5, 1]  # two losses of 0.5: mean drop 0.125
    [g] = gate_metrics({"mrr": (_values(base), _values(cand))}, {"mrr": 0.02}, {"mrr": True}, alpha=0.05)
    assert g.mean_drop == pytest.approx(0.125)
    assert g.p == pytest.approx(stats.ttest_rel(base, np.asarray(cand) + 0.02, alternative="less").pvalue)
    assert g.p > 0.05 and g.bound >= 0.02 and not g.passed


def test_a_lower_is_better_metric_is_gated_on_candidate_minus_baseline():
    base = [3000, 3100, 2900, 3000, 3050, 2950]
    higher = {"context_chars": False}
    smaller = [2900, 3000, 2850, 2950, 2950, 2900]  # 450 characters fewer over 6: 75 fewer on average, better
    bigger = [3400, 3500, 3300, 3350, 3500, 3300]  # 2350 more over 6: 391.67 more, worse than a margin of 100
    [ok] = gate_metrics({"context_chars": (_values(base), _values(smaller))}, {"context_chars": 100}, higher, 0.05)
    [bad] = gate_metrics({"context_chars": (_values(base), _values(bigger))}, {"context_chars": 100}, higher, 0.05)
    assert ok.mean_drop == pytest.approx(-75) and ok.passed
    assert ok.p == pytest.approx(stats.ttest_rel(smaller, np.asarray(base) + 100, alternative="less").pvalue)
    assert bad.mean_drop == pytest.approx(2350 / 6) and not bad.passed and bad.bound >= 100
    # the same values with higher-is-better: the bigger candidate is now the better one
    [flipped] = gate_metrics({"x": (_values(base), _values(bigger))}, {"x": 100}, {"x": True}, 0.05)
    assert flipped.mean_drop == pytest.approx(-2350 / 6) and flipped.passed


def test_holm_matches_statsmodels_and_its_levels_follow_the_step_down():
    p = [0.03, 0.04, 0.001]
    adjusted, levels = holm(p, 0.05)
    assert adjusted == pytest.approx(list(multipletests(p, alpha=0.05, method="holm")[1]))  # 0.06, 0.06, 0.003
    assert adjusted == pytest.approx([0.06, 0.06, 0.003])
    # sorted: 0.001 at 0.05/3 (passes), 0.03 at 0.05/2 (fails: the step-down stops), 0.04 at the stopping level
    assert levels == pytest.approx([0.025, 0.025, 0.05 / 3])
    assert holm([0.01, 0.02], 0.05)[1] == pytest.approx([0.025, 0.05])  # both pass: 0.05/2, then 0.05/1


def test_gated_metrics_verdicts_and_bounds_agree_with_holm():
    rng = np.random.default_rng(5)
    ids = [f"q{i}" for i in range(60)]
    base = {m: dict(zip(ids, rng.uniform(0, 1, 60))) for m in ("mrr", "ndcg", "coverage", "span_iou")}
    shift = {"mrr": -0.05, "ndcg": 0.0, "coverage": 0.03, "span_iou": 0.01}  # candidate minus baseline, on average
    values = {m: (base[m], {q: v + shift[m] + rng.normal(0, 0.1) for q, v in base[m].items()}) for m in base}
    margins = {"mrr": 0.02, "ndcg": 0.04, "coverage": 0.02, "span_iou": 0.03}
    rows = gate_metrics(values, margins, {m: True for m in margins}, alpha=0.05)
    raw = [r.p for r in rows]
    assert [r.p_adjusted for r in rows] == pytest.approx(list(multipletests(raw, alpha=0.05, method="holm")[1]))
    assert [r.passed for r in rows] == list(multipletests(raw, alpha=0.05, method="holm")[0])
    assert [r.passed for r in rows] == [False, True, True, True]  # mrr dropped by 0.05 against a margin of 0.02
    for r in rows:
        assert r.passed == (r.bound < r.margin)
        assert r.bound == pytest.approx(one_sided([values[r.metric][0][q] - values[r.metric][1][q] for q in ids],
                                                  r.margin).bound(r.level))


def test_identical_runs_pass_any_positive_margin_and_fail_a_zero_one():
    v = _values([0.5, 1, 0, 0.25])
    [g] = gate_metrics({"mrr": (v, v)}, {"mrr": 0.01}, {"mrr": True}, 0.05)
    assert (g.mean_drop, g.bound, g.p, g.passed) == (0, 0, 0, True)
    [g] = gate_metrics({"mrr": (v, v)}, {"mrr": 0.0}, {"mrr": True}, 0.05)
    assert (g.p, g.passed) == (1, False)


# ---------------------------------------------------------------------------------------------
# The command on fixture run folders: base (A) and better (B) share 15 questions; B gains 0.5 or
# 0.25 MRR on 8 of them (mean +0.25) and loses none.


@pytest.fixture
def reports(tmp_path) -> Path:
    write_pair(tmp_path / "reports")
    (tmp_path / "experiments").mkdir()
    return tmp_path / "reports"


def gate(reports: Path, *args: str) -> int:
    return main(["gate", *args, "--reports", str(reports), "--experiments", str(reports.parent / "experiments")])


def test_a_better_candidate_passes_with_exit_0(reports, capsys):
    assert gate(reports, "base", "better", "--metric", "mrr", "--margin", "0.02") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gate: better against base, 15 shared questions; one-sided paired t-test")
    assert out[1].startswith("PASS mrr            baseline 0.5833 candidate 0.8333  worst plausible drop -")
    assert out[1].endswith("< margin 0.0200 (p_adj 0.0005, n 15)")
    assert out[-1] == ("gate PASSED: better is not worse than base by more than the margin on mrr "
                       "(Holm over 1 metric, alpha 0.05)")


def test_a_worse_candidate_fails_with_exit_1_and_the_junit_file_says_which(reports, tmp_path, capsys):
    junit = tmp_path / "out" / "gate.xml"
    code = gate(reports, "better", "base", "--metric", "mrr=0.02", "--metric", "coverage=0.2",
                "--metric", "accuracy=0.5", "--junit", str(junit))
    assert code == 1
    out = capsys.readouterr().out
    assert "FAIL mrr " in out and "PASS coverage " in out and "FAIL accuracy " in out
    assert "accuracy: 1 of 15 shared questions have no value in one run (failed items) and are left out: q05" in out
    assert "gate FAILED: base may be worse than better by more than the margin on mrr, accuracy (2 of 3;" in out

    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "2"
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "lab gate"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["mrr", "coverage", "accuracy"]
    assert {c.get("classname") for c in cases} == {"lab gate"}
    failures = {c.get("name"): c.find("failure") for c in cases}
    assert failures["coverage"] is None
    assert failures["mrr"].get("message").startswith("FAIL mrr            baseline 0.8333 candidate 0.5833")
    assert failures["mrr"].get("type") == "NonInferiorityFailed" and "mean drop +0.250000" in failures["mrr"].text
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["alpha"] == "0.05" and props["shared_questions"] == "15"
    assert props["baseline"].endswith("better/20261122-110000")
    assert "left out: q05" in suite.find("system-err").text


def test_a_lower_is_better_size_is_gated_the_other_way(reports, capsys):
    # context_chars: both runs' chunk texts have the same length, so the rise is 0 on every question
    assert gate(reports, "base", "better", "--metric", "context_chars=10") == 0
    assert "PASS context_chars  baseline 38 candidate 38  worst plausible rise +0 < margin 10" in capsys.readouterr().out


@pytest.mark.parametrize("args, says", [
    (["--metric", "mrrr=0.02"], "--metric: unknown metric 'mrrr'\n  fix: did you mean 'mrr'?"),
    (["--metric", "mrr=-0.02"], "the margin of mrr is -0.02; it must be a number >= 0"),
    (["--metric", "mrr=2"], "the margin of mrr is 2.0, the metric's whole range (1)"),
    (["--metric", "coverage=5"], "write the margin in points of a share: 2 points is 0.02"),
    (["--metric", "mrr=abc"], "--metric mrr=abc: the margin 'abc' is not a number"),
    (["--metric", "mrr=nan"], "the margin 'nan' is not a finite number"),
    (["--metric", "mrr", "--metric", "ndcg", "--margin", "0.02"], "2 --metric without a margin but 1 --margin"),
    (["--metric", "ndcg"], "--metric ndcg has no margin"),
    (["--margin", "0.02"], "--margin without --metric"),
    (["--alpha", "1.5"], "--alpha 1.5 is outside (0, 1)"),
    (["--metric", "span_iou=0.01"], "has no per-question values of span_iou"),
])
def test_bad_input_exits_2_with_a_fix_and_writes_no_junit(reports, tmp_path, capsys, args, says):
    junit = tmp_path / "gate.xml"
    assert gate(reports, "base", "better", *args, "--junit", str(junit)) == 2
    err = capsys.readouterr().err
    assert says in err and "fix:" in err
    assert not junit.exists()


def test_runs_over_other_eval_sets_or_no_shared_questions_exit_2(reports, capsys):
    write_run(reports, "other", "20261122-120000", MRR_B, ACC_B, "C", eval_sha="f" * 64)
    assert gate(reports, "base", "other") == 2
    assert "base and other were run over different eval sets" in capsys.readouterr().err
    folder = write_run(reports, "renamed", "20261122-130000", MRR_B, ACC_B, "D")
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    (folder / "samples.jsonl").write_text("".join(json.dumps({**s, "id": "x" + s["id"]}) + "\n" for s in samples))
    assert gate(reports, "base", "renamed") == 2
    assert "base and renamed share no questions" in capsys.readouterr().err
    assert gate(reports, "base", "nothing") == 2
    assert "'nothing' is neither a run folder nor an experiment" in capsys.readouterr().err


def test_not_comparable_runs_are_warned_about_not_failed(reports, capsys):
    # the same questions, but B's sample is recorded as another seed: a warning from lab compare's checks
    results = reports / "better" / "20261122-110000" / "results.json"
    r = json.loads(results.read_text())
    r["sample"]["seed"] = 99
    results.write_text(json.dumps(r))
    assert gate(reports, "base", "better") == 0  # no --metric, no gate: section: mrr with margin 0.02
    out = capsys.readouterr().out
    assert "PASS mrr " in out and "warning: different questions (sample size or seed)" in out


def test_the_candidates_gate_section_names_baseline_metrics_and_alpha(reports, capsys):
    results = reports / "base" / "20261122-100000" / "results.json"
    r = json.loads(results.read_text())
    r["config"]["gate"] = {"baseline": "reports/better/20261122-110000", "metrics": {"mrr": 0.45, "ndcg": 0.01},
                           "alpha": 0.1}
    results.write_text(json.dumps(r))
    assert gate(reports, "base") == 1  # one RUN: the candidate, against its gate.baseline
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "metrics and margins from the gate: section of the candidate run's stored config"
    assert out[2].startswith("PASS mrr ") and out[3].startswith("FAIL ndcg ")  # mean drop 0.25: within 0.45 only
    assert out[-1].endswith("(1 of 2; Holm over 2 metrics, alpha 0.1)")
    assert gate(reports, "better", "base", "--metric", "ndcg") == 1  # a bare --metric takes the section's margin
    assert "margin 0.0100" in capsys.readouterr().out
    assert gate(reports, "better") == 2  # better has no gate: section, so no baseline
    assert "needs a baseline" in capsys.readouterr().err


def test_fixture_means_are_what_the_lines_say():
    assert np.mean(MRR_A) == pytest.approx(0.5833, abs=1e-4) and np.mean(MRR_B) == pytest.approx(0.8333, abs=1e-4)
    assert sum(a is None for a in ACC_A) == 1


def test_a_gate_section_added_to_the_experiment_after_its_run_is_read_from_the_file(reports, capsys):
    experiments = reports.parent / "experiments"
    (experiments / "turn13.yaml").write_text((Path(__file__).parents[2] / "experiments" / "turn13.yaml").read_text())
    (experiments / "base.yaml").write_text("schema_version: 1\nextends: turn13\ndescription: base\n"
                                           "gate:\n  baseline: better\n  metrics: {coverage: 0.3}\n")
    assert gate(reports, "base") == 0  # the run's stored config has no gate: section; the file's is used
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"metrics and margins from the gate: section of {experiments / 'base.yaml'}"
    assert out[2].startswith("PASS coverage ") and "margin 30.0 pt" in out[2]


def test_a_committed_copy_of_a_run_is_told_apart_by_its_folder(reports, tmp_path, capsys):
    copy = tmp_path / "baselines" / "base"
    copy.mkdir(parents=True)
    for name in ("results.json", "samples.jsonl"):  # all a baseline needs
        (copy / name).write_text((reports / "base" / "20261122-100000" / name).read_text())
    assert gate(reports, str(copy), "base", "--metric", "mrr=0.02") == 0  # identical values: drop 0 everywhere
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"gate: base@20261122-100000 ({reports / 'base' / '20261122-100000'}) against "
                             f"base@20261122-100000 ({copy}), 15 shared questions")
    assert "worst plausible drop +0.0000 < margin 0.0200" in out[1]
