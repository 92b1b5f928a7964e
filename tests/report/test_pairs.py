"""``lab compare``'s paired statistics read together: Holm within each family, Benjamini-Hochberg
over the page, verdicts on the adjusted p, and what each comparison could have detected; checked
against statsmodels and scipy on the hand-made runs of tests/report_fixtures.py."""

import re

import pytest
from scipy.stats import false_discovery_control
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from lab.cli import main
from lab.report.compare import compare_view, load_runs, paired_lines, render_compare
from lab.stats.paired import paired
from report_fixtures import write_pair, write_run, MRR_A, ACC_A

QUALITY = ["mrr", "ndcg", "coverage", "accuracy", "completeness", "relevance"]


@pytest.fixture
def view(tmp_path):
    root = tmp_path / "reports"
    write_pair(root)
    runs = load_runs(["base", "better"], root)
    return runs, compare_view(runs)


def _rows(v):
    return {r["metric"]: r for r in v["pairs"][0]["rows"]}


def test_holm_within_the_overall_family_and_each_metrics_categories(view):
    runs, v = view
    rows = _rows(v)
    # overall raw p: MRR and nDCG 2/256 (8 gains, none lost), coverage 1/2 (2 gains), the three
    # judge scores 2/64 (6 gains); Holm over the six: 6 * 2/256 = 0.046875 for MRR
    raw = [rows[m]["overall"]["p_permutation"] for m in QUALITY]
    assert raw == [2 / 256, 2 / 256, 0.5, 2 / 64, 2 / 64, 2 / 64]
    assert [rows[m]["overall"]["p_adjusted"] for m in QUALITY] == pytest.approx(
        list(multipletests(raw, method="holm")[1]))
    assert rows["mrr"]["overall"]["p_adjusted"] == pytest.approx(6 * 2 / 256)
    assert rows["accuracy"]["overall"]["p_adjusted"] == pytest.approx(4 * 2 / 64)  # 0.125
    assert {rows[m]["overall"]["family"] for m in QUALITY} == {"overall"}
    # MRR's categories: direct_fact (12 questions) and temporal (3), Holm over the two
    a, b = runs
    cats = [paired(a.values("mrr", c), b.values("mrr", c)).p_permutation for c in ("direct_fact", "temporal")]
    got = [c["p_adjusted"] for c in rows["mrr"]["categories"]]
    assert got == pytest.approx(list(multipletests(cats, method="holm")[1]))
    assert got == pytest.approx([2 * cats[0], 1.0])
    assert [c["family_size"] for c in rows["mrr"]["categories"]] == [2, 2]
    # a size is tested but not adjusted
    chars = rows["context_chars"]["overall"]
    assert chars["p_adjusted"] is None and chars["q"] is None and chars["family"] is None


def test_benjamini_hochberg_over_every_quality_test_on_the_page(view):
    _, v = view
    tests = [s for r in v["pairs"][0]["rows"] if r["metric"] in QUALITY for s in [r["overall"]] + r["categories"]]
    assert len(tests) == 18 == v["method"]["n_tests"]  # 6 metrics x (overall + 2 categories)
    want = false_discovery_control([s["p_permutation"] for s in tests], method="bh")
    assert [s["q"] for s in tests] == pytest.approx(list(want))


