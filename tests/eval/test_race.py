"""lab race: the stopping point on synthetic per-question values, and the command end to end on
the fixture project (exhausted, a budget and its resume, bad input, the page in chromium)."""

import json
import logging
import math

import numpy as np
import pytest

from lab.eval import race as race_module
from lab.eval.race import RaceOptions, paths, stop_point
from lab.eval.runner import RunOptions
from lab.stats.betting import betting_cs
from lab.stats.sequential import eb_cs
from runs import lab


def samples(values, metric="mrr"):
    return [{"id": f"q{i}", "metrics": {metric: v}} for i, v in enumerate(values)]


def test_the_race_stops_at_the_first_question_where_the_sequence_excludes_zero():
    ids = [f"q{i}" for i in range(60)]
    a, b = samples([0.0] * 60), samples([1.0, 0.5] * 30)
    (p,) = paths(ids, a, b, ["mrr"], 0.05)
    cs = betting_cs(np.asarray([1.0, 0.5] * 30), 0.05, -1, 1)  # the default sequence
    first = int(np.argmax(cs.lower > 0)) + 1  # the first t whose lower bound is above 0
    assert p.lower == pytest.approx(list(cs.lower)) and cs.lower[first - 1] > 0 >= cs.lower[first - 2]
    k, verdicts = stop_point(ids, [p], None, 0)
    assert (k, verdicts) == (first, {"mrr": "difference"})
    assert stop_point(ids, [p], None, first)[0] == first + 1  # read on from a batch's end: still decided
    # no difference at all: never a difference; with an effect that matters, futile once the CS is inside it
    (flat,) = paths(ids, a, samples([0.0] * 60), ["mrr"], 0.05)
    assert stop_point(ids, [flat], None, 0) is None
    k, verdicts = stop_point(ids, [flat], 0.9, 0)
    assert verdicts == {"mrr": "futile"} and flat.upper[k - 1] < 0.9 <= flat.upper[k - 2]


def test_several_metrics_share_alpha_and_all_must_decide():
    ids = [f"q{i}" for i in range(60)]
    a = [{"id": q, "metrics": {"mrr": 0.0, "ndcg": 0.5}} for q in ids]
    b = [{"id": q, "metrics": {"mrr": 1.0, "ndcg": 0.5}} for q in ids]
    ps = paths(ids, a, b, ["mrr", "ndcg"], 0.05)
    assert ps[0].lower == pytest.approx(list(betting_cs(np.ones(60), 0.025, -1, 1).lower))  # alpha / 2 each
    (eb,) = paths(ids, a, b, ["mrr"], 0.05, sequence="eb")  # the sequence races read before betting, on request
    assert eb.lower == pytest.approx(list(eb_cs(np.ones(60), 0.05, -1, 1).lower))
    assert stop_point(ids, ps, None, 0) is None  # ndcg never differs, and no effect was given
    assert stop_point(ids, ps, 0.5, 0)[1] == {"mrr": "difference", "ndcg": "futile"}


def test_categories_join_the_family_and_never_stop_the_race():
    ids = [f"q{i}" for i in range(60)]
    cat = lambda i: "x" if i % 3 else "y"  # noqa: E731  # 40 questions of x, 20 of y
    a = [{"id": f"q{i}", "category": cat(i), "metrics": {"mrr": 0.0}} for i in range(60)]
    b = [{"id": f"q{i}", "category": cat(i), "metrics": {"mrr": 1.0 if cat(i) == "x" else 0.0}} for i in range(60)]
    ps = paths(ids, a, b, ["mrr"], 0.05, ["x", "y"])
    assert [(p.metric, p.category, len(p.ids)) for p in ps] == [("mrr", None, 60), ("mrr", "x", 40), ("mrr", "y", 20)]
    # each of the family of 3 at alpha / 3, over its own questions in race order
    assert ps[1].lower == pytest.approx(list(betting_cs(np.ones(40), 0.05 / 3, -1, 1).lower))
    assert ps[0].lower == pytest.approx(list(betting_cs(np.asarray([b[i]["metrics"]["mrr"] for i in range(60)]),
                                                        0.05 / 3, -1, 1).lower))
    k, verdicts = stop_point(ids, ps, None, 0)
    assert verdicts == {"mrr": "difference"}  # y never differs, and does not hold the race
    assert k == stop_point(ids, ps[:1] + [ps[0]] * 2, None, 0)[0]  # the overall sequence alone decides when


