"""Round four (docs/robustness.md): the leakage guard's misses, two `lab tune` of one model at
once, debris of killed commands, damaged tuned weights, `lab funnel` across eval sets, a file name
that is not UTF-8, a clone's folder shadowing the lab, and the README's tuned model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.errors import ConfigError, DataError
from lab.eval import race as race_module
from lab.eval.race import RaceOptions
from lab.eval.runner import RunOptions, check_tuned
from lab.evalsets.evalset import load_eval_set
from lab.evalsets.leakage import overlaps
from lab.evidence.text import fold
from lab.models.resolve import resolve_hf_model
from lab.models.tuned import CARD, QUESTIONS, weights_sha
from lab.paths import OutputClaimed
from lab.rag.loaders import load_folder
from lab.tune import train
from lab.tune.options import TuneOptions
from report_fixtures import ACC_A, ACC_B, MRR_A, MRR_B, write_run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def dead_pid() -> int:
    """The id of a process that has ended."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# --- the leakage guard ----------------------------------------------------------------------------


def test_a_short_golden_span_of_the_eval_row_is_the_same_golden_span():
    # a training row made from the eval row (lab generate's set given to --train): its span is the
    # row's own, 11 characters, under MIN_SPAN_CHARS
    train = [{"text": "What is the price of the Ember 90?", "span": fold("8,400 euros"), "origin": "gen.jsonl:3",
              "kind": "generated"},
             {"text": "When did Ghent open?", "span": fold("in 2014") + " " + fold("Odile Ferrand"),
              "origin": "gen.jsonl:8", "kind": "generated"}]
    rows = [(1, "How much does an Ember 90 kiln cost?", ["8,400 euros"]),
            (2, "Who opened the Ghent workshop, and when?", ["in 2014", "Odile Ferrand"]),  # two spans, joined
            (3, "When was the Lyon shop opened?", ["2014"])]  # a short span inside another: not the same
    assert [(o.eval_line, o.why, o.train_origin) for o in overlaps(train, rows)] == [
        (1, "same golden span", "gen.jsonl:3"), (2, "same golden span", "gen.jsonl:8")]


def test_a_training_question_holding_the_eval_question_and_a_few_words_is_refused():
    train = [{"text": "Who founded Brightwater Kilns, and in which year did they open?", "span": "", "origin": "p:1"},
             {"text": "Who founded it and when?", "span": "", "origin": "p:2"}]
    rows = [(4, "Who founded Brightwater Kilns?", []),  # Jaccard 4/10: not a near-duplicate, but held whole
            (5, "Who founded it?", [])]  # three words: too few to say
    assert [(o.eval_line, o.why, o.train_origin) for o in overlaps(train, rows)] == [
        (4, "contains the eval question", "p:1")]


def test_lab_run_refuses_a_tuned_model_trained_on_the_eval_rows_short_span(tmp_path):
    model = tmp_path / "tuned" / "kiln-reranker"
    model.mkdir(parents=True)
    (model / QUESTIONS).write_text(json.dumps({"text": "What does the Ember 90 cost?", "span": fold("8,400 euros"),
                                               "origin": "gen.jsonl:3", "kind": "generated"}) + "\n")
    eval_set = tmp_path / "eval.jsonl"
    eval_set.write_text(json.dumps({
        "question": "How much is an Ember 90 kiln?", "reference_answer": "8,400 euros.", "category": "price",
        "references": [{"content": "8,400 euros", "source": "kilns.md", "start_index": 40, "end_index": 51}]}) + "\n")
    questions = SimpleNamespace(rows=load_eval_set(eval_set, None).rows, eval_path=eval_set)
    plans = SimpleNamespace(embedding=None, reranker=SimpleNamespace(model=SimpleNamespace(
        source="tuned", location=str(model), name="tuned/kiln-reranker")))
    with pytest.raises(ConfigError) as refused:
        check_tuned(plans, questions, "kb-hash", allow_overlap=False)
    assert "line 1 'How much is an Ember 90 kiln?' (same golden span" in str(refused.value)
    assert "--holdout" in refused.value.hint


# --- lab tune: one at a time, no debris, weights checked ----------------------------------------------


class Reached(Exception):
    """lab tune got past its checks to its work."""


@pytest.fixture
def quick_tune(tmp_path, monkeypatch):
    """TuneOptions over the fixture project and a cache of its own; its work stops where it starts."""
    monkeypatch.setattr(train, "prepare", lambda opts: (_ for _ in ()).throw(Reached()))
    cache = tmp_path / "cache"
    return TuneOptions(target="reranker", out="kiln", pseudo=5, cache_root=cache,
                       experiments_dir=FIXTURES / "experiments", show_progress=False), cache / "tuned"


def test_a_second_lab_tune_of_one_out_stops_at_once_while_the_first_runs(quick_tune):
    opts, root = quick_tune
    first = subprocess.Popen(["sleep", "60"])  # the first command, still running
    try:
        root.mkdir(parents=True)
        (root / ".kiln.lock").write_text(f"{first.pid}\n")
        with pytest.raises(OutputClaimed) as claimed:
            train.tune(opts)
        assert f"--out {root / 'kiln'} is being written by another command now (process {first.pid}" in str(claimed.value)
    finally:
        first.kill()
        first.wait()
    with pytest.raises(Reached):  # its process gone: the lock is taken over, and released after
        train.tune(opts)
    assert not (root / ".kiln.lock").exists()


