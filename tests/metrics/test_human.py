"""Judge-human agreement: the arithmetic of lab.metrics.human by hand, and `lab agree` end to end on
a hand-made run (tests/report_fixtures.py's run A) with a labels file whose figures are worked out
below."""

from __future__ import annotations

import json
import math

import pytest

from lab.cli import main
from lab.metrics.human import (Pair, agreement, confusion, human_score, mean_ci, ppi_mean, score_class, spearman,
                               weighted_kappa)
from lab.report.compare import load_runs
from lab.report.html import render_run
from report_fixtures import ACC_A, MRR_A, write_run

# --------------------------------------------------------------------------------------------
# the arithmetic


@pytest.mark.parametrize("score, cls", [(5, "correct"), (4, "correct"), (3, "partly"), (2, "partly"),
                                        (1, "wrong")])
def test_score_classes_follow_the_judge_rubric(score, cls):
    assert score_class(score) == cls


@pytest.mark.parametrize("label, accuracy, score", [("correct", None, 5), ("partly", None, 3), ("wrong", None, 1),
                                                    ("correct", 4, 4), ("wrong", 2, 2)])
def test_human_score_is_the_corrected_accuracy_else_the_label(label, accuracy, score):
    assert human_score(label, accuracy) == score


#: Rows: human wrong / partly / correct; columns: the judge's, same order. n = 10.
HAND_TABLE = [[2, 1, 0],
              [0, 2, 1],
              [1, 0, 3]]


def test_weighted_kappa_of_a_hand_table():
    # weights |i - j| / 2: 0.5 one class apart, 1 two apart.
    # observed disagreement: (w,p) 1 * 0.5 + (p,c) 1 * 0.5 + (c,w) 1 * 1 = 2.0
    # margins: rows 3, 3, 4; columns 3, 3, 4; chance E_ij = row_i * col_j / 10
    # expected disagreement: [0.5 * 3*3 (w,p) + 1 * 3*4 (w,c) + 0.5 * 3*3 (p,w) + 0.5 * 3*4 (p,c)
    #                         + 1 * 4*3 (c,w) + 0.5 * 4*3 (c,p)] / 10 = (4.5 + 12 + 4.5 + 6 + 12 + 6) / 10 = 4.5
    # kappa = 1 - 2.0 / 4.5 = 5/9
    kappa, why = weighted_kappa(HAND_TABLE)
    assert kappa == pytest.approx(5 / 9) and why is None


def test_weighted_kappa_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.metrics")
    human, judge = [], []
    for i, row in enumerate(HAND_TABLE):
        for j, n in enumerate(row):
            human += [i] * n
            judge += [j] * n
    assert sklearn.cohen_kappa_score(human, judge, weights="linear") == pytest.approx(5 / 9)
    classes = ["wrong", "partly", "correct"]
    assert confusion([classes[i] for i in human], [classes[j] for j in judge]) == HAND_TABLE


@pytest.mark.parametrize("table, kappa, why", [
    ([[3, 0, 0], [0, 2, 0], [0, 0, 1]], 1.0, None),  # every pair on the diagonal
    ([[0, 0, 1], [0, 0, 0], [1, 0, 0]], -1.0, None),  # observed 2 * 1 = 2; chance (1*1 + 1*1) / 2 = 1; 1 - 2/1
    ([[0, 0, 0], [0, 0, 0], [0, 0, 4]], None, "the human labels use one class only (correct)"),
    ([[0, 0, 0], [0, 0, 0], [0, 1, 3]], None, "the human labels use one class only (correct)"),  # else 0 by design
    ([[2, 0, 0], [3, 0, 0], [1, 0, 0]], None, "the judge's scores use one class only (wrong)"),
    ([[0, 0, 0], [0, 0, 0], [0, 0, 0]], None, "no pairs"),
])
def test_weighted_kappa_edges(table, kappa, why):
    value, reason = weighted_kappa(table)
    assert value == (pytest.approx(kappa) if kappa is not None else None)
    assert (reason or "").startswith(why or "")
    assert (reason is None) == (why is None)


# The e2e labels below give these human / judge scores (q01 q02 q03 q04 q11 q13 q15):
HUMAN = [5, 3, 3, 1, 1, 4, 1]
JUDGE = [4, 4, 3, 3, 1, 4, 1]