def peeked_t_test(d, alpha=0.05, first=5):
    """Whether a one-sample t-test of ``d[:t]`` is below ``alpha`` for any t from ``first``."""
    from scipy import stats

    t = np.arange(1, d.size + 1)
    mean = np.cumsum(d) / t
    var = (np.cumsum(d * d) - t * mean ** 2) / np.maximum(t - 1, 1)
    ok = (t >= first) & (var > 1e-12)
    stat = np.abs(mean[ok]) / np.sqrt(var[ok] / t[ok])
    return bool(np.any(2 * stats.t.sf(stat, t[ok] - 1) < alpha))


def test_a_race_by_category_keeps_the_familywise_error_under_no_difference():
    """500 null races of 120 questions in 4 categories, each looked at after every question: any
    claim, overall or in a category, is a false positive. The race's rate stays under alpha; a
    t-test read the same way (overall and per category, after every question from the fifth)
    claims something in most of them."""
    rng = np.random.default_rng(5)
    ids = [f"q{i}" for i in range(120)]
    false = naive = 0
    for _ in range(500):
        va, vb = rng.choice([0.0, 0.5, 1.0], 120), rng.choice([0.0, 0.5, 1.0], 120)
        a = [{"id": q, "category": f"c{i % 4}", "metrics": {"mrr": float(v)}} for i, (q, v) in enumerate(zip(ids, va))]
        b = [{"id": q, "category": f"c{i % 4}", "metrics": {"mrr": float(v)}} for i, (q, v) in enumerate(zip(ids, vb))]
        ps = paths(ids, a, b, ["mrr"], 0.05, ["c0", "c1", "c2", "c3"])
        false += any(np.any(np.asarray(p.lower) > 0) or np.any(np.asarray(p.upper) < 0) for p in ps)
        naive += any(peeked_t_test(np.asarray(p.deltas)) for p in ps)
    assert false / 500 <= 0.05 < 0.5 < naive / 500


def test_a_sequential_gate_fails_as_soon_as_a_drop_beyond_the_margin_is_shown_and_passes_when_ruled_out():
    ids = [f"q{i}" for i in range(80)]
    base = samples([1.0] * 80)
    (worse,) = paths(ids, base, samples([0.0, 0.5] * 40), ["mrr"], 0.05)  # mean drop 0.75
    k, verdicts = stop_point(ids, [worse], None, 0, margin=0.1)
    assert verdicts == {"mrr": "fail"} and worse.upper[k - 1] < -0.1 <= worse.upper[k - 2]
    # no difference at all: on the unit scale every X is 1/2 and the candidate drop of 0.1 is m = 0.45;
    # the bets stay above their cap c / m = 0.5 / 0.45, so each question multiplies the capital by
    # 1 + (0.5 / 0.45)(0.5 - 0.45), and 0.5 (1 + 0.05 / 0.9)^t reaches 1 / 0.05 at t = 69
    ids = [f"q{i}" for i in range(200)]
    (same,) = paths(ids, samples([1.0] * 200), samples([1.0] * 200), ["mrr"], 0.05)
    k, verdicts = stop_point(ids, [same], None, 0, margin=0.1)
    assert k == math.ceil(math.log(2 / 0.05) / math.log(1 + 0.05 / 0.9)) == 69
    assert verdicts == {"mrr": "pass"} and same.lower[k - 1] > -0.1 >= same.lower[k - 2]
    (same_eb,) = paths(ids, samples([1.0] * 200), samples([1.0] * 200), ["mrr"], 0.05, sequence="eb")
    assert stop_point(ids, [same_eb], None, 0, margin=0.1)[0] == 148  # the empirical-Bernstein sequence's
    # two metrics: one failing stops the gate at once, whatever the other says
    ids = [f"q{i}" for i in range(80)]
    a2 = [{"id": q, "metrics": {"mrr": 1.0, "ndcg": 1.0}} for q in ids]
    b2 = [{"id": q, "metrics": {"mrr": v, "ndcg": 1.0}} for q, v in zip(ids, [0.0, 0.5] * 40)]
    k2, v2 = stop_point(ids, paths(ids, a2, b2, ["mrr", "ndcg"], 0.05), None, 0, margin=0.1)
    assert v2["mrr"] == "fail" and v2["ndcg"] == "continue"


