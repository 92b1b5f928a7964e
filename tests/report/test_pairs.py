"""``lab compare``'s paired statistics read together: Holm within each family, Benjamini-Hochberg
over the page, verdicts on the adjusted p, and what each comparison could have detected; checked
against statsmodels and scipy on the hand-made runs of tests/report_fixtures.py. Then what moved:
the page's three-line summary, the metrics it charts and the movers' metric."""

import math
import re

import pytest
from scipy.stats import false_discovery_control
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from lab.cli import main
from lab.report.compare import compare_view, load_runs, paired_lines, render_compare
from lab.report.pairs import chosen_metrics, moved_most, standardized
from lab.stats.paired import paired
from report_fixtures import write_pair, write_run, write_span_pair, MRR_A, ACC_A

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
    assert out[-5] == ("base -> better by category, real after adjustment: mrr direct_fact +0.2708 (p adj 0.0312), "
                       "ndcg direct_fact +0.2708 (p adj 0.0312)")
    assert out[-4].startswith("p adj.: Holm across the overall rows of the 6 quality metrics")
    # then the page's three-line summary (test_decision_says_what_differs_what_does_not_and_what_would_settle_it)
    assert [x.split(":")[0] for x in out[-3:]] == ["Detectable", "Not detectable", "To settle"]


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


# ---------------------------------------------------------------------------------------------
# What moved: the three-line summary, the metrics charted, the movers' metric

ACC_SD = ((6 * (4 / 7) ** 2 + 8 * (3 / 7) ** 2) / 13) ** 0.5  # accuracy's deltas: six of 1, eight of 0


def test_decision_says_what_differs_what_does_not_and_what_would_settle_it(view, tmp_path):
    runs, v = view
    # MRR and nDCG: +3.75 / 15 overall, +(10.5 - 7.25) / 12 in direct_fact, real after Holm (see above);
    # the four others are not, nor 10 of the 12 categories. The largest undecided difference: accuracy,
    # completeness and relevance alike, +6/14 over 14 questions, 0.83 sd (coverage: 0.38 sd); a paired
    # t-test needs 20.93 questions for that at alpha 0.05 / 6: 21
    d = (6 / 14) / ACC_SD
    assert round(d, 2) == 0.83
    need = TTestPower().solve_power(effect_size=d, nobs=None, alpha=0.05 / 6, power=0.8)
    assert math.ceil(need) == 21
    assert [(x["key"], x["head"], x["text"]) for x in v["decision"]] == [
        # direct_fact moved on both metrics listed overall: its deltas alone, in their order
        ("found", "Detectable", "better beats base on MRR (keywords) by +0.2500 [+0.1333, +0.3667], nDCG (keywords) "
                                "by +0.2500 [+0.1333, +0.3667] and in direct_fact by +0.2708 and +0.2708"),
        ("not_found", "Not detectable", "4 of 6 metrics (Coverage (keywords), Accuracy, Completeness, Relevance); "
                                        "10 of 12 category comparisons"),
        ("settle", "To settle", "about 21 questions for the largest undecided difference, Accuracy +0.43 (better vs "
                                "base, 14 questions now, 0.83 sd of its per-question deltas), at 80% power and alpha "
                                "0.05 / 6 (Holm's strictest step), were the true difference the one observed")]
    html = render_compare(runs, tmp_path / "out").read_text()
    top = html.index('<div id="decision"')
    assert top < html.index("<h2>Runs</h2>")  # at the top, under any warning
    assert "<b>Not detectable:</b> 4 of 6 metrics (Coverage (keywords), Accuracy" in html[top:]
    # the terminal prints the same three lines, last
    assert paired_lines(runs)[-3:] == [f"{x['head']}: {x['text']}" for x in v["decision"]]