def test_spearman_with_ties_by_hand():
    # mean ranks, human: 1,1,1 -> 2; 3,3 -> 4.5; 4 -> 6; 5 -> 7: [7, 4.5, 4.5, 2, 2, 6, 2]
    # judge: 1,1 -> 1.5; 3,3 -> 3.5; 4,4,4 -> 6: [6, 6, 3.5, 3.5, 1.5, 6, 1.5]; both mean 4
    # deviations' products 6 + 1 - 0.25 + 1 + 5 + 4 + 5 = 21.75; squares 25.5 and 25
    rho, p, why = spearman(HUMAN, JUDGE)
    assert rho == pytest.approx(21.75 / math.sqrt(25.5 * 25)) and 0 < p < 0.05 and why is None
    assert spearman([1, 2], [3, 3]) == (None, None, "constant scores on one side")
    assert spearman([1], [3])[2] == "1 pair: needs 2"


def test_ppi_mean_by_hand():
    # judge on the 7 unlabelled answers 5 4 3 2 5 4 3: mean 26/7; sum of squares 104 - 26^2/7 = 52/7, var 52/42
    # human - judge on the 7 labelled: 1 -1 0 -2 0 0 0: mean -2/7; 6 - 4/7 = 38/7, var 38/42
    # theta = 26/7 - 2/7 = 24/7; se^2 = (52/42)/7 + (38/42)/7 = 90/294 = 15/49; half = 1.96 * sqrt(15) / 7
    out = ppi_mean([5, 4, 3, 2, 5, 4, 3], HUMAN, JUDGE)
    half = 1.96 * math.sqrt(15) / 7
    assert out["mean"] == pytest.approx(24 / 7) and out["rectifier"] == pytest.approx(-2 / 7)
    assert out["ci"] == pytest.approx([24 / 7 - half, 24 / 7 + half])
    assert (out["method"], out["n_labelled"], out["n_unlabelled"], out["why"]) == ("ppi", 7, 7, None)


def test_ppi_with_every_answer_labelled_is_the_human_mean_with_its_t_interval():
    # human 5 3 3 1 1 4 1: mean 18/7; sum of squares 62 - 18^2/7 = 110/7, var 110/42; t(0.975, 6) = 2.446912
    out = ppi_mean([], HUMAN, JUDGE)
    half = 2.446912 * math.sqrt(110 / 42 / 7)
    assert out["method"] == "human mean (every answer labelled)"
    assert out["mean"] == pytest.approx(18 / 7) and out["ci"] == pytest.approx([18 / 7 - half, 18 / 7 + half], abs=1e-5)
    assert ppi_mean([4, 5], [], [])["why"] == "no labelled answers"
    assert ppi_mean([4], [5, 3], [4, 4])["ci"] is None  # one unlabelled answer: no variance


def test_mean_ci_is_a_t_interval():
    # 2, 4, 6: mean 4, sd 2, t(0.975, 2) = 4.302653; half = 4.302653 * 2 / sqrt(3)
    out = mean_ci([2, 4, 6])
    assert out["mean"] == 4 and out["ci"] == pytest.approx([4 - 4.302653 * 2 / math.sqrt(3),
                                                             4 + 4.302653 * 2 / math.sqrt(3)], abs=1e-5)
    assert mean_ci([3]) == {"mean": 3, "ci": None, "n": 1} and mean_ci([])["mean"] is None


def test_agreement_orders_categories_and_lists_disagreements():
    pairs = [Pair("a", "t", 5, 1), Pair("b", "d", 3, 4), Pair("c", "d", 3, 3)]
    out = agreement(pairs, [4], ["d", "t"])
    assert list(out["by_category"]) == ["d", "t"]
    assert [d["id"] for d in out["disagreements"]] == ["a", "b"]  # gap 4, then 1
    t = out["by_category"]["t"]
    assert t["n"] == 1 and t["kappa"] == {"value": None, "why": "the human labels use one class only (correct)"}


# --------------------------------------------------------------------------------------------
# lab agree, end to end

#: Run A's judge accuracy (ACC_A): q01 4, q02 4, q03 3, q04 3, q05 failed, ..., q11 1, q13 4, q15 1.
from report_fixtures import KAPPA, KAPPA_DIRECT, LABELS  # noqa: E402  (shared with the labels page's test)