def test_the_gate_where_the_questions_run_out_is_the_fixed_n_gate_with_its_exit_code_and_junit(project, tmp_path):
    ok = lab(project, "race", "small-retrieval", "small-bm25", "--gate", "0.5", "--junit", str(tmp_path / "ok.xml"))
    assert ok.returncode == 0, ok.stderr
    assert "the fixed-n gate over those questions" in ok.stdout and "gate PASSED" in ok.stdout
    assert 'failures="0"' in (tmp_path / "ok.xml").read_text()
    # small-retrieval against small-bm25: MRR 0.0417 lower, more than a margin of 0
    bad = lab(project, "race", "small-bm25", "small-retrieval", "--gate", "0", "--junit", str(tmp_path / "bad.xml"))
    assert bad.returncode == 1, bad.stderr
    assert "gate FAILED" in bad.stdout and 'failures="1"' in (tmp_path / "bad.xml").read_text()
    p = lab(project, "race", "small-retrieval", "small-bm25", "--junit", str(tmp_path / "x.xml"))
    assert p.returncode == 2 and "--junit needs --gate" in p.stderr


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    import shutil
    from pathlib import Path

    project = tmp_path_factory.mktemp("race") / "project"
    shutil.copytree(Path(__file__).parents[1] / "fixtures", project)
    first = lab(project, "race", "small-retrieval", "small-bm25", "--max", "3", "--step", "2")
    second = lab(project, "race", "small-retrieval", "small-bm25", "--step", "2", "--by-category")
    return project, first, second


def race_json(project, proc):
    line = next(x for x in proc.stdout.splitlines() if x.startswith("race: "))
    return json.loads((project / line[6:]).read_text())


