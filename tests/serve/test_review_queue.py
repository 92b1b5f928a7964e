"""The review queue of eval rows in ``lab serve``: verdicts kept in the labels database with who
and when, the reviewed copy written beside the set (never the set), rows the rules doubt first,
a fix that moves the span by the selected text, a row changed since its review unreviewed again,
and ``lab audit`` / ``lab run`` reading the copy."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lab.cli.serve import _review_set
from lab.evalsets.evalset import load_eval_set
from lab.serve.app import create_app
from lab.serve.reviews import ReviewStore, copy_paths

LOCAL = "http://127.0.0.1:8765"
POLICY = ("Backup\n======\n\nThe backup command stores a snapshot of the given folders. Snapshots are kept "
          "for 30 days unless the forget command removes them earlier.\n\n"
          "Example output::\n\n    $ restic backup ~/work\n    created snapshot 40dc1520 at 2015-05-08 21:38\n")
PRUNE = "Prune\n=====\n\nThe prune command removes data that no snapshot references any more.\n"


def _row(i: int, question: str, source: str, text: str, part: str, **extra) -> dict:
    start = text.index(part)
    return {"id": f"g{i:04d}", "question": question, "reference_answer": part, "category": "direct_fact",
            "references": [{"source": source, "content": part, "start_index": start, "end_index": start + len(part)}],
            **extra}


@pytest.fixture
def review(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))  # no answer check cached: the rules' notes alone
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "backup.md").write_text(POLICY, encoding="utf-8")
    (kb / "prune.md").write_text(PRUNE, encoding="utf-8")
    rows = [
        _row(1, "What does the backup command store?", "backup.md", POLICY,
             "The backup command stores a snapshot of the given folders.", keywords=["snapshot"]),
        _row(2, "When was the snapshot <b>created</b>?", "backup.md", POLICY,
             "created snapshot 40dc1520 at 2015-05-08 21:38"),  # an example's output: the rules doubt it
        _row(3, "How long are snapshots kept?", "backup.md", POLICY,
             "The backup command stores a snapshot of the given folders."),  # the span one sentence off
        _row(4, "What does the prune command remove?", "prune.md", PRUNE,
             "The prune command removes data that no snapshot references any more."),
    ]
    path = tmp_path / "sets" / "gen.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (path.parent / "gen.gen.json").write_text(json.dumps({"knowledge_base": str(kb)}), encoding="utf-8")
    reports = tmp_path / "reports"
    reports.mkdir()
    rs = _review_set(path, None, 0)  # the knowledge base from the generator's sidecar
    return {"path": path, "kb": kb, "rows": rows, "reports": reports, "set": rs,
            "client": TestClient(create_app(reports, review_sets=(rs,)), base_url=LOCAL)}


def post(client, **doc):
    return client.post("/api/review", json={"set": "gen", "reviewer": "ana", **doc},
                       headers={"Origin": LOCAL, "Content-Type": "application/json"})


def copy_rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in copy_paths(path)[0].read_text(encoding="utf-8").splitlines()]


def test_the_queue_shows_the_doubted_row_first_with_its_span_in_its_document(review):
    assert review["set"].order() == ["g0002", "g0003", "g0001", "g0004"]  # the rules doubt two
    assert review["set"].notes["g0002"] == ["Rows the rules doubt: its span lies in a transcript in backup.md: an "
                                             "example's output, not a fact of the documents"]
    page = review["client"].get("/review/gen?reviewer=ana")
    assert page.status_code == 200
    html = page.text
    assert 'data-id="g0002"' in html
    assert "When was the snapshot &lt;b&gt;created&lt;/b&gt;?" in html  # text, never markup
    assert '<mark id="span">created snapshot 40dc1520 at 2015-05-08 21:38</mark>' in html
    assert "0 kept · 0 fixed · 0 dropped · 4 unreviewed" in html
    assert "4 rows · 2 with an audit finding against them (shown first)" in html  # any finding, not only the rules'
    listing = review["client"].get("/review").text
    assert str(review["path"]) in listing and "<td>4</td><td>2</td>" in listing
    assert "<th>with an audit finding</th>" in listing


def test_keep_fix_and_drop_write_a_reviewed_copy_and_never_the_set(review):
    before = review["path"].read_bytes()
    c = review["client"]
    assert post(c, id="g0001", verdict="keep").status_code == 200
    assert post(c, id="g0002", verdict="drop", note="an example's output").status_code == 200
    text = POLICY
    part = "Snapshots are kept for 30 days unless the forget command removes them earlier."
    start = text.index(part)
    fixed = post(c, id="g0003", verdict="fix", reference_answer="30 days, unless forget removes them earlier.",
                 span={"source": "backup.md", "start": start, "end": start + len(part), "text": part})
    assert fixed.status_code == 200, fixed.text
    assert fixed.json()["counts"] == {"kept": 1, "fixed": 1, "dropped": 1, "unreviewed": 1}
    assert review["path"].read_bytes() == before
    rows = copy_rows(review["path"])
    assert [r["id"] for r in rows] == ["g0001", "g0003", "g0004"]
    assert rows[0]["review"]["verdict"] == "keep" and rows[0]["review"]["by"] == "ana"
    assert rows[1]["references"] == [{"source": "backup.md", "content": part, "start_index": start,
                                      "end_index": start + len(part)}]
    assert rows[1]["reference_answer"] == "30 days, unless forget removes them earlier."
    assert rows[1]["question"] == "How long are snapshots kept?" and rows[1]["review"]["verdict"] == "fix"
    assert "review" not in rows[2]
    meta = json.loads(copy_paths(review["path"])[1].read_text())
    assert (meta["n_rows"], meta["n_reviewed"], meta["kept"], meta["fixed"], meta["dropped"], meta["unreviewed"]) == \
        (3, 3, 1, 1, 1, 1)
    # the copy is an eval set the lab reads: every row valid, the review kept on the row
    loaded = load_eval_set(copy_paths(review["path"])[0], None)
    assert [r.review.verdict if r.review else None for r in loaded.rows] == ["keep", "fix", None]
    # who and when, in the labels database
    stored = ReviewStore(review["reports"]).verdicts(str(review["path"].resolve()))
    assert {k: (v["reviewer"], v["verdict"]) for k, v in stored.items()} == {
        "g0001": ("ana", "keep"), "g0002": ("ana", "drop"), "g0003": ("ana", "fix")}
    assert stored["g0002"]["note"] == "an example's output" and stored["g0001"]["updated_at"].endswith("Z")


def test_a_span_selected_where_the_page_showed_other_offsets_is_found_by_its_text(review):
    part = "removes data that no snapshot references"
    right = PRUNE.index(part)
    got = post(review["client"], id="g0004", verdict="fix", span={"source": "prune.md", "start": right - 3,
                                                                  "end": right - 3 + len(part), "text": part})
    assert got.status_code == 200
    row = copy_rows(review["path"])[-1]
    assert (row["references"][0]["start_index"], row["references"][0]["end_index"]) == (right, right + len(part))


@pytest.mark.parametrize("doc, status, said", [
    ({"id": "g0001", "verdict": "fix"}, 400, "nothing changed"),
    ({"id": "g0001", "verdict": "fix", "question": "  "}, 400, "question: empty"),
    ({"id": "g0001", "verdict": "fix", "span": {"source": "backup.md", "start": 0, "end": 4, "text": "nowhere"}},
     400, "not in the document"),
    ({"id": "g0001", "verdict": "fix", "span": {"source": "../etc/passwd", "start": 0, "end": 4, "text": "root"}},
     400, "no document"),
    ({"id": "g0001", "verdict": "maybe"}, 400, "not a verdict"),
    ({"id": "g0001", "verdict": "keep", "reviewer": "<script>"}, 400, "not a name"),
    ({"id": "nope", "verdict": "keep"}, 404, "no row"),
    ({"id": "g0001", "verdict": "keep", "seconds": -1}, 400, "not a reading time"),
    ({"id": "g0001", "verdict": "keep", "seconds": "12"}, 400, "not a reading time"),
    ({"id": "g0001", "verdict": "keep", "seconds": True}, 400, "not a reading time"),
])
def test_a_bad_verdict_is_refused_with_its_reason_and_writes_nothing(review, doc, status, said):
    got = post(review["client"], **doc)
    assert got.status_code == status and said in got.json()["error"]
    assert not copy_paths(review["path"])[0].exists()


def test_the_reading_time_is_kept_summed_over_looks_and_counted_in_the_copy(review):
    c = review["client"]
    assert post(c, id="g0001", verdict="keep", seconds=12.44).status_code == 200
    assert post(c, id="g0001", verdict="drop", seconds=7.0).status_code == 200  # looked at again: 19.4 s in all
    assert post(c, id="g0002", verdict="drop", seconds=5000).status_code == 200  # a page left open: one hour
    assert post(c, id="g0003", verdict="keep").status_code == 200  # no time (a script): not counted
    stored = ReviewStore(review["reports"]).verdicts(str(review["path"].resolve()))
    assert (stored["g0001"]["seconds"], stored["g0002"]["seconds"], stored["g0003"]["seconds"]) == (19.4, 3600.0, None)
    meta = json.loads(copy_paths(review["path"])[1].read_text())
    assert meta["reading"] == {"n_timed": 2, "seconds": 3619.4, "median_seconds": 1809.7}  # (19.4 + 3600) / 2
    assert "1 h 00 min (median 30 min 10 s a row)" in c.get("/review").text


def test_a_labels_database_from_before_the_reading_time_gains_its_column(review):
    import sqlite3

    db = review["reports"] / "labels.sqlite"
    with sqlite3.connect(db) as con:  # the table as it was, one verdict in it
        con.execute("CREATE TABLE reviews (eval_set TEXT NOT NULL, row_id TEXT NOT NULL, row_sha TEXT NOT NULL, "
                    "reviewer TEXT NOT NULL, verdict TEXT NOT NULL, fixed TEXT NOT NULL DEFAULT '{}', note TEXT NOT NULL "
                    "DEFAULT '', created_at TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (eval_set, row_id))")
        con.execute("INSERT INTO reviews VALUES (?, 'g0004', 'x', 'ben', 'keep', '{}', '', 't', 't')",
                    (str(review["path"].resolve()),))
    assert post(review["client"], id="g0001", verdict="keep", seconds=3).status_code == 200
    stored = ReviewStore(review["reports"]).verdicts(str(review["path"].resolve()))
    assert (stored["g0004"]["reviewer"], stored["g0004"]["seconds"], stored["g0001"]["seconds"]) == ("ben", None, 3.0)


def test_a_row_changed_since_its_review_is_unreviewed_again(review):
    assert post(review["client"], id="g0001", verdict="keep", seconds=30).status_code == 200
    rows = review["rows"]
    rows[0] = {**rows[0], "question": "What does the backup command keep?"}  # the set regenerated
    review["path"].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    rs = _review_set(review["path"], review["kb"], 0)
    client = TestClient(create_app(review["reports"], review_sets=(rs,)), base_url=LOCAL)
    assert "0 kept · 0 fixed · 0 dropped · 4 unreviewed" in client.get("/review/gen?reviewer=ana").text
    # read again as it is now: its time starts anew (the 30 s were spent on the row as it was)
    assert post(client, id="g0001", verdict="keep", seconds=4).status_code == 200
    stored = ReviewStore(review["reports"]).verdicts(str(review["path"].resolve()))
    assert stored["g0001"]["seconds"] == 4.0


def test_the_audit_of_the_copy_says_what_a_person_read(review, tmp_path):
    c = review["client"]
    post(c, id="g0001", verdict="keep", seconds=20)
    post(c, id="g0002", verdict="drop", seconds=75)
    copy = copy_paths(review["path"])[0]
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "LAB_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "lab", "audit", str(copy), "--kb", str(review["kb"]),
                          "--html", str(tmp_path / "a.html")], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "read by a person: 1 of 3 rows (1 kept, 0 fixed; 1 dropped, not in this set) by ana, in 1 min 35 s of " \
           "reading (median 48 s a row, 2 verdicts timed); unread: 2, 1 of them doubted by the rules" in out.stdout
    # g0003: "how long" without a number; the median of 20 and 75 s is 47.5 s, shown rounded
    # the set itself: the copy beside it is named, not used
    out = subprocess.run([sys.executable, "-m", "lab", "audit", str(review["path"]), "--kb", str(review["kb"]),
                          "--html", str(tmp_path / "b.html")], capture_output=True, text=True, env=env, timeout=300)
    assert "read by a person: 0 of 4 rows" in out.stdout
    assert f"a copy is read only where it is named: {copy}" in out.stderr


def test_review_refuses_a_set_without_ids_or_documents(tmp_path):
    from lab.errors import DataError

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"question": "q?", "reference_answer": "a", "category": "c", "keywords": ["a"]})
                    + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="rows without an id"):
        _review_set(path, tmp_path, 0)
    path.write_text(json.dumps({"id": "x", "question": "q?", "reference_answer": "a", "category": "c",
                                "keywords": ["a"]}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="--kb FOLDER"):
        _review_set(path, None, 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_a_row_the_answer_check_doubted_before_is_shown_first_with_its_note(review, tmp_path, seed):
    """The answer check's verdict that an earlier lab audit --check left in the cache (here: the
    model found no answer to row 4's question in its passage) puts its row among the first, with
    its note, and no model is run (a row whose check is not cached has no such note). The verdict
    is the one asked with the seed the set was generated with (its sidecar's), as ``lab generate
    --seed 3 --answer-check`` and then ``lab audit --check`` ask it: under another seed it is none."""
    from lab.config import LLMConfig
    from lab.evalsets import answercheck
    from lab.evalsets.extract import blocks, document_sentences
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.prompts import load_prompt

    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    llm = build_llm(resolve_llm(LLMConfig(), "check", Path.cwd()), cache)
    prompt, row = load_prompt(answercheck.PASSAGE_PROMPT), review["rows"][3]
    ref = row["references"][0]
    sentences = document_sentences(PRUNE, blocks(PRUNE, "prune.md"))
    before, after = answercheck.neighbours(PRUNE, sentences, ref["start_index"], ref["end_index"])
    key = llm.key(answercheck._messages(prompt, row["question"], ref["content"], before, after), prompt.version,
                  answercheck.SCHEMA, 0.0, seed, 80)
    llm.cache.put(key, {"text": json.dumps({"answer": "NONE"}), "prompt_tokens": 90, "completion_tokens": 5,
                        "seconds": 3.0, "finish_reason": "stop"})
    sidecar = review["path"].with_suffix(".gen.json")
    if seed:
        sidecar.write_text(json.dumps({"knowledge_base": str(review["kb"]), "seed": 0}), encoding="utf-8")
        assert "g0004" not in _review_set(review["path"], None, 0).notes  # the verdict of another seed
        sidecar.write_text(json.dumps({"knowledge_base": str(review["kb"]), "seed": seed}), encoding="utf-8")
    rs = _review_set(review["path"], None, 0)
    assert rs.order() == ["g0002", "g0003", "g0004", "g0001"]
    assert rs.notes["g0004"] == ["Questions the answer check doubts: the model finds no answer to it in its sentence"]
    assert "g0001" not in rs.notes and llm.usage.calls == 0


def test_the_queue_reads_the_answer_checks_of_the_model_it_is_told(review, tmp_path):
    """A set checked by another model (lab generate --llm MODEL --answer-check, lab audit --check
    --config NAME): the queue reads that model's cached verdicts when told it (--llm, --config),
    and the local Qwen's otherwise, where there are none for this row."""
    import argparse

    from lab.config import LLMConfig
    from lab.evalsets import answercheck
    from lab.evalsets.extract import blocks, document_sentences
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.prompts import load_prompt

    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    other = LLMConfig(model="smollm2-135m-instruct")
    llm = build_llm(resolve_llm(other, "check", Path.cwd()), cache)
    prompt, row = load_prompt(answercheck.PASSAGE_PROMPT), review["rows"][3]
    ref = row["references"][0]
    before, after = answercheck.neighbours(PRUNE, document_sentences(PRUNE, blocks(PRUNE, "prune.md")),
                                           ref["start_index"], ref["end_index"])
    key = llm.key(answercheck._messages(prompt, row["question"], ref["content"], before, after), prompt.version,
                  answercheck.SCHEMA, 0.0, 0, 80)
    llm.cache.put(key, {"text": json.dumps({"answer": "NONE"}), "prompt_tokens": 90, "completion_tokens": 5,
                        "seconds": 3.0, "finish_reason": "stop"})
    assert "g0004" not in _review_set(review["path"], None, 0).notes  # the local Qwen's: none cached
    told = argparse.Namespace(config=None, llm="smollm2-135m-instruct", experiments=Path("experiments"))
    rs = _review_set(review["path"], None, 0, told)
    assert rs.order()[:3] == ["g0002", "g0003", "g0004"] and rs.notes["g0004"] == [
        "Questions the answer check doubts: the model finds no answer to it in its sentence"]
    assert llm.usage.calls == 0
