"""The labels database (lab.judge.labels) as lab serve uses it: what is kept, what survives a
restart, the queue, the assignments, and agreement between annotators worked out by hand."""

import json
import sqlite3
import threading

import pytest

from lab.errors import DataError
from lab.judge.agree import from_store
from lab.judge.labels import DB_FILE, LabelStore, import_file, queue_order
from lab.runfiles import load_run
from lab.serve.labels import agreement
from report_fixtures import LABELS, write_pair

RUN = "base/20261122-100000"


@pytest.fixture
def reports(tmp_path):
    write_pair(tmp_path)
    return tmp_path


def test_a_label_is_kept_with_who_and_when_and_replaced_by_its_annotator_only(reports):
    store = LabelStore(reports)
    store.put(RUN, "basebase", "q01", "ana", "correct", None, "fine")
    store.put(RUN, "basebase", "q01", "ben", "wrong", 2, "<b>no</b>")
    store.put(RUN, "basebase", "q01", "ana", "partly", 3, "on second thought")
    rows = {r["annotator"]: r for r in store.labels(RUN)}
    assert {a: (r["label"], r["accuracy"], r["note"]) for a, r in rows.items()} == {
        "ana": ("partly", 3, "on second thought"), "ben": ("wrong", 2, "<b>no</b>")}
    assert rows["ana"]["source"] == "served" and rows["ana"]["created_at"].endswith("Z")
    assert store.counts() == {RUN: 2}


def test_the_database_is_sqlite_in_wal_mode_in_the_reports_folder_and_survives_a_restart(reports):
    LabelStore(reports).put(RUN, "f", "q02", "ana", "wrong")
    db = sqlite3.connect(reports / DB_FILE)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT annotator, label FROM labels").fetchall() == [("ana", "wrong")]
    db.close()
    again = LabelStore(reports)  # a new process opening the same file
    assert [(r["question_id"], r["label"]) for r in again.labels(RUN)] == [("q02", "wrong")]


def test_bad_labels_are_refused_with_the_field_and_the_fix(reports):
    store = LabelStore(reports)
    for label, acc, note, annotator, said in [("right", None, "", "ana", "is not a label"),
                                              ("correct", 7, "", "ana", "is not an accuracy score"),
                                              ("correct", True, "", "ana", "is not an accuracy score"),
                                              ("correct", None, 3, "ana", "note: not text"),
                                              ("correct", None, "", "", "a name is needed"),
                                              ("correct", None, "", "<script>", "not a name")]:
        with pytest.raises(DataError, match=said):
            store.put(RUN, "f", "q01", annotator, label, acc, note)
    assert store.labels(RUN) == []


def test_many_writers_at_once_lose_nothing(reports):
    store = LabelStore(reports)

    def label(who):
        for i in range(15):
            store.put(RUN, "f", f"q{i + 1:02d}", who, "correct" if i % 2 else "wrong")

    threads = [threading.Thread(target=label, args=(w,)) for w in ("ana", "ben", "cleo", "dev")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.counts() == {RUN: 60}


def test_the_queue_is_one_seeded_order_per_run_and_assignments_share_it_with_an_overlap(reports):
    ids = [f"q{i + 1:02d}" for i in range(15)]
    order = queue_order(RUN, ids)
    assert sorted(order) == ids and order != ids and order == queue_order(RUN, ids)
    assert queue_order("better/20261122-110000", ids) != order
    store = LabelStore(reports)
    assert store.queue(RUN, ids, "ana")["next"] == order[0]
    counts = store.assign(RUN, order, ["ana", "ben"], overlap=5)
    assert counts == {"ana": 5 + 5, "ben": 5 + 5}
    ana, ben = store.queue(RUN, ids, "ana"), store.queue(RUN, ids, "ben")
    assert ana["order"][:5] == ben["order"][:5] == order[:5]  # the overlap, first
    assert set(ana["order"][5:]).isdisjoint(ben["order"][5:])
    assert set(ana["order"]) | set(ben["order"]) == set(ids)
    store.put(RUN, "f", order[0], "ana", "correct")
    after = store.queue(RUN, ids, "ana")
    assert after["next"] == order[1] and after["todo"] == 9 and after["done"] == [order[0]]
    with pytest.raises(DataError, match="name each annotator once"):
        store.assign(RUN, order, ["ana", "ana"], 1)


def test_agreement_between_annotators_is_the_weighted_kappa_worked_out_by_hand(reports):
    store = LabelStore(reports)
    for q, a, b in [("q01", "correct", "correct"), ("q02", "partly", "correct"), ("q03", "wrong", "wrong"),
                    ("q04", "correct", "partly")]:
        store.put(RUN, "f", q, "ana", a)
        store.put(RUN, "f", q, "ben", b)
    store.put(RUN, "f", "q06", "ana", "correct")  # ana alone: not in the pair
    results, samples = load_run(reports / "base" / "20261122-100000")
    a = agreement(store, results, samples, reports / "base" / "20261122-100000")
    (pair,) = a["between_annotators"]
    # ana by ben, classes w/p/c: [[1,0,0],[0,0,1],[0,1,1]]; rows 1 1 2, columns 1 1 2, n 4:
    # observed 0.5 + 0.5 = 1, chance (0.5 + 2 + 0.5 + 1 + 2 + 1) / 4 = 1.75: kappa 1 - 1/1.75 = 3/7
    assert pair["n"] == 4 and pair["same_class"] == 2
    assert pair["kappa"]["value"] == pytest.approx(3 / 7)
    assert pair["differ"] == ["q02", "q04"]
    assert a["labelled"] == {"ana": 5, "ben": 4}
    # q01-q04 labelled by both count as their mean: q02 (3 + 5) / 2 = 4, q04 4
    assert a["judge"]["all"]["n_pairs"] == 5
    assert a["judge"]["by_annotator"]["ben"]["n_pairs"] == 4


def test_a_bad_labels_file_imports_nothing(reports, tmp_path):
    run_dir = reports / "base" / "20261122-100000"
    results, samples = load_run(run_dir)
    bad = dict(LABELS, q02={"label": "maybe", "accuracy": None})
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"format": "lab-labels-v1", "run": RUN, "fingerprint": results["config_fingerprint"],
                                "labels": bad}))
    with pytest.raises(DataError, match="labels.q02.label"):
        import_file(path, results, samples, reports, "ana")
    assert not (reports / DB_FILE).exists()  # checked whole before the store is opened
    with pytest.raises(DataError, match="no labels"):
        from_store(LabelStore(reports), run_dir)
