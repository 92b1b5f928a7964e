"""Silent wrong answers and misleading messages: each case stops with exit code 2 and a message
naming the file, line, field or option and the fix, or gives the right figure, where it used to
give a wrong one with exit code 0."""

from __future__ import annotations

import re

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.cli import main
from lab.errors import DataError
from lab.evalsets.evalset import load_eval_set
from lab.evalsets.interop import import_set
from lab.metrics.human import CLASSES, LABEL_SCORES
from lab.progress import printable
from report_fixtures import ACC_A, MRR_A, write_pair, write_run

ROOT = Path(__file__).resolve().parents[2]
ROW = {"id": "z1", "question": "Who founded Brightwater Kilns?", "keywords": ["Odile"],
       "reference_answer": "Odile Ferrand.", "category": "direct_fact"}


def write_set(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- lab agree, every judging method's record --------------------------------------------------

#: Labels of run A (report_fixtures: judge accuracy q01 4, q02 4, q03 3, q04 3, q11 1, q13 4, q15 1).
LABELS = {"q01": {"label": "correct", "accuracy": None}, "q02": {"label": "partly", "accuracy": None},
          "q03": {"label": "partly", "accuracy": None}, "q04": {"label": "wrong", "accuracy": None},
          "q11": {"label": "wrong", "accuracy": None}, "q13": {"label": "correct", "accuracy": 4},
          "q15": {"label": "wrong", "accuracy": None}}
KAPPA = 16 / 23  # the hand-worked table of tests/metrics/test_human.py: the same classes here


def probability_score(acc: int) -> float:
    """A probability-weighted method's score near the whole score ``acc`` (same nearest class)."""
    return acc - 0.2 if acc > 1 else 1.2


def judgement(method: str, acc: int | None) -> dict:
    """A judgement record as ``method`` writes it (lab.judge.rubric / lab.judge.methods)."""
    if acc is None:
        return {"status": "failed", "error": "no reply", "raw": "", "attempts": 1, "cached": False,
                "accuracy": None, "completeness": None, "relevance": None, "feedback": None,
                "prompt_tokens": 0, "completion_tokens": 0}
    if method == "rubric":
        return {"status": "ok", "accuracy": acc, "completeness": acc, "relevance": acc, "feedback": "ok",
                "attempts": 1, "cached": False, "prompt_tokens": 300, "completion_tokens": 50}
    x = probability_score(acc)
    rec = {"status": "ok", "accuracy": x, "completeness": x, "relevance": x, "feedback": "expected scores",
           "attempts": 1, "cached": False, "prompt_tokens": 0, "completion_tokens": 0}
    if method == "claims":
        return {**rec, "claims": [{"fact": "a fact", "stated": 0.9}], "contradicts": 0.05, "mass": {"relevance": 0.98}}
    return {**rec, "mass": {"accuracy": 0.97, "completeness": 0.95, "relevance": 0.99}}


@pytest.mark.parametrize("method", ["rubric", "rubric-expected", "per-dimension", "claims"])
def test_agree_pairs_the_judgements_of_every_judging_method(cli, tmp_path, method):
    run = write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for s, acc in zip(samples, ACC_A):
        s["judgement"] = judgement(method, acc)
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"format": "lab-labels-v1", "run": "base/20261122-100000",
                                  "fingerprint": "basebase", "labels": LABELS}))
    code, out, err = cli("agree", run, labels)
    assert code == 0, err
    a = json.loads((run / "agreement.json").read_text())
    assert (a["n_judged"], a["n_pairs"], a["left_out"]) == (14, 7, [])
    assert a["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    scores = [acc if method == "rubric" else probability_score(acc) for acc in ACC_A if acc is not None]
    assert a["accuracy_mean"]["judge_only"]["mean"] == pytest.approx(sum(scores) / 14)
    assert "7 labelled of 14 judged answers" in out
    if method != "rubric":
        assert "disagreements (human vs judge): q04 1 vs 2.8, q02 3 vs 3.8" in out


def test_a_score_takes_the_class_of_its_nearest_whole_score():
    from lab.metrics.human import score_class

    assert [score_class(s) for s in (1, 1.49, 1.5, 2, 3, 3.49, 3.5, 4, 5)] == [
        "wrong", "wrong", "partly", "partly", "partly", "partly", "correct", "correct", "correct"]
    assert set(LABEL_SCORES) == set(CLASSES)


# --- labels files --------------------------------------------------------------------------------


def labels_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "labels.json"
    path.write_text(text)
    return path


def test_a_key_written_twice_in_a_labels_file_is_an_error(cli, tmp_path):
    run = write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")
    text = ('{"format": "lab-labels-v1", "run": "base/20261122-100000", "fingerprint": "basebase", "labels": '
            '{"q01": {"label": "correct", "accuracy": null}, "q01": {"label": "wrong", "accuracy": null}}}')
    code, _, err = cli("agree", run, labels_file(tmp_path, text))
    assert code == 2
    assert err == (f"error: {tmp_path / 'labels.json'}: key 'q01' is written twice in one object (JSON would keep "
                   "the last)\n  fix: keep one of them: one label per question\n")
    assert not (run / "agreement.json").exists()


def test_a_labels_file_nested_100000_deep_is_an_error_not_a_recursion_error(cli, tmp_path):
    run = write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")
    code, _, err = cli("agree", run, labels_file(tmp_path, "[" * 100_000 + "]" * 100_000))
    assert code == 2 and "RecursionError" not in err
    assert err.startswith(f"error: {tmp_path / 'labels.json'}: nested too deeply to be a labels file\n  fix: ")


# --- the report page's labels, in node: a question id "__proto__" ---------------------------------

HARNESS = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const ids = JSON.parse(process.argv[2]);
const store = {data: {"lab-labels:base/1:fp": process.argv[3]},
               getItem(k) { return k in this.data ? this.data[k] : null; }, setItem(k, v) { this.data[k] = v; }};
const count = {textContent: ""};
let click = null, file = null;
const download = {disabled: true, addEventListener(type, f) { click = f; }};
const nodes = {"labels-bar": {dataset: {run: "base/1", fingerprint: "fp", total: String(ids.length)}},
               "labels-count": count, "labels-download": download};
global.window = {localStorage: store};
global.document = {
  getElementById: (id) => nodes[id] || null,
  querySelectorAll: (sel) => sel === "#questions tr.qrow" ? ids.map((id, i) => ({dataset: {i: String(i), id}})) : [],
  addEventListener() {}, createElement: () => ({click() {}, remove() {}}), body: {appendChild() {}},
};
global.Blob = class { constructor(parts) { file = parts.join(""); } };
global.URL = {createObjectURL: () => "blob:labels", revokeObjectURL() {}};
global.setTimeout = () => 0;
require("vm").runInThisContext(src);
click();
process.stdout.write(JSON.stringify({count: count.textContent, file: JSON.parse(file)}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_label_of_a_question_named_proto_is_downloaded(tmp_path):
    stored = {"__proto__": {"label": "wrong", "accuracy": None}, "q1": {"label": "correct", "accuracy": 4}}
    script = ROOT / "lab" / "report" / "templates" / "_labels.js"
    out = subprocess.run(["node", "-e", HARNESS, "--", str(script), json.dumps(["__proto__", "q1"]),
                          json.dumps(stored)], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(out.stdout)
    assert seen["count"].startswith("2 of 2 answers labelled")
    assert seen["file"]["labels"] == stored and list(seen["file"]["labels"]) == ["__proto__", "q1"]


# --- eval sets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("question", ["\u200b", "\ufeff\u200b", "\u2060 \u200b", "\u200e\u200f"])
def test_a_question_of_only_invisible_characters_is_refused(tmp_path, question):
    path = write_set(tmp_path / "set.jsonl", ROW, {**ROW, "id": "z2", "question": question})
    with pytest.raises(DataError) as exc:
        load_eval_set(path, None)
    assert exc.value.message == (f"{path} line 2: field 'question': Value error, the question is only whitespace "
                                 f"or invisible characters ({question!r})")


@pytest.mark.parametrize("keyword", ["\u200b", "\ufeff", "\u2060", " \u200b "])
def test_an_invisible_keyword_is_refused(tmp_path, keyword):
    path = write_set(tmp_path / "set.jsonl", {**ROW, "keywords": ["Odile", keyword]})
    with pytest.raises(DataError) as exc:
        load_eval_set(path, None)
    assert exc.value.message == (f"{path} line 1: field 'keywords': Value error, keyword 1 is empty or invisible "
                                 f"({keyword!r}): no chunk can be checked for it")


def test_visible_text_with_a_zero_width_character_is_kept(tmp_path):
    path = write_set(tmp_path / "set.jsonl", {**ROW, "question": "Who\u200b founded it?", "keywords": ["Od\u00adile"]})
    assert load_eval_set(path, None).rows[0].question == "Who\u200b founded it?"


def test_an_eval_set_that_is_a_folder_is_named_as_a_folder(tmp_path):
    with pytest.raises(DataError) as exc:
        load_eval_set(tmp_path, None)
    assert str(exc.value) == f"eval set {tmp_path} is a folder\n  fix: give the path of the eval set's .jsonl file"


def test_an_empty_categories_list_says_so(tmp_path):
    path = write_set(tmp_path / "set.jsonl", ROW)
    with pytest.raises(DataError) as exc:
        load_eval_set(path, [])
    assert exc.value.message == (f"{path} line 1: field 'category': 'direct_fact' is not a declared category "
                                 "(data.categories is an empty list)")
    assert exc.value.hint.startswith("list the categories in data.categories, e.g. [direct_fact, temporal]")


# --- lab generate's options ----------------------------------------------------------------------


@pytest.mark.parametrize("mix, says", [
    ("direct_fact=-1,numerical=2", "--mix: the share of direct_fact is -1, not a number of 0 or more"),
    ("direct_fact=nan", "--mix: the share of direct_fact is nan, not a number of 0 or more"),
    ("direct_fact=inf,numerical=1", "--mix: the share of direct_fact is inf, not a number of 0 or more"),
])
def test_generate_refuses_a_mix_that_is_not_shares(cli, project, mix, says):
    code, _, err = cli("generate", "--kb", project / "kb", "--out", project / "new.jsonl", "--mix", mix)
    assert code == 2 and err.startswith(f"error: {says}\n  fix: give each category a share of 0 or more")
    assert not (project / "new.jsonl").exists()


@pytest.mark.parametrize("value, says", [("0", "argument --max-candidates: 0 is below 1: give 1 or more"),
                                         ("-1", "argument --max-candidates: -1 is below 1: give 1 or more"),
                                         ("many", "argument --max-candidates: 'many' is not a whole number")])
def test_generate_refuses_max_candidates_below_one(cli, project, value, says):
    code, _, err = cli("generate", "--kb", project / "kb", "--out", project / "new.jsonl", "--max-candidates", value)
    assert code == 2 and says in err


# --- CSV import ----------------------------------------------------------------------------------

HEAD = "question,reference_answer,keywords,category\n"


def csv_import(tmp_path: Path, text: str, **kw) -> Path:
    source = tmp_path / "qs.csv"
    source.write_text(text, encoding="utf-8")
    import_set("csv", source, tmp_path / "out.jsonl", **kw)
    return source


@pytest.mark.parametrize("text, says, fix", [
    (HEAD + "Who?,Odile,Odile,direct_fact\nWhen?,2009,2009\n", "line 3: 3 cells, the header has 4",
     "give every column its cell (an empty one is two commas in a row: ,,)"),
    (HEAD + "Who?,Odile,Odile,direct_fcat\n", "line 2: field 'category': 'direct_fcat' is not a declared category",
     "did you mean 'direct_fact'? use one of direct_fact,"),
    (HEAD + 'Who?,"Odile,Odile,direct_fact\nWhen?,2009,2009,temporal\n',
     "line 2: a quote opened in a cell is never closed", 'close it ("..."; a quote inside a quoted cell'),
    (HEAD + 'Who?,"Odile"s,Odile,direct_fact\n', "line 2: ',' expected after '\"'", "quote a cell"),
])
def test_a_broken_csv_row_is_named_not_guessed(tmp_path, text, says, fix):
    with pytest.raises(DataError) as exc:
        csv_import(tmp_path, text)
    assert exc.value.message == f"{tmp_path / 'qs.csv'} {says}" and exc.value.hint.startswith(fix)
    assert not (tmp_path / "out.jsonl").exists()


def test_csv_categories_can_be_declared(tmp_path):
    csv_import(tmp_path, HEAD + "Who?,Odile,Odile,gossip\n", categories=["gossip"])
    assert [r.category for r in load_eval_set(tmp_path / "out.jsonl", ["gossip"]).rows] == ["gossip"]


def test_a_200_kb_cell_is_read_and_a_cell_over_the_bound_is_named(tmp_path, monkeypatch):
    import lab.evalsets.csvfile as csvfile

    answer = "x" * 200_000
    csv_import(tmp_path, HEAD + f"Who?,{answer},Odile,direct_fact\n")
    assert load_eval_set(tmp_path / "out.jsonl", None).rows[0].reference_answer == answer
    monkeypatch.setattr(csvfile, "MAX_CELL", 150_000)
    (tmp_path / "out.jsonl").unlink()
    with pytest.raises(DataError) as exc:
        csv_import(tmp_path, HEAD + f"Who?,Odile,Odile,direct_fact\nWhen?,{answer},2009,temporal\n")
    assert exc.value.message == f"{tmp_path / 'qs.csv'} line 3: a cell is over 150,000 characters"


# --- export, then import -------------------------------------------------------------------------


def test_a_keyword_only_set_survives_export_and_import(cli, project, tmp_path):
    exported, back = tmp_path / "set.ragas.jsonl", tmp_path / "back.jsonl"
    code, _, err = cli("export", project / "eval.jsonl", "--out", exported)
    assert code == 0, err
    code, out, err = cli("import", "ragas", exported, "--kb", project / "kb", "--out", back)
    assert code == 0, err
    before, after = load_eval_set(project / "eval.jsonl", None).rows, load_eval_set(back, None).rows
    assert [(r.id, r.question, r.keywords, r.category) for r in after] == [
        (r.id, r.question, r.keywords, r.category) for r in before]
    assert "ignored_fields []" in out


def test_a_row_with_neither_contexts_nor_keywords_says_so_not_pass_the_kb(project, tmp_path):
    source = write_set(tmp_path / "old.jsonl", {"user_input": "q", "reference": "a"})
    with pytest.raises(DataError) as exc:
        import_set("ragas", source, tmp_path / "out.jsonl", kb=project / "kb")
    assert exc.value.message == f"{source} line 1: the row has neither reference_contexts nor keywords"
    assert "--kb" not in exc.value.hint and "export it again" in exc.value.hint


# --- what the terminal shows ---------------------------------------------------------------------

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e"
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def test_printable_writes_controls_as_escapes_and_keeps_lines():
    assert printable(f"a{ESCAPES}b\tc\nd\r\x00\x7f") == f"a{SHOWN}b\tc\nd\\r\\x00\\x7f"


def test_lab_list_shows_a_description_escaped(cli, project):
    (project / "experiments" / "esc.yaml").write_text(
        'schema_version: 1\nextends: small-retrieval\ndescription: "\\e]0;pwned\\a\\e[2J\\x9b31m\\u202e listed"\n')
    code, out, _ = cli("list", "--experiments", project / "experiments")
    assert code == 0
    assert re.search(rf"^esc {{2,}}{re.escape(SHOWN)} listed \(extends small-retrieval\)$", out, re.M), out
    assert not any(c in out for c in CONTROLS)


def test_gate_and_show_print_a_run_name_escaped(cli, tmp_path):
    a, b = write_pair(tmp_path / "reports")
    results = json.loads((a / "results.json").read_text())
    (a / "results.json").write_text(json.dumps({**results, "name": f"base{ESCAPES}"}))
    for args in (("gate", a, b, "--metric", "mrr=0.5"), ("show", a), ("compare", a, b, "--no-html")):
        code, out, err = cli(*args)
        assert code in (0, 1), err
        assert f"base{SHOWN}" in out and not any(c in out + err for c in CONTROLS), args


# --- lab sweep --set -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec, value", [('description="x', '"x'), ("retriever.top_k=[1", "[1"),
                                         ("retriever.top_k=*a", "*a")])
def test_a_set_value_that_is_not_yaml_names_the_option(cli, project, spec, value):
    code, _, err = cli("sweep", "small-retrieval", "--set", spec, "--experiments", project / "experiments",
                       "--reports", project / "reports")
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"error: --set {spec!r}: the value {value!r} is not valid YAML (")
    assert "\n  fix: quote text that holds quotes, brackets or a leading * or &" in err


# --- lab list ------------------------------------------------------------------------------------


def test_lab_list_lists_every_config_with_its_problem(cli, project):
    ex = project / "experiments"
    (ex / "dangling.yaml").symlink_to(ex / "gone.yaml")
    (ex / "folder.yaml").mkdir()
    (ex / "empty.yaml").write_text("")
    (ex / "itself.yaml").write_text("schema_version: 1\nextends: itself\n")
    (ex / "broken.yaml").write_text("schema_version: 1\nretriever: [unclosed\n")
    (ex / "child.yaml").write_text("schema_version: 1\nextends: broken\ndescription: a child\n")
    code, out, err = cli("list", "--experiments", ex)
    assert code == 0, err
    lines = dict(re.split(r" {2,}", line, maxsplit=1) for line in out.splitlines())  # name, then 2+ spaces
    assert lines["dangling"] == f"BROKEN: {ex / 'dangling.yaml'}: a symbolic link to {ex / 'gone.yaml'}, which does " \
                                "not exist"
    assert lines["folder"] == f"BROKEN: {ex / 'folder.yaml'}: a folder, not a config file"
    assert lines["empty"] == f"BROKEN: {ex / 'empty.yaml'}: an empty file (a config has at least schema_version: 1)"
    assert lines["itself"] == f"BROKEN: {ex / 'itself.yaml'}: extends cycle: itself -> itself"
    assert lines["broken"].startswith(f"BROKEN: {ex / 'broken.yaml'} line 3: invalid YAML")
    assert lines["child"].startswith(f"BROKEN: {ex / 'broken.yaml'} line 3: invalid YAML")  # its parent's problem
    assert lines["small-retrieval"] == "fixture pipeline, retrieval only (extends small)"  # the rest still listed
    fixtures = [name for name in lines if name.startswith("small")]
    assert len(fixtures) >= 10 and not [n for n in fixtures if lines[n].startswith("BROKEN")]


def test_lab_list_names_an_invalid_key(cli, project):
    (project / "experiments" / "typo.yaml").write_text("schema_version: 1\nextends: small\nretreiver: {top_k: 3}\n")
    code, out, _ = cli("list", "--experiments", project / "experiments")
    assert code == 0
    assert re.search(rf"^typo {{2,}}BROKEN: {re.escape(str(project / 'experiments' / 'typo.yaml'))} line 3: "
                     r"field 'retreiver': unknown key", out, re.M), out


# --- options that used to be blamed on something else ---------------------------------------------


def test_limit_0_is_the_options_fault_not_the_configs(cli, project):
    code, _, err = cli("run", "small-retrieval", "--limit", "0", "--experiments", project / "experiments")
    assert code == 2
    assert "lab run: error: argument --limit: 0 is below 1: give 1 or more, e.g. 20" in err
    assert ".yaml" not in err


def test_optimize_with_no_trials_says_so(cli, project):
    code, _, err = cli("optimize", "small-retrieval", "--trials", "0", "--experiments", project / "experiments")
    assert code == 2 and "argument --trials: 0 is below 1" in err and "widen the --space ranges" not in err


# --- damaged run files reach the user as errors, through every verb that reads them ---------------


@pytest.mark.parametrize("verb", ["report", "show", "compare", "gate"])
@pytest.mark.parametrize("damage", ["samples", "results"])
def test_a_damaged_run_file_is_exit_2_naming_the_file_and_line(cli, tmp_path, verb, damage):
    a, b = write_pair(tmp_path / "reports")
    if damage == "samples":
        text = (a / "samples.jsonl").read_text()
        (a / "samples.jsonl").write_text(text[: len(text) - 200])  # the last line cut short
        says = f"error: {a / 'samples.jsonl'} line 15: not valid JSON ("
    else:
        text = (a / "results.json").read_text()
        (a / "results.json").write_text(text[: len(text) // 2])
        says = f"error: {a / 'results.json'} line 1: not valid JSON ("
    args = {"report": (a,), "show": (a,), "compare": (a, b, "--no-html"), "gate": (a, b)}[verb]
    code, _, err = cli(verb, *args, "--reports", tmp_path / "reports") if verb != "report" else cli(verb, *args)
    assert code == 2, err
    assert err.startswith(says) and "\n  fix: the run folder is damaged" in err and "Traceback" not in err
