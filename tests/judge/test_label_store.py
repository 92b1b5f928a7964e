"""The one labels store (lab.judge.labels): a run report's downloaded labels.json imported into it
gives the agreement the file gives (worked out by hand, and against scikit-learn's kappa), an
import made twice changes nothing, a new download replaces only what changed, and the labels
given in lab serve and those imported from a file sit in one table."""

import json
import sqlite3

import pytest
from sklearn.metrics import cohen_kappa_score
from starlette.testclient import TestClient

import lab.judge.labels as labels_module
from lab.errors import DataError
from lab.judge.agree import agreement_with, from_file, from_store, judge_score
from lab.judge.labels import DB_FILE, LabelStore, import_file, load_labels, login_name, store_root
from lab.metrics.human import CLASSES, human_score, score_class
from lab.runfiles import load_run
from lab.serve.app import create_app
from lab.serve.labels import agreement
from report_fixtures import KAPPA, KAPPA_DIRECT, LABELS, write_pair

RUN = "base/20261122-100000"


@pytest.fixture
def reports(tmp_path):
    write_pair(tmp_path / "reports")
    return tmp_path / "reports"


@pytest.fixture
def run_dir(reports):
    return reports / "base" / "20261122-100000"


def write_labels(path, labels=LABELS, run=RUN):
    path.write_text(json.dumps({"format": "lab-labels-v1", "run": run, "fingerprint": "basebase", "labels": labels}))
    return path


def table(reports) -> list[tuple]:
    """Every row of the labels table, as SQLite keeps it."""
    with sqlite3.connect(reports / DB_FILE) as db:
        return db.execute("SELECT * FROM labels ORDER BY run, question_id, annotator").fetchall()


def from_the_file_alone(run_dir, path) -> dict:
    """What lab agree RUN FILE reported when it read the file and no store: the file's labels,
    each one person's human score, paired with the judge."""
    results, samples = load_run(run_dir)
    labels, warnings = load_labels(path, results, [s["id"] for s in samples])
    scores = {q: [human_score(x["label"], x["accuracy"])] for q, x in labels.items()}
    return agreement_with(results, samples, scores, str(path), warnings)


