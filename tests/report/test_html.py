"""Reports are pure functions of the results files: numbers, rows and escaping, checked on
hand-made runs (tests/report_fixtures.py gives the per-question values behind each figure)."""

import csv
import re
import subprocess
import sys

import pandas as pd
import pytest

from lab.cli import main
from lab.report.compare import compare_view, default_folder, load_runs, render_compare
from lab.report.html import render_run
from report_fixtures import write_pair, write_run, MRR_A, ACC_A


@pytest.fixture
def pair(tmp_path):
    root = tmp_path / "reports"
    a, b = write_pair(root)
    return root, a, b


def test_run_report_shows_means_intervals_and_every_question(pair):
    root, a, _ = pair
    html = render_run(a).read_text()
    # MRR: (7.25 + 1.5) / 15; accuracy over the 14 judged questions: 46 / 14
    assert re.search(r'data-metric="mrr".*?<div class="v">0\.5833</div>\s*<div class="ci">95% CI 0\.\d{4} – 0\.\d{4}',
                     html, re.S)
    assert '<div class="v">3.29</div>' in html and "n = 14" in html
    assert html.count('class="qrow"') == 15 and html.count('class="qdetail"') == 15
    assert "⚠ small (n=3)" in html and "⚠ small (n=12)" not in html
    assert "1 failed judgement</b>" in html and "q05" in html
    assert html.count('<svg role="img"') == 5  # the loss funnel; MRR, nDCG, accuracy, completeness by category


def test_run_report_escapes_every_text(pair):
    """In the page and in the questions' details (JSON in the page, inserted on first opening),
    text from documents, questions and answers is HTML-escaped; the JSON cannot close its tag."""
    import json
    import re

    _, a, _ = pair
    html = render_run(a).read_text()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    m = re.search(r'<script type="application/json" id="q-details"[^>]*>(.*?)</script>', html, re.S)
    assert m and "<" not in m.group(1)  # tojson writes < as \u003c: no </script> inside
    details = "".join(json.loads(m.group(1)))
    assert "<script>window.__pwned" not in details and "<img src=x" not in details
    assert "&lt;script&gt;window.__pwned = 1; document.title = &#34;pwned&#34;&lt;/script&gt;" in details
    assert "&lt;img src=x onerror=&#34;window.__pwned = 3&#34;&gt; escaped?" in html  # a question, in its row
    assert "&lt;script&gt;window.__pwned = 4&lt;/script&gt; An answer" in details
    assert "{{" not in html and "{%" not in html
    assert html.count("<script>") == 1  # the page's own table script, nothing else


def test_thresholds_come_from_the_config(tmp_path):
    default = render_run(write_run(tmp_path / "r", "a", "1", MRR_A, ACC_A, "A")).read_text()
    lenient = render_run(write_run(tmp_path / "r", "b", "1", MRR_A, ACC_A, "A",
                                   thresholds={"mrr": [0.55, 0.5]})).read_text()
    assert '<div class="card bad" data-metric="mrr">' in default  # 0.5833 < 0.75
    assert '<div class="card good" data-metric="mrr">' in lenient  # 0.5833 >= 0.55
    assert "MRR (keywords) 0.55/0.5" in lenient


def test_rendering_twice_gives_the_same_bytes(pair):
    _, a, _ = pair
    first = render_run(a).read_bytes()
    assert render_run(a).read_bytes() == first