def test_lab_tune_removes_what_killed_tunings_left(quick_tune):
    opts, root = quick_tune
    gone, alive = dead_pid(), os.getpid()
    debris = [root / f".kiln.tmp-{gone}", root / f".other.old-{gone}", root / ".work" / f"kiln-rescore-{gone}"]
    kept = [root / f".other.tmp-{alive}", root / ".work" / "kiln-0123456789ab"]  # a live save; a checkpoint
    for d in debris + kept:
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"\0" * 1000)
    with pytest.raises(Reached):
        train.tune(opts)
    assert [d.exists() for d in debris + kept] == [False, False, False, True, True]


def test_damaged_tuned_weights_are_an_error_naming_them_never_used(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    model = tmp_path / "tuned" / "kiln-reranker"
    model.mkdir(parents=True)
    weights = model / "model.safetensors"
    weights.write_bytes(b"weights" * 1000)
    (model / CARD).write_text(json.dumps({"name": "kiln-reranker", "target": "reranker",
                                          "fingerprint": weights_sha(model)}))
    assert resolve_hf_model("tuned/kiln-reranker", "reranker model").location == str(model)
    with open(weights, "r+b") as fh:  # one byte flipped: same size
        fh.seek(100)
        fh.write(b"X")
    with pytest.raises(DataError) as damaged:
        resolve_hf_model("tuned/kiln-reranker", "reranker model")
    assert f"reranker model 'tuned/kiln-reranker': the weights in {model} are not the ones its card names" \
        in str(damaged.value)
    assert "lab tune reranker ... --out kiln-reranker --force" in damaged.value.hint
    weights.unlink()
    with pytest.raises(DataError, match="holds no weights"):
        resolve_hf_model("tuned/kiln-reranker", "reranker model")


# --- lab race: a killed race's folder -------------------------------------------------------------


def test_lab_race_removes_what_a_killed_race_left(project, monkeypatch):
    base = project / "reports" / "_race" / "small-retrieval--small-bm25"
    orphan = base / f".20260101-000000.tmp-{dead_pid()}"
    (orphan / "runs").mkdir(parents=True)

    def fails(cfg, opts, **kw):
        raise Reached()
    monkeypatch.setattr(race_module, "run_experiment", fails)
    opts = RunOptions(project_root=project, reports_root=project / "reports", cache_root=project / "cache",
                      show_progress=False)
    with pytest.raises(Reached):
        race_module.race(("small-retrieval", "small-bm25"), project / "experiments", {}, opts,
                         RaceOptions(max_n=2, step=2), say=lambda line: None)
    assert not orphan.exists() and not list(base.glob(".*.tmp-*"))  # neither the old debris nor its own


# --- lab funnel across eval sets ------------------------------------------------------------------------


def test_lab_funnel_of_runs_of_different_eval_sets_warns_and_pairs_no_questions(cli, tmp_path):
    a = write_run(tmp_path, "base", "20261122-100000", MRR_A, ACC_A, "A")
    b = write_run(tmp_path, "other", "20261122-110000", MRR_B, ACC_B, "B", eval_sha="f" * 64)
    code, out, err = cli("funnel", a, b)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "warning: different eval sets: base eeeeeeeeeeee, other ffffffffffff"  # lab compare's
    assert lines[-1] == "base -> other: not paired: different eval sets (a question id may name another question)"
    assert "moved" not in out and "recovered" not in out


# --- a knowledge-base file name that is not UTF-8 -----------------------------------------------------


def test_a_latin1_file_name_in_the_knowledge_base_is_named_with_the_fix(cli, project, monkeypatch):
    kb = project / "kb"
    latin1 = os.path.join(os.fsencode(kb), b"caf\xe9.md")
    with open(latin1, "w", encoding="utf-8") as fh:
        fh.write("# Caf\n\nThe cafe opens at eight.\n")
    with pytest.raises(DataError) as bad:
        load_folder(kb, [".md"], 10 ** 7, False)
    assert str(bad.value).startswith(f"knowledge base {kb}: the name 'caf\\xe9.md' is not UTF-8 (Latin-1?)")
    assert "convmv -f latin1 -t utf8" in bad.value.hint
    monkeypatch.chdir(project)
    monkeypatch.setenv("LAB_CACHE", str(project / "cache"))
    code, out, err = cli("run", "small-retrieval", "--no-progress")
    assert code == 2 and "caf\\xe9.md' is not UTF-8" in err and "Traceback" not in err
    os.rename(latin1, os.path.join(os.fsencode(kb), b"notes.bin"))  # not a document's extension: not read
    assert load_folder(kb, [".md"], 10 ** 7, False).documents


# --- the lab from a script beside the clone ------------------------------------------------------------


def test_a_script_beside_a_folder_named_lab_is_told_what_shadows_the_lab(tmp_path):
    clone = tmp_path / "lab"  # the clone's folder: no __init__.py at its top
    clone.mkdir()
    (clone / "README.md").write_text("the lab\n")
    script = tmp_path / "evaluate.py"
    script.write_text("from lab import api\nprint('imported', api.__name__)\n")
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "imported" not in p.stdout
    said = p.stderr.strip().splitlines()[-1]
    assert said.startswith(f"ImportError: 'lab' is imported from {clone}, a folder without __init__.py")
    assert "shadows the installed lab. Run the script from another folder" in said


# --- the README -----------------------------------------------------------------------------------------


def test_every_model_the_readme_tunes_is_one_a_shipped_config_uses():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    outs = re.findall(r"lab tune (?:reranker|embedding) [^\n]*--out (\S+)", readme)
    used = {m for f in (ROOT / "experiments").glob("*.yaml") for m in re.findall(r"tuned/([\w.-]+)", f.read_text())}
    assert outs and [o for o in outs if o not in used] == []