def test_a_budget_stops_the_race_and_a_rerun_continues_the_same_order(raced):
    project, first, second = raced
    assert first.returncode == 0, first.stderr
    r1 = race_json(project, first)
    assert (r1["reason"], r1["stopped_at"], r1["n_total"], r1["questions_saved"]) == ("budget", 3, 6, 3)
    assert "rerun with a larger --max" in first.stdout and "the fixed-n paired test" in first.stdout
    assert second.returncode == 0, second.stderr
    r2 = race_json(project, second)
    assert (r2["reason"], r2["stopped_at"]) == ("exhausted", 6)
    assert r2["order"][:3] == r1["order"][:3] and r2["order_sha256"] == r1["order_sha256"]  # one seeded order
    assert sorted(r2["order"]) == [f"f{i}" for i in range(1, 7)]
    path = r2["paths"][0]
    assert path["metric"] == "mrr" and len(path["lower"]) == 6 and path["ids"] == r2["order"]
    assert "category" not in path and "categories" not in r1 and "by_category" not in r1
    # --by-category: a sequence per category too (one question each here), the family of 7 sharing alpha
    cats = ["direct_fact", "numerical", "temporal", "spanning", "comparative", "relationship"]
    assert sorted(r2["categories"]) == sorted(cats) and sorted(r2["by_category"]) == sorted(cats)
    per_cat = [p for p in r2["paths"] if "category" in p]
    assert len(per_cat) == 6 and all(len(p["ids"]) == 1 for p in per_cat)
    assert r2["by_category"]["temporal"]["mrr"]["verdict"] == "undecided" and r2["by_category"]["temporal"]["mrr"]["n"] == 1
    assert "every sequence at alpha / 7" in second.stdout and "  mrr in temporal: undecided" in second.stdout
    # the runs of the questions used: ordinary run folders, marked, never a NAME's full run
    results = json.loads((project / r2["runs"]["small-bm25"] / "results.json").read_text())
    assert results["sequential"]["stopped_at"] == 6 and results["sample"]["is_sample"] is True
    assert results["sample"]["n_questions"] == 6
    assert not (project / "reports" / "small-bm25" / "LATEST-FULL").exists()
    samples = [json.loads(x) for x in (project / r2["runs"]["small-bm25"] / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in samples] == r2["order"]


def test_a_race_quiets_its_runs_by_argument_and_leaves_the_lab_logger_as_it_found_it(project, monkeypatch, caplog):
    """Every run of a race (the batches, then the two runs it keeps) is asked for by ``quiet=True``,
    so no run's start-up plan lines bury the race's own; the ``lab`` logger's level belongs to
    whoever set logging up and is the same during each run as before the race."""
    caplog.set_level(logging.INFO, logger="lab")
    calls = []

    def spy(name, real):
        def call(cfg, opts, **kw):
            calls.append((name, kw, logging.getLogger("lab").level))
            return real(cfg, opts, **kw)
        return call

    monkeypatch.setattr(race_module, "run_experiment", spy("run_experiment", race_module.run_experiment))
    monkeypatch.setattr(race_module, "evaluate", spy("evaluate", race_module.evaluate))
    opts = RunOptions(project_root=project, reports_root=project / "reports", cache_root=project / "cache",
                      show_progress=False)
    folder = race_module.race(("small-retrieval", "small-bm25"), project / "experiments", {}, opts,
                              RaceOptions(max_n=2, step=2), say=lambda line: None)
    # one batch of 2 and the stop's paths (2 runs each), then the race's own 2 runs, marked as the race's
    assert calls == [("run_experiment", {"quiet": True}, logging.INFO)] * 4 + \
        [("evaluate", {"quiet": True}, logging.INFO)] * 2
    assert logging.getLogger("lab").level == logging.INFO
    assert not [r for r in caplog.records if r.name == "lab.eval.runner" and r.levelno == logging.INFO]
    kept = json.loads((folder / "race.json").read_text())["runs"]["small-bm25"]
    results = json.loads((project / kept / "results.json").read_text())
    assert results["sequential"]["stopped_at"] == 2 and results["sequential"]["of"] == 6
    sample = results["sample"]
    assert (sample["is_sample"], sample["n_questions"], sample["n_total"]) == (True, 2, 6)


def test_bad_race_input_exits_2(project):
    p = lab(project, "race", "small", "small")
    assert p.returncode == 2 and "two different experiments" in p.stderr
    p = lab(project, "race", "small-retrieval", "small-bm25", "--effect", "-1")
    assert p.returncode == 2 and "--effect -1.0" in p.stderr
    p = lab(project, "race", "small-retrieval", "small-bm25", "--metric", "mmr")
    assert p.returncode == 2 and "unknown metric 'mmr'" in p.stderr and "mrr" in p.stderr
    p = lab(project, "race", "small-retrieval", "small-bm25", "--metric", "accuracy", "--step", "2")
    assert p.returncode == 2 and "--metric accuracy: no question of the first 2" in p.stderr
    assert "a retrieval-only race has no judge scores" in p.stderr
    assert not (project / "reports" / "_race").exists() or not any(
        f for f in (project / "reports" / "_race").rglob("race.json"))


@pytest.mark.browser
def test_the_race_page_plots_the_sequence(raced):
    from pages import Page, browser

    project, _, second = raced
    page_path = project / next(x for x in second.stdout.splitlines() if x.startswith("comparison: "))[12:]
    with browser() as b:
        page = Page(b, page_path)
        chart = page.locator("svg.race-chart[data-metric=mrr]")
        assert chart.count() == 1 and chart.locator("polygon").count() == 1 and chart.locator("line.stop").count() == 1
        assert "stopped after 6 of 6 questions" in page.locator("#race-summary").inner_text()
        assert page.locator("#race-categories tr[data-category]").count() == 6
        assert page.errors == []


def test_a_race_is_hopeless_when_the_whole_set_could_not_detect_the_effect_that_matters():
    """With --effect 0.05 and 40 questions of spread 0.5: the whole set could detect no less than
    mde(40, 0.5) > 0.05, so the race stops as futile once it has read the spread (10 questions)."""
    from lab.stats.power import mde

    ids = [f"q{i}" for i in range(40)]
    (p,) = paths(ids, samples([0.5] * 40), samples([0.0, 1.0] * 20), ["mrr"], 0.05)
    assert mde(40, float(np.std([-0.5, 0.5] * 5, ddof=1))) > 0.05
    assert stop_point(ids, [p], 0.05, 0, total=40) == (10, {"mrr": "futile"})
    assert stop_point(ids, [p], 0.05, 0) is None  # without the set's size, only the sequence decides
    assert stop_point(ids, [p], 2.0, 0, total=40)[1] == {"mrr": "futile"}  # any effect inside the range: futile


@pytest.mark.slow
def test_a_judged_race_decides_on_judge_scores_and_its_runs_keep_the_judges_checks(project):
    """A race on accuracy with the packaged SmolLM2 answering and judging (plumbing, not quality):
    the batches skip the judge's calibration and checks, the runs of the questions used keep them."""
    (project / "experiments" / "small-top2.yaml").write_text(
        "schema_version: 1\nextends: small\ndescription: small, top 2\nretriever:\n  name: vector\n  top_k: 2\n")
    p = lab(project, "race", "small", "small-top2", "--metric", "accuracy", "--max", "4", "--step", "2")
    assert p.returncode == 0, p.stderr
    race = race_json(project, p)
    assert (race["reason"], race["stopped_at"]) == ("budget", 4)
    assert race["verdicts"]["accuracy"]["n"] == 4 and len(race["paths"][0]["lower"]) == 4
    assert -4 <= race["paths"][0]["lower"][-1] <= race["paths"][0]["upper"][-1] <= 4
    results = json.loads((project / race["runs"]["small"] / "results.json").read_text())
    assert results["config"]["judge"]["calibration"] is True and "judge_checks" in results
    assert results["sequential"]["metrics"] == ["accuracy"]


def test_a_prefix_file_holds_the_questions_it_was_given_not_an_older_sets(tmp_path):
    """The prefix of a race's order is written as an eval set; an eval set edited in place (or
    another set reusing its ids) must give a new file, never the first set's questions under the
    same ids."""
    from lab.evalsets.evalset import EvalRow

    def rows(word):
        return [EvalRow(id=f"q{i}", question=f"{word} question {i}?", reference_answer="r", category="c")
                for i in range(4)]

    first = race_module._prefix_file(tmp_path, rows("old"), 3)
    second = race_module._prefix_file(tmp_path, rows("new"), 3)
    assert [json.loads(x)["question"] for x in second.read_text().splitlines()] == \
        ["new question 0?", "new question 1?", "new question 2?"]
    assert "old question 0?" in first.read_text()  # an older race's prefix is left as it was
    assert race_module._prefix_file(tmp_path, rows("new"), 3) == second  # the same prefix: the same file
    second.write_text(second.read_text().replace("new", "tampered"))  # a damaged file is never trusted
    assert "new question 0?" in race_module._prefix_file(tmp_path, rows("new"), 3).read_text()



def test_a_race_on_retrieval_metrics_answers_and_judges_nothing(project, monkeypatch):
    """Two configs that answer and judge (the fixture's small, and small with top 2), raced on MRR
    (the default metric) without --retrieval-only: no LLM is built, and the runs the race keeps
    are retrieval-only runs that say so in their config."""
    import lab.eval.runner
    import lab.eval.target
    import lab.models.llm
    import lab.rag.pipeline

    (project / "experiments" / "small-top2.yaml").write_text(
        "schema_version: 1\nextends: small\ndescription: small, top 2\nretriever:\n  name: vector\n  top_k: 2\n")
    built = []

    def refuse(*args, **kwargs):
        built.append(args)
        raise AssertionError("a race on retrieval metrics built an LLM")

    for module in (lab.models.llm, lab.rag.pipeline, lab.eval.runner, lab.eval.target):
        monkeypatch.setattr(module, "build_llm", refuse)
    opts = RunOptions(project_root=project, reports_root=project / "reports", cache_root=project / "cache",
                      show_progress=False)
    folder = race_module.race(("small", "small-top2"), project / "experiments", {}, opts,
                              RaceOptions(max_n=2, step=2), say=lambda line: None)
    race = json.loads((folder / "race.json").read_text())
    assert built == [] and race["sequence"] == "betting" and race["llm_calls"] == {"small": 0, "small-top2": 0}
    for run in race["runs"].values():
        config = json.loads((project / run / "results.json").read_text())["config"]
        assert (config["generation"], config["judge"], config["ragas"]) == (None, None, None)


def test_a_race_recorded_before_races_named_their_sequence_renders_as_empirical_bernstein(raced, tmp_path):
    import shutil

    from lab.report.race import render_race

    project, _, second = raced
    line = next(x for x in second.stdout.splitlines() if x.startswith("race: "))
    assert "read with the hedged-capital betting confidence sequence" in second.stdout
    folder = tmp_path / "old-race"
    shutil.copytree((project / line[6:]).parent, folder)
    old = json.loads((folder / "race.json").read_text())
    assert old.pop("sequence") == "betting"
    old["runs"] = {k: str(project / v) for k, v in old["runs"].items()}
    (folder / "race.json").write_text(json.dumps(old))
    lines, passed = render_race(folder)
    assert passed is None and "  read with the empirical-Bernstein confidence sequence (Waudby-Smith & Ramdas)" in lines
    assert "95% empirical-Bernstein confidence sequence (Waudby-Smith &amp; Ramdas), valid" in \
        (folder / "compare.html").read_text()