def test_verdicts_use_the_adjusted_p_and_say_what_was_detectable(view):
    _, v = view
    rows = _rows(v)
    mrr, acc = rows["mrr"]["overall"], rows["accuracy"]["overall"]
    assert mrr["real"] and mrr["verdict"] == "better better"  # p adj 0.047 < 0.05, CI above 0
    # accuracy: p 0.031 and a CI above 0 were "real" before; Holm makes it 0.125
    assert acc["significant"] and not acc["real"]
    # deltas: six of 1, eight of 0 over 14 questions: sd = sqrt((6 (4/7)^2 + 8 (3/7)^2) / 13)
    sd = ((6 * (4 / 7) ** 2 + 8 * (3 / 7) ** 2) / 13) ** 0.5
    assert acc["sd"] == pytest.approx(sd)
    d14 = TTestPower().solve_power(effect_size=None, nobs=14, alpha=0.05, power=0.8)
    assert acc["mde"] == pytest.approx(d14 * sd, rel=1e-5)  # 0.416
    d14_adj = TTestPower().solve_power(effect_size=None, nobs=14, alpha=0.05 / 6, power=0.8)
    assert acc["mde_adjusted"] == pytest.approx(d14_adj * sd, rel=1e-5)  # 0.55
    assert acc["verdict"] == "no detectable difference (could detect ≥ 0.42; p < 0.05 before adjustment)"
    assert acc["detectable"] == "0.42" and acc["detectable_adjusted"] == "0.55"
    temporal = rows["mrr"]["categories"][1]
    assert temporal["category"] == "temporal" and temporal["mde"] is None
    assert temporal["verdict"] == ("no detectable difference (n=3: a permutation test of fewer than 6 questions "
                                   "cannot reach p < 0.05)")
    assert rows["context_chars"]["overall"]["verdict"] == "no detectable difference (no question changed)"
    cov = rows["coverage"]["overall"]
    assert cov["verdict"] == f"no detectable difference (could detect ≥ {100 * cov['mde']:.1f} pt)"


def test_the_page_names_the_method_and_shows_both_p(view, tmp_path):
    runs, v = view
    html = render_compare(runs, tmp_path / "out").read_text()
    assert ("p adj.: Holm across the overall rows of the 6 quality metrics and across the 2 categories of each "
            "metric, per pair of runs; q: Benjamini-Hochberg over all 18 tests of quality metrics here.") in html
    row = re.search(r'<tr class="overall" data-metric="accuracy">(.*?)</tr>', html, re.S)[1]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    # cells: name, n, A, B, delta, CI, p (perm.), p adj., q, w/l/t, p (sign), could detect, verdict
    assert cells[6:9] == ["0.0312", "0.1250", f"{_rows(v)['accuracy']['overall']['q']:.4f}"]
    assert cells[11].startswith("≥ 0.42") and "adj. ≥ 0.55" in cells[11]
    assert "p &lt; 0.05 before adjustment" in cells[12] and ' sig' not in row
    mrr = re.search(r'<tr class="overall" data-metric="mrr">(.*?)</tr>', html, re.S)[1]
    assert "0.0469" in mrr and '<td class="verdict up sig">better better</td>' in mrr


def test_terminal_lines_carry_the_adjusted_p_and_the_method(view):
    runs, _ = view
    out = paired_lines(runs)
    assert out[0].startswith("base -> better mrr: delta +0.2500 [+0.1333, +0.3667] n=15, p(perm)=0.0078, 8/0/7 w/l/t,")
    assert out[0].endswith("p adj=0.0469, q=0.0703: real")
    acc = next(x for x in out if " accuracy:" in x)
    assert acc.endswith("p adj=0.1250, q=0.0804: not detectable (could detect >= 0.42, >= 0.55 after adjustment)")
    assert out[-2] == ("base -> better by category, real after adjustment: mrr direct_fact +0.2708 (p adj 0.0312), "
                       "ndcg direct_fact +0.2708 (p adj 0.0312)")
    assert out[-1].startswith("p adj.: Holm across the overall rows of the 6 quality metrics")


def test_three_runs_adjust_each_pair_and_share_one_q(tmp_path, capsys):
    root = tmp_path / "reports"
    write_pair(root)
    write_run(root, "same", "20261122-120000", MRR_A, ACC_A, "A")
    v = compare_view(load_runs(["base", "better", "same"], root))
    assert v["method"]["n_tests"] == 36 and v["method"]["overall_sizes"] == [6, 6]
    tests = [s for p in v["pairs"] for r in p["rows"] if r["metric"] in QUALITY
             for s in [r["overall"]] + r["categories"]]
    assert [s["q"] for s in tests] == pytest.approx(list(false_discovery_control([s["p_permutation"] for s in tests])))
    back = {r["metric"]: r for r in v["pairs"][1]["rows"]}["mrr"]["overall"]
    assert back["verdict"] == "same worse" and back["delta"] == pytest.approx(-0.25)
    assert main(["compare", "base", "better", "same", "--reports", str(root), "--no-html"]) == 0
    assert "over all 36 tests of quality metrics here" in capsys.readouterr().out