def test_exports_hold_one_row_per_question(pair):
    _, a, _ = pair
    render_run(a)
    with open(a / "questions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 15 and rows[0]["id"] == "q01" and float(rows[2]["mrr"]) == 0.5
    df = pd.read_parquet(a / "questions.parquet")
    assert list(df["id"]) == [f"q{i:02d}" for i in range(1, 16)]
    assert df["mrr"].mean() == pytest.approx(8.75 / 15)
    assert df["accuracy"].isna().sum() == 1 and df.loc[4, "judge_status"] == "failed"
    assert not list(a.glob(".*tmp*"))


def test_compare_view_story_paired_and_movers(pair):
    root, _, _ = pair
    v = compare_view(load_runs(["base", "better"], root))
    mrr = next(r for r in v["story"] if r["metric"] == "mrr")
    assert [c["mean"] for c in mrr["cells"]] == [pytest.approx(8.75 / 15), pytest.approx(12.5 / 15)]
    assert mrr["cells"][1]["delta"] == pytest.approx(3.75 / 15) and mrr["cells"][1]["dir"] == "up"
    (p,) = v["pairs"]
    rows = {r["metric"]: r for r in p["rows"]}
    s = rows["mrr"]["overall"]
    # 8 questions gain (seven by 0.5, one by 0.25), none loses: both tests give 2 / 2**8
    assert (s["n"], s["wins"], s["losses"], s["ties"]) == (15, 8, 0, 7)
    assert s["p_permutation"] == s["p_sign"] == 2 / 256
    assert s["ci"][0] > 0 and s["significant"] and s["verdict"] == "better better"
    acc = rows["accuracy"]["overall"]
    assert acc["n"] == 14 and acc["delta"] == pytest.approx(6 / 14) and acc["p_permutation"] == 2 / 64
    temporal = next(c for c in rows["mrr"]["categories"] if c["category"] == "temporal")
    assert temporal["n"] == 3 and temporal["delta"] == pytest.approx(0.5 / 3) and not temporal["significant"]
    movers = {m["metric"]: m for m in p["movers"]}
    assert [m["id"] for m in movers["mrr"]["gained"]] == ["q01", "q03", "q04", "q05", "q08"]
    assert movers["mrr"]["lost"] == [] and (movers["mrr"]["n_up"], movers["mrr"]["n_same"]) == (8, 7)
    assert v["warnings"] == []
    cat = next(t for t in v["per_category"] if t["metric"] == "mrr")
    df_row = next(r for r in cat["rows"] if r["category"] == "direct_fact")
    assert df_row["cells"][1]["delta"] == pytest.approx((10.5 - 7.25) / 12)


def test_compare_page_and_exports(pair):
    root, _, _ = pair
    runs = load_runs(["base", "better"], root)
    out = render_compare(runs, default_folder(runs, root))
    assert out == root / "_compare" / "base--better" / "compare.html"
    html = out.read_text()
    assert "0.5833" in html and "0.8333" in html and "▲ +0.2500" in html
    assert "8 / 0 / 7" in html and "0.0078" in html
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned = 1" in html
    df = pd.read_parquet(out.parent / "questions.parquet")
    assert len(df) == 30 and set(df["experiment"]) == {"base", "better"}
    assert df.pivot(index="id", columns="experiment", values="mrr").loc["q03"].tolist() == [0.5, 1.0]


def test_compare_warns_about_another_eval_set(tmp_path):
    root = tmp_path / "reports"
    write_run(root, "a", "1", MRR_A, ACC_A, "A")
    write_run(root, "b", "1", MRR_A, ACC_A, "A", eval_sha="f" * 64)
    v = compare_view(load_runs(["a", "b"], root))
    assert v["warnings"] and v["warnings"][0].startswith("different eval sets")
    html = render_compare(load_runs(["a", "b"], root), tmp_path / "out").read_text()
    assert "Not comparable:</b> different eval sets" in html


def test_cli_show_and_compare(pair, capsys):
    root, _, _ = pair
    assert main(["show", "base", "--reports", str(root)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^overall\s+15\s+0\.5833\s+0\.5833\s+90\.0%", out, re.M)
    assert re.search(r"^\s+95% CI\s+\[0\.\d{4}, 0\.\d{4}\]", out, re.M)
    assert main(["compare", "base", "better", "--reports", str(root)]) == 0
    out = capsys.readouterr().out
    assert "base -> better mrr: delta +0.2500" in out and "p(perm)=0.0078, 8/0/7 w/l/t" in out
    assert f"comparison: {root / '_compare' / 'base--better' / 'compare.html'}" in out
    assert main(["show", "nope", "--reports", str(root)]) == 2


def test_reports_load_no_model(pair):
    """Re-rendering and comparing read files only: no model library is even imported."""
    root, a, _ = pair
    code = ("import sys; from lab.cli import main; "
            f"assert main(['report', {str(a)!r}]) == 0; "
            f"assert main(['compare', 'base', 'better', '--reports', {str(root)!r}]) == 0; "
            f"assert main(['show', 'better', '--reports', {str(root)!r}]) == 0; "
            "heavy = [m for m in ('torch', 'llama_cpp', 'lancedb', 'sentence_transformers', 'llama_index.core') "
            "if m in sys.modules]; print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_one_name_run_twice_is_labelled_by_run_and_warned(tmp_path):
    import json as _json

    root = tmp_path / "reports"
    write_run(root, "a", "20261122-100000", MRR_A, ACC_A, "A")
    second = write_run(root, "a", "20261122-120000", MRR_A, ACC_A, "A")
    results = _json.loads((second / "results.json").read_text())
    results["config_fingerprint"] = "changed"
    (second / "results.json").write_text(_json.dumps(results))
    runs = load_runs([str(root / "a" / "20261122-100000"), "a"], root)
    assert [r.label for r in runs] == ["a@20261122-100000", "a@20261122-120000"]
    out = render_compare(runs, default_folder(runs, root))
    assert out.parent.name == "a@20261122-100000--a@20261122-120000"
    html = out.read_text()
    assert "a was run with 2 different resolved configs" in html
    assert 'href="../../a/20261122-100000/report.html"' in html
    v = compare_view(runs)
    assert v["pairs"][0]["rows"][0]["overall"]["verdict"] == "no detectable difference (no question changed)"


def test_golden_spans_show_their_rank_and_twins_and_old_spans_render_as_before(tmp_path):
    """q02 as a run records it now (rank, held by a twin, twins); q03 as older runs did ({source,
    start, end} and the span precision, recall and IoU only)."""
    import json

    from runs import page_text

    folder = write_run(tmp_path / "reports", "spans", "20261125-100000", MRR_A, ACC_A, "A")
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    chars = {"retrieved": 30, "reference": 18, "relevant": 0}
    old = {"span_precision": 0.0, "span_recall": 0.0, "span_iou": 0.0}
    samples[1].update(references=[{"source": "archive.md", "start": 5, "end": 23, "rank": 1, "held_by_twin": True,
                                   "twins": [{"source": "doc2.md", "start": 0, "end": 18},
                                             {"source": "doc9.md", "start": 40, "end": 58}], "n_twins": 2}],
                      span_chars=chars)
    samples[1]["metrics"].update(old, span_mrr=1.0, span_ndcg=1.0, span_recall_any=1.0)
    samples[2].update(references=[{"source": "doc3.md", "start": 0, "end": 18}], span_chars=chars)
    samples[2]["metrics"].update(old)
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    text = page_text(render_run(folder))
    assert "archive.md chars 5–23 <span class=\"kw hit\">rank 1 (a twin)</span>" in text
    assert 'title="doc2.md 0–18; doc9.md 40–58">2 twins: doc2.md, doc9.md</span>' in text
    assert "MRR (spans) 1.0000, nDCG (spans) 1.0000, recall (twins count) 1.0000 · span precision 0.0000" in text
    assert '<span class="ref">doc3.md chars 0–18</span>' in text  # an old span: no rank, no twins
    assert "· span precision 0.0000, recall 0.0000, IoU 0.0000 (0 of 30" in text


def test_probability_weighted_judge_scores_are_shown_with_two_decimals(tmp_path):
    """rubric-expected's scores are floats: the page printed 3.9144718265533447; now 3.91 (judge-v1's
    integers stay as they are)."""
    from lab.report.html import render_run
    from report_fixtures import ACC_A, MRR_A, write_run

    acc = [a if a is None else a - 0.0855281734466553 for a in ACC_A]  # 4 -> 3.9144718265533447
    folder = write_run(tmp_path, "expected", "20261122-100000", MRR_A, acc, "A")
    render_run(folder)
    html = (folder / "report.html").read_text(encoding="utf-8")
    # the question's panel (kept as JSON in the page until opened: its characters escaped)
    assert "accuracy 3.91 \\u00b7 completeness 3.91 \\u00b7 relevance 3.91" in html
    # and the table's cells, each beside the judge's score of the reference answer (5, as written)
    assert "accuracy 3.9144718265533447" not in html and '>3.91<span class="refscore"> / 5</span></td>' in html
    ints = write_run(tmp_path, "ints", "20261122-100000", MRR_A, ACC_A, "A")
    render_run(ints)
    assert "accuracy 4 \\u00b7 completeness 4" in (ints / "report.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# The question table's span recall; judge scores read against the judge's own score of the reference


def _cells(html: str, qid: str) -> list[str]:
    """The cells of question ``qid``'s row in the question table."""
    row = re.search(rf'<tr class="qrow"[^>]*data-id="{qid}".*?</tr>', html, re.S)[0]
    return re.findall(r"<td[^>]*>.*?</td>", row, re.S)


def test_the_question_table_has_span_recall_when_questions_have_it(tmp_path):
    from report_fixtures import write_span_pair

    a, b = write_span_pair(tmp_path / "reports")
    html = render_run(b).read_text()
    heads = re.findall(r'<th class="num" data-key="(\w+)"', html)
    assert heads == ["mrr", "ndcg", "coverage", "span_recall", "span_iou", "accuracy", "completeness", "relevance"]
    # q01: recall 1.0, IoU 0.5 (report_fixtures.SPANS_B); q11: 0.5 and 0.5
    assert _cells(html, "q01")[6:8] == ['<td class="num neutral">1.0000</td>', '<td class="num neutral">0.5000</td>']
    assert _cells(html, "q11")[6] == '<td class="num neutral">0.5000</td>'
    assert 'data-span_recall="1.0"' in html and '<option value="span_recall">Span recall</option>' in html
    old = render_run(write_run(tmp_path / "old", "base", "1", MRR_A, ACC_A, "A")).read_text()
    assert "span_recall" not in old  # no golden spans: no column


@pytest.mark.parametrize("value, reference, colour", [
    (3.91, 4.32, "ok"),  # 0.41 under the reference's own score: amber (red on the fixed 4.5 / 4.0)
    (4, 4, "good"),  # level with it
    (5, 4, "good"),  # above it
    (4.07, 4.32, "good"),  # 0.25 under: the edge of green
    (3.57, 4.32, "ok"),  # 0.75 under: the edge of amber
    (3.56, 4.32, "bad"),  # 0.76 under
    (3, 4, "bad"),
    (None, 4, "neutral"),  # a failed judgement
    (4, None, "neutral"),
])
def test_relative_level(value, reference, colour):
    from lab.report.html import relative_level

    assert relative_level(value, reference) == colour


def test_reference_scores_per_question_category_and_run(tmp_path):
    from lab.report.html import ReferenceScores
    from lab.runfiles import load_run
    from report_fixtures import write_scaled_run

    refs = ReferenceScores.of(*load_run(write_scaled_run(tmp_path)))
    # the run: calibration_summary's mean over the 14 questions whose calibration held: 64.28 / 14
    assert refs.run == {d: pytest.approx(64.28 / 14) for d in ("accuracy", "completeness", "relevance")}
    # direct_fact: q01-q12 but q07, (4 x 4.32 + 3 x 4 + 4 x 5) / 11; temporal: 5, 5, 5
    assert refs.by_category["direct_fact"]["accuracy"] == pytest.approx(49.28 / 11)
    assert refs.by_category["temporal"]["accuracy"] == 5
    assert refs.reference("accuracy", "q01") == (4.32, "question")
    assert refs.reference("accuracy", "q07") == (pytest.approx(64.28 / 14), "fallback")  # its calibration failed
    assert refs.reference("accuracy") == (pytest.approx(64.28 / 14), "run")
    assert refs.reference("mrr", "q01") is None
    old = write_run(tmp_path / "old", "base", "1", MRR_A, ACC_A, "A")
    results, samples = load_run(old)
    results["calibration"] = None
    assert ReferenceScores.of(results, [{**s, "calibration": None} for s in samples]) is None


def test_judge_scores_are_coloured_against_the_reference_answers_score(tmp_path):
    from report_fixtures import write_scaled_run

    html = render_run(write_scaled_run(tmp_path)).read_text()
    acc = {q: _cells(html, q)[6] for q in ("q01", "q02", "q03", "q04", "q05", "q06", "q07", "q08", "q09")}
    assert acc["q01"] == '<td class="num ok">3.91<span class="refscore"> / 4.32</span></td>'
    assert acc["q02"] == '<td class="num good">4<span class="refscore"> / 4</span></td>'
    assert acc["q03"] == '<td class="num good">4.10<span class="refscore"> / 4.32</span></td>'
    assert acc["q04"] == '<td class="num bad">3<span class="refscore"> / 4</span></td>'
    assert acc["q05"] == '<td class="num neutral">failed</td>'
    assert acc["q06"] == '<td class="num good">5<span class="refscore"> / 4</span></td>'
    assert acc["q07"] == ('<td class="num ok" title="the judge scored the run&#39;s reference answers (mean; this one '
                          'has no calibration) 4.59 on accuracy: green when at most 0.25 under it (or above), amber '
                          'when at most 0.75 under it, red further under">4<span class="refscore"> / 4.59</span></td>')
    assert acc["q08"] == '<td class="num ok">3.57<span class="refscore"> / 4.32</span></td>'
    assert acc["q09"] == '<td class="num good">4.07<span class="refscore"> / 4.32</span></td>'
    # the card: 49.65 / 14 = 3.55 against the run's 4.59: red; direct_fact 41.65 / 11 = 3.79 against 4.48: amber
    card = re.search(r'<div class="card (\w+)" data-metric="accuracy">(.*?)</div></div>', html, re.S)
    assert card[1] == "bad" and '<div class="v">3.55</div>' in card[2] and ">reference answers 4.59" in card[2]
    row = re.search(r'<tr data-category="direct_fact">.*?</tr>', html, re.S)[0]
    cell = re.findall(r"<td[^>]*>.*?</td>", row, re.S)[6]  # category, n, MRR, nDCG, coverage, context chars, accuracy
    assert cell.startswith('<td class="num ok" title="95% CI') and cell.endswith(
        '3.79<span class="refscore"> / 4.48</span></td>')
    assert "the judge scored this category&#39;s reference answers (mean) 4.48 on accuracy" in cell
    # the rule, stated once on the page; the judge scores leave the thresholds' legend
    assert ("shown after each score: green when at most 0.25 under it (or above), amber when at most 0.75 under "
            "it, red further under. A question without calibration is read against the run's mean (Accuracy 4.59, "
            "Completeness 4.59, Relevance 4.59)") in html
    assert "Accuracy 4.5/4.0" not in html and "Coverage (keywords) 0.9/0.75 (the config" in html


def test_a_run_without_calibration_keeps_the_fixed_thresholds(tmp_path):
    import json

    from report_fixtures import write_scaled_run

    folder = write_scaled_run(tmp_path)
    samples = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    (folder / "samples.jsonl").write_text("".join(json.dumps({**s, "calibration": None}) + "\n" for s in samples))
    results = json.loads((folder / "results.json").read_text())
    results["calibration"] = None
    (folder / "results.json").write_text(json.dumps(results))
    html = render_run(folder).read_text()
    # 4.5 green, 4.0 amber: 3.91 red, 4 amber, 5 green; no reference beside them, no scale legend
    assert [_cells(html, q)[6] for q in ("q01", "q02", "q06")] == [
        '<td class="num bad">3.91</td>', '<td class="num ok">4</td>', '<td class="num good">5</td>']
    assert '<span class="refscore">' not in html and 'id="judge-scale"' not in html and "Accuracy 4.5/4.0" in html


def test_a_configs_own_judge_thresholds_win(tmp_path):
    from report_fixtures import write_scaled_run

    html = render_run(write_scaled_run(tmp_path, thresholds={"accuracy": [3.5, 3.0]})).read_text()
    q01 = _cells(html, "q01")
    assert q01[6] == '<td class="num good">3.91</td>'  # accuracy: the config's 3.5 / 3.0
    assert q01[7] == '<td class="num ok">3.91<span class="refscore"> / 4.32</span></td>'  # completeness: relative
    assert "Accuracy 3.5/3.0" in html and "Completeness, Relevance are read against" in html