def test_decision_of_three_runs_names_each_pair(tmp_path):
    root = tmp_path / "reports"
    write_pair(root)
    write_run(root, "same", "20261122-120000", MRR_A, ACC_A, "A")
    v = compare_view(load_runs(["base", "better", "same"], root))
    found, not_found, settle = (x["text"] for x in v["decision"])
    assert found.endswith("; same trails better on MRR (keywords) by -0.2500 [-0.3667, -0.1333], nDCG (keywords) by "
                          "-0.2500 [-0.3667, -0.1333] and in direct_fact by -0.2708 and -0.2708")
    assert not_found == ("8 of 12 metric comparisons (better vs base: Coverage (keywords), Accuracy, Completeness, "
                         "Relevance; same vs better: Coverage (keywords), Accuracy, Completeness, Relevance); 20 of 24 "
                         "category comparisons")
    assert settle.startswith("about 21 questions for the largest undecided difference, Accuracy +0.43 (better vs base")


def test_nothing_moved(tmp_path):
    """The same per-question values twice: nothing detectable, nothing to settle, and the catalogue's
    default charts and movers (MRR and accuracy), saying so."""
    root = tmp_path / "reports"
    write_run(root, "base", "20261122-100000", MRR_A, ACC_A, "A")
    write_run(root, "copy", "20261122-110000", MRR_A, ACC_A, "A")
    v = compare_view(load_runs(["base", "copy"], root))
    assert [x["text"] for x in v["decision"]] == [
        "nothing: no quality metric or category differs after adjustment",
        "6 of 6 metrics (MRR (keywords), nDCG (keywords), Coverage (keywords), Accuracy, Completeness, Relevance); "
        "12 of 12 category comparisons",
        "the undecided metrics did not move, so no number of questions would settle them"]
    assert [c["metric"] for c in v["charts"]] == ["mrr", "ndcg", "coverage", "accuracy", "completeness"]
    assert v["charted"] == "nothing moved: the default metrics"
    assert [(m["metric"], m["why"], m["n_same"]) for m in v["pairs"][0]["movers"]] == [
        ("mrr", "no metric moved", 15), ("accuracy", "no metric moved", 14)]
    # a run that names its metric: that one alone
    write_run(root, "held", "20261122-120000", MRR_A, ACC_A, "A", gate={"mrr": 0.02})
    v = compare_view(load_runs(["base", "held"], root))
    assert [c["metric"] for c in v["charts"]] == ["mrr"]
    assert v["charted"] == "nothing moved; the runs' chosen metric (gate.metrics): MRR (keywords)"
    assert [(m["metric"], m["why"]) for m in v["pairs"][0]["movers"]] == [("mrr", "the runs' chosen metric (gate.metrics)")]


@pytest.mark.parametrize("stats, d", [
    ({"n": 15, "delta": 0.25, "sd": 0.25}, 1.0),  # base -> better MRR: seven 0.5, one 0.25, seven 0
    ({"n": 14, "delta": -6 / 14, "sd": ACC_SD}, (6 / 14) / ACC_SD),  # a loss moves as far as a gain
    ({"n": 15, "delta": 0.0, "sd": 0.0}, 0.0),  # nothing moved
    ({"n": 15, "delta": 1e-17, "sd": 1e-16}, 0.0),  # rounding, not a move
    ({"n": 0, "delta": None, "sd": None}, 0.0),  # no shared question
    ({"n": 6, "delta": 0.5, "sd": 0.0}, math.inf),  # every question moved by 0.5
])
def test_standardized(stats, d):
    assert standardized(stats) == pytest.approx(d)


def _tweak(root, gate=None):
    """``tweak``: MRR (and nDCG) up 0.5 on q01 and q03, accuracy up 1 on q02; nothing real. MRR's
    deltas: mean 1/15, sd sqrt(13/420) (two of 0.5, thirteen 0): 0.38 sd; accuracy's: mean 1/14,
    sd sqrt(1/14): 0.27 sd; coverage's: none."""
    mrr, acc = list(MRR_A), list(ACC_A)
    mrr[0] = mrr[2] = 1.0
    acc[1] = 5
    write_run(root, "base", "20261122-100000", MRR_A, ACC_A, "A")
    write_run(root, "tweak", "20261122-110000", mrr, acc, "A", gate=gate)
    return compare_view(load_runs(["base", "tweak"], root))