def labels_doc(**over) -> dict:
    return {"format": "lab-labels-v1", "run": "base/20261122-100000", "fingerprint": "basebase",
            "labels": LABELS, **over}


@pytest.fixture
def run(tmp_path):
    return write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")


def agree(run, tmp_path, doc, capsys) -> tuple[int, str, str]:
    path = tmp_path / "labels.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    code = main(["agree", "base", str(path), "--reports", str(run.parent.parent)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_lab_agree_prints_and_writes_the_figures(run, tmp_path, capsys):
    code, out, err = agree(run, tmp_path, labels_doc(), capsys)
    assert code == 0, err
    a = json.loads((run / "agreement.json").read_text(), parse_constant=pytest.fail)  # no NaN: strict JSON
    assert (a["format"], a["run"], a["fingerprint"]) == ("lab-agreement-v1", "base/20261122-100000", "basebase")
    assert (a["n_answers"], a["n_judged"], a["n_labelled"], a["n_pairs"]) == (15, 14, 8, 7)
    assert a["left_out"] == [{"id": "q05", "why": "judgement failed"}] and a["warnings"] == []
    o = a["overall"]
    assert o["n"] == 7 and o["kappa"]["value"] == pytest.approx(KAPPA)
    assert o["spearman"]["value"] == pytest.approx(21.75 / math.sqrt(25.5 * 25))
    assert o["confusion"] == {"wrong": {"wrong": 2, "partly": 1, "correct": 0},
                              "partly": {"wrong": 0, "partly": 1, "correct": 1},
                              "correct": {"wrong": 0, "partly": 0, "correct": 2}}
    assert list(a["by_category"]) == ["direct_fact", "temporal"]
    assert a["by_category"]["direct_fact"]["n"] == 5
    assert a["by_category"]["direct_fact"]["kappa"]["value"] == pytest.approx(KAPPA_DIRECT)
    assert a["by_category"]["temporal"]["kappa"]["value"] == 1.0  # (c,c), (w,w): observed 0, chance 2/2
    assert a["by_category"]["temporal"]["spearman"]["p"] is None  # 2 pairs: no p-value
    assert a["mapping"]["class"] == {"correct": [4, 5], "partly": [2, 3], "wrong": [1]}
    # judge only: the 14 judged scores sum 46, sum of squares 172: var (172 - 46^2/14) / 13; t(0.975, 13) 2.160369
    judge = a["accuracy_mean"]["judge_only"]
    half = 2.160369 * math.sqrt((172 - 46 ** 2 / 14) / 13 / 14)
    assert judge["n"] == 14 and judge["mean"] == pytest.approx(46 / 14)
    assert judge["ci"] == pytest.approx([46 / 14 - half, 46 / 14 + half], abs=1e-5)
    ppi = a["accuracy_mean"]["ppi"]  # the unlabelled judged answers are q06-q10, q12, q14: 5 4 3 2 5 4 3
    assert ppi["mean"] == pytest.approx(24 / 7)
    assert ppi["ci"] == pytest.approx([24 / 7 - 1.96 * math.sqrt(15) / 7, 24 / 7 + 1.96 * math.sqrt(15) / 7])
    assert [d["id"] for d in a["disagreements"]] == ["q04", "q02"]  # gaps 2 and 1
    lines = out.splitlines()
    assert lines[0].startswith("judge-human agreement: run base/20261122-100000, 7 labelled of 14 judged answers")
    assert any(line.split() == ["overall", "7", "0.696", "0.861"] for line in lines), out
    assert any(line.split() == ["direct_fact", "5", "0.545", "0.806"] for line in lines), out
    assert "mean accuracy, judge only:           3.29 [2.55, 4.02] over 14 answers" in out
    assert "mean accuracy, judge + labels (PPI): 3.43 [2.34, 4.51] (7 labelled, 7 not" in out
    assert "disagreements (human vs judge): q04 1 vs 3, q02 3 vs 4" in out
    assert "left out: q05 (judgement failed)" in out
    assert f"wrote {run / 'agreement.json'}" in out