def test_an_imported_file_gives_the_agreement_the_file_gave(run_dir, reports, tmp_path):
    path = write_labels(tmp_path / "labels.json")
    result, imported = from_file(run_dir, path, "ana", reports)
    assert (imported.annotator, imported.new, imported.changed) == ("ana", len(LABELS), 0)
    assert imported.store.path == reports / DB_FILE
    # 7 pairs (q05's judgement failed): worked out in tests/report_fixtures.py, kappa 16/23, direct_fact 6/11
    assert result["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    assert result["by_category"]["direct_fact"]["kappa"]["value"] == pytest.approx(KAPPA_DIRECT)
    before = from_the_file_alone(run_dir, path)
    assert {k: v for k, v in result.items() if k != "labels_file"} == {k: v for k, v in before.items()
                                                                      if k != "labels_file"}
    assert result["labels_file"] == f"{reports / DB_FILE} (ana: the labels of {path})"
    # the same kappa from scikit-learn (linear weights over the ordered classes)
    _, samples = load_run(run_dir)
    pairs = [(human_score(LABELS[s["id"]]["label"], LABELS[s["id"]]["accuracy"]), judge_score(s))
             for s in samples if s["id"] in LABELS and judge_score(s) is not None]
    assert len(pairs) == 7
    reference = cohen_kappa_score([score_class(h) for h, _ in pairs], [score_class(j) for _, j in pairs],
                                  labels=list(CLASSES), weights="linear")
    assert result["overall"]["kappa"]["value"] == pytest.approx(reference) == pytest.approx(16 / 23)


def test_each_label_is_kept_with_who_when_and_the_file_it_came_from(run_dir, reports, tmp_path):
    results, samples = load_run(run_dir)
    import_file(write_labels(tmp_path / "labels.json"), results, samples, reports, "ana")
    rows = {r["question_id"]: r for r in LabelStore(reports).labels(RUN)}
    assert {q: (r["label"], r["accuracy"]) for q, r in rows.items()} == {
        q: (x["label"], x["accuracy"]) for q, x in LABELS.items()}
    assert {(r["annotator"], r["source"], r["fingerprint"], r["note"]) for r in rows.values()} == {
        ("ana", "imported labels.json", "basebase", "")}
    assert all(r["created_at"] == r["updated_at"] and r["created_at"].endswith("Z") for r in rows.values())
    # and the agreement page's download of ana's labels is the file again
    assert LabelStore(reports).export(results, "ana") == {"format": "lab-labels-v1", "run": RUN,
                                                          "fingerprint": "basebase", "labels": LABELS}


def test_importing_the_same_file_twice_changes_nothing(run_dir, reports, tmp_path, monkeypatch):
    results, samples = load_run(run_dir)
    path = write_labels(tmp_path / "labels.json")
    monkeypatch.setattr(labels_module, "_now", lambda: "2026-11-22T10:00:00Z")
    first = import_file(path, results, samples, reports, "ana")
    once = table(reports)
    agreed = from_store(LabelStore(reports), run_dir)
    monkeypatch.setattr(labels_module, "_now", lambda: "2026-11-23T09:00:00Z")  # a day later
    again = import_file(path, results, samples, reports, "ana")
    assert (first.new, first.changed) == (8, 0) and (again.new, again.changed) == (0, 0)
    assert table(reports) == once  # not a timestamp moved
    assert len(once) == len(LABELS)
    assert from_store(LabelStore(reports), run_dir) == agreed


def test_a_new_download_replaces_only_the_labels_that_changed(run_dir, reports, tmp_path, monkeypatch):
    results, samples = load_run(run_dir)
    monkeypatch.setattr(labels_module, "_now", lambda: "2026-11-22T10:00:00Z")
    import_file(write_labels(tmp_path / "labels.json"), results, samples, reports, "ana")
    later = dict(LABELS, q02={"label": "correct", "accuracy": None}, q06={"label": "wrong", "accuracy": 2})
    monkeypatch.setattr(labels_module, "_now", lambda: "2026-11-23T09:00:00Z")
    imported = import_file(write_labels(tmp_path / "labels (1).json", later), results, samples, reports, "ana")
    assert (imported.new, imported.changed) == (1, 1)  # q06 new, q02 changed, the other 7 as they were
    rows = {r["question_id"]: r for r in LabelStore(reports).labels(RUN)}
    assert (rows["q02"]["label"], rows["q02"]["created_at"], rows["q02"]["updated_at"]) == (
        "correct", "2026-11-22T10:00:00Z", "2026-11-23T09:00:00Z")
    assert rows["q02"]["source"] == rows["q06"]["source"] == "imported labels (1).json"
    assert (rows["q01"]["updated_at"], rows["q01"]["source"]) == ("2026-11-22T10:00:00Z", "imported labels.json")


def test_a_label_given_in_lab_serve_and_the_same_in_a_file_keeps_its_note(run_dir, reports, tmp_path):
    results, samples = load_run(run_dir)
    store = LabelStore(reports)
    store.put(RUN, "basebase", "q01", "ana", "correct", None, "checked the date")
    store.put(RUN, "basebase", "q02", "ana", "wrong", None, "missed it")
    imported = import_file(write_labels(tmp_path / "labels.json"), results, samples, reports, "ana")
    assert (imported.new, imported.changed) == (6, 1)  # q01 the same; q02 partly now
    rows = {r["question_id"]: r for r in store.labels(RUN)}
    assert (rows["q01"]["source"], rows["q01"]["note"]) == ("served", "checked the date")
    assert (rows["q02"]["label"], rows["q02"]["source"], rows["q02"]["note"]) == ("partly", "imported labels.json", "")


def test_labels_given_in_the_app_and_imported_from_a_file_sit_in_one_table(run_dir, reports, tmp_path):
    client = TestClient(create_app(reports), base_url="http://127.0.0.1:8765")
    for qid, verdict in [("q01", "correct"), ("q02", "correct"), ("q03", "wrong"), ("q04", "partly")]:
        saved = client.post("/api/labels", json={"run": RUN, "id": qid, "annotator": "ben", "label": verdict})
        assert saved.status_code == 200, saved.text
    _, imported = from_file(run_dir, write_labels(tmp_path / "labels.json"), "ana", reports)
    assert imported.store.path == client.app.app.state.pages.store.path == reports / DB_FILE
    assert [(r[3], r[2], r[4], r[7]) for r in table(reports) if r[2] in ("q01", "q04")] == [
        ("ana", "q01", "correct", "imported labels.json"), ("ben", "q01", "correct", "served"),
        ("ana", "q04", "wrong", "imported labels.json"), ("ben", "q04", "partly", "served")]
    assert LabelStore(reports).counts() == {RUN: len(LABELS) + 4}
    # the app's agreement page pairs them: ana by ben over q01-q04, classes c/c, p/c, p/w, w/p
    results, samples = load_run(run_dir)
    a = agreement(LabelStore(reports), results, samples, run_dir)
    (pair,) = a["between_annotators"]
    assert (pair["a"], pair["b"], pair["n"], pair["same_class"], pair["differ"]) == ("ana", "ben", 4, 1,
                                                                                     ["q02", "q03", "q04"])
    # ana by ben, classes w/p/c: [[0,1,0],[1,0,1],[0,0,1]]; rows 1 2 1, columns 1 1 2, n 4:
    # observed 0.5 + 0.5 + 0.5 = 1.5; chance (0.5*1*1 + 1*1*2 + 0.5*2*1 + 0.5*2*2 + 1*1*1 + 0.5*1*1) / 4 = 7/4
    assert pair["kappa"]["value"] == pytest.approx(1 - 1.5 / 1.75)
    page = client.get(f"/runs/{RUN}/agreement").text
    assert 'data-annotator="ana"' in page and 'data-annotator="ben"' in page
    # lab agree RUN (the store) counts both: an answer both labelled scores their mean
    every = from_store(LabelStore(reports), run_dir)
    assert every["n_labelled"] == len(LABELS) and every["labels_file"].endswith("(ana, ben)")
    assert from_store(LabelStore(reports), run_dir, "ana")["overall"] == from_the_file_alone(
        run_dir, tmp_path / "labels.json")["overall"]


def test_a_bad_file_imports_nothing_and_makes_no_database(run_dir, reports, tmp_path):
    results, samples = load_run(run_dir)
    path = write_labels(tmp_path / "labels.json", dict(LABELS, q09={"label": "correct", "accuracy": 0}))
    with pytest.raises(DataError, match=r"labels.q09.accuracy': 0 is not an accuracy score"):
        import_file(path, results, samples, reports, "ana")
    with pytest.raises(DataError, match="not a name"):
        import_file(write_labels(path), results, samples, reports, "<ana>")
    assert not (reports / DB_FILE).exists()


def test_the_store_of_a_run_is_the_reports_folder_that_holds_it(run_dir, reports, tmp_path):
    results, _ = load_run(run_dir)
    assert store_root(run_dir, results, tmp_path / "other") == reports
    copy = tmp_path / "copied"  # a run folder kept outside any reports folder
    assert store_root(copy, results, tmp_path / "other") == tmp_path / "other"


def test_the_login_name_names_the_importer_or_the_error_asks_for_one(monkeypatch):
    monkeypatch.setattr(labels_module.getpass, "getuser", lambda: "ana")
    assert login_name() == "ana"
    monkeypatch.setattr(labels_module.getpass, "getuser", lambda: "CORP\\ana")
    with pytest.raises(DataError, match=r"the login name 'CORP\\\\ana' is not one") as exc:
        login_name()
    assert exc.value.hint == "name who made them: --import-as NAME"

    def nobody():
        raise OSError("No username set in the environment")

    monkeypatch.setattr(labels_module.getpass, "getuser", nobody)
    with pytest.raises(DataError, match="the login name '' is not one"):
        login_name()