def test_when_nothing_is_detectable_the_largest_moves_are_charted(tmp_path):
    v = _tweak(tmp_path / "reports")
    rows = _rows(v)
    d_mrr, d_acc = (1 / 15) / (13 / 420) ** 0.5, (1 / 14) / (1 / 14) ** 0.5
    assert standardized(rows["mrr"]["overall"]) == pytest.approx(d_mrr)  # 0.379
    assert standardized(rows["accuracy"]["overall"]) == pytest.approx(d_acc)  # 0.267
    assert rows["mrr"]["overall"]["p_permutation"] == 0.5 and not any(
        s["real"] for r in rows.values() for s in [r["overall"]] + r["categories"])
    # the three largest: MRR and nDCG (0.38), then accuracy (0.27; completeness and relevance tie, later)
    assert [c["metric"] for c in v["charts"]] == ["mrr", "ndcg", "accuracy"]
    assert [c["metric"] for c in v["category_charts"]] == ["mrr", "ndcg", "accuracy"]
    assert v["charted"] == ("no difference is detectable: the 3 metrics that moved most (mean delta in sd of the "
                            "per-question deltas)")
    assert [(m["metric"], m["why"]) for m in v["pairs"][0]["movers"]] == [
        ("mrr", "moved most: 0.38 sd of its per-question deltas")]
    need = TTestPower().solve_power(effect_size=d_mrr, nobs=None, alpha=0.05 / 6, power=0.8)
    assert v["decision"][2]["text"] == (
        f"about {math.ceil(need)} questions for the largest undecided difference, MRR (keywords) +0.0667 (tweak vs "
        "base, 15 questions now, 0.38 sd of its per-question deltas), at 80% power and alpha 0.05 / 6 (Holm's "
        "strictest step), were the true difference the one observed")
    # normal approximation: ((z(1 - 0.05/12) + z(0.8)) / 0.379)^2 = ((2.638 + 0.842) / 0.379)^2 = 84; the t-test's: 88
    assert math.ceil(need) == 88


def test_the_runs_chosen_metric_is_always_charted_and_its_movers_shown(tmp_path):
    """A run whose config holds ``gate.metrics: {coverage: 0.02}``: coverage did not move, and is
    charted and listed all the same."""
    v = _tweak(tmp_path / "reports", gate={"coverage": 0.02})
    assert chosen_metrics(r.results for r in v["runs"]) == ["coverage"]
    assert [c["metric"] for c in v["charts"]] == ["mrr", "ndcg", "coverage", "accuracy"]
    assert v["charted"].endswith("; the runs' chosen metric (gate.metrics): Coverage (keywords)")
    movers = [(m["metric"], m["why"], m["n_same"]) for m in v["pairs"][0]["movers"]]
    assert movers == [("mrr", "moved most: 0.38 sd of its per-question deltas", 13),
                      ("coverage", "the runs' chosen metric (gate.metrics)", 15)]