def test_an_agreement_file_leaves_the_run_readable(run, tmp_path, capsys):
    assert agree(run, tmp_path, labels_doc(), capsys)[0] == 0
    assert render_run(run).is_file()
    assert [r.results["name"] for r in load_runs([str(run)], run.parent.parent)] == ["base"]
    assert main(["show", str(run)]) == 0


def test_labels_of_another_run_of_the_same_config_are_used_with_a_warning(run, tmp_path, capsys):
    code, out, _ = agree(run, tmp_path, labels_doc(run="base/20261121-090000"), capsys)
    assert code == 0
    assert "warning: the labels were made on run 'base/20261121-090000', not 'base/20261122-100000'" in out


BAD = [
    (None, "labels.json does not exist", "Download labels"),
    ("{not json", "labels.json: not JSON (Expecting property name enclosed in double quotes at line 1 column 2)",
     "Download labels"),
    ([1, 2], "labels.json: expected a JSON object, got list", "Download labels"),
    (labels_doc(format="lab-labels-v0"), "labels.json field 'format': expected 'lab-labels-v1', got 'lab-labels-v0'",
     "Download labels"),
    (labels_doc(fingerprint="other"), "labels.json field 'fingerprint': 'other' is not the config fingerprint of run "
                                      "base/20261122-100000 ('basebase')", "pass the run the labels were made on"),
    (labels_doc(labels={}), "labels.json field 'labels': no answer is labelled", "mark answers"),
    (labels_doc(labels={"q16": {"label": "correct", "accuracy": None}}),
     "labels.json field 'labels.q16': 'q16' is not a question of run base/20261122-100000", "did you mean 'q1"),
    (labels_doc(labels={"q01": {"label": "maybe", "accuracy": None}}),
     "labels.json field 'labels.q01.label': 'maybe' is not a label", "use 'correct', 'partly', 'wrong'"),
    (labels_doc(labels={"q01": {"label": "wrong", "accuracy": 6}}),
     "labels.json field 'labels.q01.accuracy': 6 is not an accuracy score", "an integer from 1 to 5"),
    (labels_doc(labels={"q01": {"label": "wrong", "accuracy": "4"}}),
     "labels.json field 'labels.q01.accuracy': '4' is not an accuracy score", "an integer from 1 to 5"),
    (labels_doc(labels={"q01": "correct"}),
     "labels.json field 'labels.q01': expected an object {label, accuracy}, got str", "Download labels"),
    (labels_doc(extra=1), "labels.json field 'extra': unknown field", "format, run, fingerprint and labels"),
]


@pytest.mark.parametrize("doc, message, fix", BAD, ids=[b[1].split(": ", 1)[-1][:40] for b in BAD])
def test_bad_labels_exit_2_and_write_nothing(run, tmp_path, capsys, doc, message, fix):
    if doc is None:
        code = main(["agree", str(run), str(tmp_path / "labels.json")])
        err = capsys.readouterr().err
    else:
        code, _, err = agree(run, tmp_path, doc, capsys)
    assert code == 2
    first, _, hint = err.partition("\n  fix: ")
    assert message in first and first.startswith("error: ") and str(tmp_path / "labels.json") in first
    assert fix in hint
    assert not (run / "agreement.json").exists()


def test_a_run_without_a_judge_is_refused(run, tmp_path, capsys):
    results = json.loads((run / "results.json").read_text())
    results.pop("judge")
    (run / "results.json").write_text(json.dumps(results))
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    (run / "samples.jsonl").write_text("".join(json.dumps({**s, "judgement": None}) + "\n" for s in samples))
    html = render_run(run).read_text()
    assert 'id="labels-bar"' not in html and "class=\\u0022hl" not in html and 'class="hl"' not in html
    code, _, err = agree(run, tmp_path, labels_doc(), capsys)
    assert code == 2 and "has no judge scores" in err and not (run / "agreement.json").exists()


def test_the_report_carries_the_labels_bar_keyed_by_run_and_fingerprint(run):
    html = render_run(run).read_text()
    assert ('id="labels-bar" data-run="base/20261122-100000" data-fingerprint="basebase" data-total="15"'
            in html)
    assert html.count("lab-labels:") == 1  # _labels.js, once


def test_agree_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["agree", "--help"])
    assert exc.value.code == 0
    assert "example: lab agree turn13 ~/Downloads/labels.json" in capsys.readouterr().out
