"""`lab agree RUN FILE` imports the downloaded labels into the run's labels store and reports the
file's figures from there, the same as before there was a store; run again, it changes nothing."""

import json
import sqlite3

import pytest

import lab.judge.labels as labels_module
from lab.judge.labels import DB_FILE, LabelStore
from report_fixtures import KAPPA, LABELS, write_pair

RUN = "base/20261122-100000"


@pytest.fixture
def reports(tmp_path, monkeypatch):
    write_pair(tmp_path / "reports")
    monkeypatch.chdir(tmp_path / "reports" / "base")  # not a reports folder: nothing may land here
    monkeypatch.setattr(labels_module.getpass, "getuser", lambda: "ana")
    return tmp_path / "reports"


@pytest.fixture
def labels(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"format": "lab-labels-v1", "run": RUN, "fingerprint": "basebase", "labels": LABELS}))
    return path


def rows(reports) -> list[tuple]:
    with sqlite3.connect(reports / DB_FILE) as db:
        return db.execute("SELECT * FROM labels ORDER BY question_id, annotator").fetchall()


def test_a_labels_file_goes_into_the_store_of_the_runs_reports_folder_as_the_login_names(cli, reports, labels):
    run_dir = reports / "base" / "20261122-100000"
    code, out, err = cli("agree", run_dir, labels)  # a run folder and no --reports
    assert code == 0, err
    assert out.splitlines()[-2] == (f"imported 8 labels of {labels} as ana's into {reports / DB_FILE} "
                                   "(8 new, 0 changed, 0 already there)")
    assert not (reports / "base" / "reports").exists()  # the default --reports, relative to here: untouched
    assert {(r[3], r[7]) for r in rows(reports)} == {("ana", "imported labels.json")} and len(rows(reports)) == 8
    a = json.loads((run_dir / "agreement.json").read_text())
    assert (a["n_labelled"], a["n_pairs"]) == (8, 7) and a["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    assert a["labels_file"] == f"{reports / DB_FILE} (ana: the labels of {labels})"


def test_run_again_it_changes_nothing(cli, reports, labels):
    run_dir = reports / "base" / "20261122-100000"
    assert cli("agree", run_dir, labels)[0] == 0
    kept, written = rows(reports), (run_dir / "agreement.json").read_bytes()
    code, out, _ = cli("agree", "base", labels, "--reports", reports)
    assert code == 0
    assert "(0 new, 0 changed, 8 already there)" in out.splitlines()[-2]
    assert rows(reports) == kept and (run_dir / "agreement.json").read_bytes() == written


def test_with_other_labels_in_the_store_the_file_still_gives_its_own_figures(cli, reports, labels):
    run_dir = reports / "base" / "20261122-100000"
    store = LabelStore(reports)
    for qid in ("q06", "q07", "q08"):  # judged 5, 4, 3; ben calls them all wrong
        store.put(RUN, "basebase", qid, "ben", "wrong")
    store.put(RUN, "basebase", "q09", "ana", "correct")  # ana, in lab serve, beyond the file
    code, out, err = cli("agree", "base", labels, "--import-as", "ana", "--reports", reports)
    assert code == 0, err
    assert (f"the store keeps 12 labels of run {RUN}: lab agree base reports them all; above, the 8 of labels.json"
            in out)
    a = json.loads((run_dir / "agreement.json").read_text())
    assert (a["n_labelled"], a["n_pairs"]) == (8, 7) and a["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    code, out, err = cli("agree", "base", "--reports", reports)
    assert code == 0, err
    every = json.loads((run_dir / "agreement.json").read_text())
    assert (every["n_labelled"], every["n_pairs"]) == (12, 11)
    assert every["labels_file"] == f"{reports / DB_FILE} (ana, ben)"


def test_a_labels_file_and_annotator_do_not_go_together(cli, reports, labels):
    code, _, err = cli("agree", "base", labels, "--annotator", "ana", "--reports", reports)
    assert code == 2 and "--annotator picks labels already kept" in err and "--import-as NAME" in err
    assert not (reports / DB_FILE).exists()