def test_span_metrics_that_moved_are_charted_and_lead_the_movers(tmp_path):
    """Only span recall and IoU differ (report_fixtures.SPANS_A, SPANS_B): they are charted, not
    MRR; the movers go by IoU, 1.93 sd against recall's 1.37."""
    root = tmp_path / "reports"
    write_span_pair(root)
    runs = load_runs(["spans-a", "spans-b"], root)
    v = compare_view(runs)
    rows = _rows(v)
    recall, iou = rows["span_recall"]["overall"], rows["span_iou"]["overall"]
    assert recall["delta"] == pytest.approx(1 / 3) and recall["sd"] == pytest.approx((30 / 36 / 14) ** 0.5)
    assert iou["delta"] == pytest.approx(0.2) and iou["sd"] == pytest.approx((0.15 / 14) ** 0.5)
    assert standardized(recall) == pytest.approx(1.3663, abs=1e-4)
    assert standardized(iou) == pytest.approx(1.9322, abs=1e-4)
    # p: 2 / 2**10 and 2 / 2**12; Holm over the 8 quality metrics: IoU's the smallest, times 8, then
    # recall's times 7 (the others: p 1)
    assert iou["p_adjusted"] == pytest.approx(8 * 2 / 4096) and recall["p_adjusted"] == pytest.approx(7 * 2 / 1024)
    assert recall["real"] and iou["real"]
    assert not rows["mrr"]["overall"]["real"] and rows["mrr"]["overall"]["delta"] == 0
    assert [c["metric"] for c in v["charts"]] == ["span_recall", "span_iou"]
    assert [c["metric"] for c in v["category_charts"]] == ["span_recall", "span_iou"]
    assert v["charted"] == "the metrics with a detectable difference (overall or in a category)"
    assert moved_most(v["pairs"][0]) == "span_iou"
    (mv,) = v["pairs"][0]["movers"]
    assert (mv["metric"], mv["why"], mv["n_up"], mv["n_same"]) == (
        "span_iou", "moved most: 1.93 sd of its per-question deltas", 12, 3)
    # each side shows the question's span recall too: q01 0.5 in A, 1.0 in B
    assert (mv["gained"][0]["id"], mv["gained"][0]["a"]["also"], mv["gained"][0]["b"]["also"]) == (
        "q01", {"span_recall": 0.5}, {"span_recall": 1.0})
    # direct_fact: recall +5/12 (ten of 0.5 among 12), IoU +0.25 on every one of its 12
    assert v["decision"][0]["text"] == (
        "spans-b beats spans-a on Span recall by +0.3333 [+0.2000, +0.4333], Span IoU by +0.2000 [+0.1500, +0.2500] "
        "and in direct_fact by +0.4167 and +0.2500")
    assert v["decision"][2]["text"] == "the undecided metrics did not move, so no number of questions would settle them"
    html = render_compare(runs, tmp_path / "out").read_text()
    assert re.findall(r'<svg role="img" aria-label="[^"]*" class="chart" data-metric="(\w+)"', html) == [
        "span_recall", "span_iou", "span_recall", "span_iou"]
    assert '<h3 class="movers" data-metric="span_iou">Movers by Span IoU: spans-a → spans-b' in html
    assert '<span class="also" data-metric="span_recall">Span recall 1.0000</span>' in html


def test_a_category_is_listed_with_its_interval_only_where_the_metric_did_not_move_overall():
    """MRR and nDCG moved overall, coverage only in temporal: coverage's category result keeps its
    interval; the categories that moved on metrics listed overall give their deltas (all of them,
    in order, or named where only some moved)."""
    from lab.report.pairs import _found_text

    def s(delta):
        return {"delta": delta, "ci": [delta - 0.1, delta + 0.1]}

    items = [("mrr", None, s(0.25)), ("ndcg", None, s(0.2)), ("mrr", "direct_fact", s(0.27)),
             ("coverage", "temporal", s(0.5)), ("mrr", "numerical", s(0.3)), ("ndcg", "numerical", s(0.31))]
    assert _found_text({"a": "A", "b": "B"}, items) == (
        "B beats A on MRR (keywords) by +0.2500 [+0.1500, +0.3500], nDCG (keywords) by +0.2000 [+0.1000, +0.3000], "
        "Coverage (keywords) in temporal by +50.0 pt [+40.0 pt, +60.0 pt], in direct_fact on MRR (keywords) by "
        "+0.2700 and in numerical by +0.3000 and +0.3100")


def test_a_category_holding_almost_every_question_is_said_to_move_on_each():
    """sphinx-gallery's set: 43 of its 45 questions are direct_fact, so direct_fact moved on each
    metric that moved overall, by about as much; the Detectable line says so instead of listing
    nine deltas again. A category holding fewer (40 of 45) keeps its deltas."""
    from lab.report.pairs import _found_text

    def items(n_cat: int) -> list:
        return [("mrr", None, {"delta": 0.2, "ci": [0.1, 0.3], "n": 45}),
                ("span_mrr", None, {"delta": 0.25, "ci": [0.15, 0.35], "n": 45}),
                ("mrr", "direct_fact", {"delta": 0.21, "ci": [0.1, 0.32], "n": n_cat}),
                ("span_mrr", "direct_fact", {"delta": 0.26, "ci": [0.15, 0.36], "n": n_cat})]

    head = "B beats A on MRR (keywords) by +0.2000 [+0.1000, +0.3000], MRR (spans) by +0.2500 [+0.1500, +0.3500]"
    assert _found_text({"a": "A", "b": "B"}, items(43)) == head + " and in direct_fact on each (43 of the 45 questions)"
    assert _found_text({"a": "A", "b": "B"}, items(40)) == head + " and in direct_fact by +0.2100 and +0.2600"
