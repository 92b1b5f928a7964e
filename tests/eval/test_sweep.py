"""lab sweep with a held-out check: the shared dev/held-out split, the flow (the grid on dev, the
best and the base on held-out, the paired test, the optimism) with a scripted run in place of the
pipeline, --no-holdout, and sweep.html for every kind of sweep.json (old ones included)."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from lab.cli import build_parser
from lab.config import load_experiment
from lab.errors import ConfigError
from lab.eval import sweep
from lab.evalsets.evalset import EvalRow
from lab.evalsets.holdout import half_overrides, split_rows, write_split
from lab.eval.runner import RunOptions
from lab.paths import inside
from lab.report.sweep import OPTIMISTIC, render_sweep

FIXTURES = Path(__file__).parents[1] / "fixtures"
# 20 questions: 10 direct_fact, 6 temporal, 4 spanning
CATEGORIES = ["direct_fact"] * 10 + ["temporal"] * 6 + ["spanning"] * 4


def _rows(categories: list[str] = CATEGORIES) -> list[EvalRow]:
    return [EvalRow(id=f"q{i:02d}", question=f"question {i}?", keywords=["k"], reference_answer="a", category=c)
            for i, c in enumerate(categories)]


# --- the split -----------------------------------------------------------------------------------

def test_split_is_stratified_disjoint_complete_and_seeded():
    rows = _rows()
    dev, held = split_rows(rows, 0.5, 13)
    dev_ids, held_ids = [r.id for r in dev], [r.id for r in held]
    assert not set(dev_ids) & set(held_ids)
    assert sorted(dev_ids + held_ids) == [r.id for r in rows]
    # half of each category: 10 -> 5, 6 -> 3, 4 -> 2
    assert Counter(r.category for r in dev) == {"direct_fact": 5, "temporal": 3, "spanning": 2}
    assert Counter(r.category for r in held) == {"direct_fact": 5, "temporal": 3, "spanning": 2}
    assert dev_ids == sorted(dev_ids) and held_ids == sorted(held_ids)  # the file's order is kept
    again, _ = split_rows(_rows(), 0.5, 13)
    assert [r.id for r in again] == dev_ids  # same seed, same split
    assert any([r.id for r in split_rows(rows, 0.5, seed)[0]] != dev_ids for seed in (1, 2, 3))
    dev3, held3 = split_rows(rows, 0.3, 13)  # 6 dev: 3 / 2 / 1 (largest remainder)
    assert (len(dev3), len(held3)) == (6, 14)
    assert Counter(r.category for r in dev3) == {"direct_fact": 3, "temporal": 2, "spanning": 1}


@pytest.mark.parametrize("rows, fraction, says, fix", [
    (_rows(), 1.0, "--dev-fraction 1.0 is not between 0 and 1", "e.g. --dev-fraction 0.5"),
    (_rows(), 0.0, "--dev-fraction 0.0 is not between 0 and 1", "e.g. --dev-fraction 0.5"),
    (_rows(["direct_fact"]), 0.5, "1 question(s) leave none for a held-out split at --dev-fraction 0.5",
     "use more questions, a smaller --dev-fraction, or --no-holdout"),
])
def test_a_split_that_cannot_hold_out_is_refused(rows, fraction, says, fix):
    with pytest.raises(ConfigError) as exc:
        split_rows(rows, fraction, 13)
    assert (exc.value.message, exc.value.hint) == (says, fix)


def _eval_file(folder: Path, categories: list[str] = CATEGORIES) -> Path:
    path = folder / "questions.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in _rows(categories)))
    return path


def test_write_split_writes_both_halves_their_labels_and_honours_a_sample(tmp_path):
    questions = _eval_file(tmp_path)
    labels = tmp_path / "labels.csv"
    labels.write_text("query_id,relevant_ids\n" + "".join(f"q{i:02d},doc.md#{i}\n" for i in range(20)))
    cfg = load_experiment("small-retrieval", FIXTURES / "experiments",
                          {"data": {"eval_set": str(questions), "labels": str(labels)}})
    split = write_split(cfg, tmp_path, tmp_path / "out", 0.5, 13)
    dev_ids = [json.loads(x)["id"] for x in (tmp_path / "out" / "dev.jsonl").read_text().splitlines()]
    held_ids = [json.loads(x)["id"] for x in (tmp_path / "out" / "held-out.jsonl").read_text().splitlines()]
    assert dev_ids == [r.id for r in split_rows(_rows(), 0.5, 13)[0]] and len(held_ids) == 10
    assert sorted(dev_ids + held_ids) == [f"q{i:02d}" for i in range(20)]
    dev_labels = list(csv.reader(io.StringIO((tmp_path / "out" / "dev-labels.csv").read_text())))
    assert dev_labels[0] == ["query_id", "relevant_ids"] and [r[0] for r in dev_labels[1:]] == dev_ids
    assert split.overrides("held-out") == {"data": {"eval_set": str((tmp_path / "out" / "held-out.jsonl").resolve()),
                                                    "labels": str((tmp_path / "out" / "held-out-labels.csv").resolve())},
                                           "sample": {"limit": None}}
    assert split.as_dict() == {"seed": 13, "dev_fraction": 0.5, "n_dev": 10, "n_held_out": 10}
    # a config's sample is drawn first (its seed), then split: 10 questions -> 5 + 5
    sampled = cfg.model_copy(update={"sample": cfg.sample.model_copy(update={"limit": 10}), "data":
                                     cfg.data.model_copy(update={"labels": None})})
    s = write_split(sampled, tmp_path, tmp_path / "sampled", 0.5, 13)
    assert (len(s.dev), len(s.held_out)) == (5, 5) and not (tmp_path / "sampled" / "dev-labels.csv").exists()
    assert half_overrides(tmp_path, "dev", False) == {"data": {"eval_set": str((tmp_path / "dev.jsonl").resolve())},
                                                      "sample": {"limit": None}}


# --- the flow, with a scripted run in place of the pipeline --------------------------------------

def _score(alpha: float, qid: str, dev_ids: set[str]) -> float:
    """alpha 1 is perfect on the dev questions and useless on the others, alpha 0 the reverse,
    alpha 0.5 (small-hybrid's own) 0.5 everywhere: the dev questions flatter alpha 1."""
    return 0.5 + (alpha - 0.5) * (1 if qid in dev_ids else -1)


@pytest.fixture
def scripted(tmp_path, monkeypatch):
    """``run_experiment`` replaced by a script that writes a run folder (results.json, samples.jsonl)
    scoring each question of the config's eval set with :func:`_score`; returns the runs made."""
    questions = _eval_file(tmp_path)
    dev_ids = {r.id for r in split_rows(_rows(), 0.5, 13)[0]}
    made: list[tuple[str, float, int]] = []

    def run_experiment(cfg, opts):
        ids = [json.loads(x)["id"] for x in Path(cfg.data.eval_set).read_text().splitlines()]
        scores = [_score(cfg.retriever.alpha, q, dev_ids) for q in ids]
        folder = inside(opts.reports_root, cfg.name) / f"run{len(made)}"
        folder.mkdir(parents=True)
        mean = sum(scores) / len(scores)
        (folder / "results.json").write_text(json.dumps({
            "metrics": {"overall": {"mrr": {"mean": mean}, "context_chars": {"mean": 1000.0}}},
            "index": {"reused": True, "texts_embedded": 0}, "timings": {"total_s": 0.5}}))
        (folder / "samples.jsonl").write_text("".join(json.dumps({"id": q, "category": "x", "metrics": {"mrr": v}}) + "\n"
                                                      for q, v in zip(ids, scores)))
        made.append((cfg.name, cfg.retriever.alpha, len(ids)))
        return folder

    monkeypatch.setattr(sweep, "run_experiment", run_experiment)
    opts = RunOptions(project_root=tmp_path, reports_root=tmp_path / "reports", cache_root=tmp_path / "cache",
                      show_progress=False)
    return {"overrides": {"data": {"eval_set": str(questions)}}, "opts": opts, "made": made}


def _sweep(scripted, values: str, **kw) -> tuple[Path, dict]:
    folder = sweep.run_sweep("small-hybrid", FIXTURES / "experiments", [sweep.parse_dial(f"retriever.alpha={values}")],
                             scripted["overrides"], scripted["opts"], "mrr", **kw)
    return folder, json.loads((folder / "sweep.json").read_text())


def test_the_grid_runs_on_dev_and_the_best_and_the_base_on_held_out(scripted):
    folder, s = _sweep(scripted, "0,1")
    # 2 points on the 10 dev questions, the best and the base on the 10 held-out ones, and the base
    # on dev (no grid point has its alpha 0.5)
    assert scripted["made"] == [("small-hybrid[alpha=0]", 0, 10), ("small-hybrid[alpha=1]", 1, 10),
                                ("small-hybrid[alpha=1]", 1, 10), ("small-hybrid[base]", 0.5, 10),
                                ("small-hybrid[base]", 0.5, 10)]
    assert (s["holdout"], s["seed"], s["dev_fraction"], s["n_dev"], s["n_held_out"]) == (True, 13, 0.5, 10, 10)
    assert "optimistic" not in s
    assert [p["metrics"]["mrr"] for p in s["points"]] == [0.0, 1.0] and s["best"] == 1
    h = s["held_out"]
    assert (h["best"]["mrr"], h["base"]["mrr"], h["dev"]) == (0.0, 0.5, {"best": 1.0, "base": 0.5})
    assert h["base_point"] == {"retriever.alpha": 0.5} and "held-out" in h["best_run"]
    t = h["paired"]
    assert (t["metric"], t["a"], t["b"], t["n"], t["delta"], t["ci"]) == ("mrr", "base", "best", 10, -0.5, [-0.5, -0.5])
    assert (t["wins"], t["losses"], t["ties"]) == (0, 10, 0)
    assert t["p_permutation"] == pytest.approx(2 / 2 ** 10) and t["significant"] is True  # exact: all signs alike
    assert h["optimism"] == 1.0  # dev 1.0 - held-out 0.0
    assert h["margin"] == {"dev": 0.5, "held_out": -0.5}  # best - base: 1.0 - 0.5 on dev, 0.0 - 0.5 held out
    lines = sweep.table(s)
    assert lines[2].endswith("<- best mrr")
    assert "points on 10 dev questions (stratified, seed 13)" in lines[3]
    assert lines[5].split() == ["alpha=1", "1.0000", "0.0000", "chosen"]
    assert lines[6].split() == ["small-hybrid", "(alpha=0.5)", "0.5000", "0.5000", "base"]
    assert lines[7] == ("held-out mrr, chosen - base: -0.5000 [-0.5000, -0.5000] n=10, p(perm)=0.0020, "
                        "0/10/0 w/l/t: real")
    assert lines[8] == "optimism (chosen point's dev - held-out mrr): +1.0000"
    assert lines[9] == "margin over the base: dev +0.5000, held-out -0.5000"
    rows = list(csv.DictReader(io.StringIO((folder / "sweep.csv").read_text())))
    assert [(r["retriever.alpha"], r["mrr"], r["questions"], r["role"]) for r in rows] == [
        ("0", "0.0", "dev", ""), ("1", "1.0", "dev", "best"), ("1", "0.0", "held-out", "best"),
        ("0.5", "0.5", "held-out", "base")]
    page = (folder / "sweep.html").read_text()
    assert 'id="held-out"' in page and "checked on 10 held-out questions" in page and 'id="optimistic"' not in page
    assert "+1.0000" in page and "-0.5000 [-0.5000" not in page and "permutation p 0.0020" in page
    assert page.count("-0.5000") == 4  # the delta, both ends of its interval, the held-out margin
    assert 'id="margin"' in page and "+0.5000 on the dev questions" in page


def test_a_grid_point_with_the_base_config_gives_its_dev_score(scripted):
    _, s = _sweep(scripted, "0,0.5,1")
    assert len(scripted["made"]) == 5  # 3 points + best and base on held-out: no extra dev run
    assert s["held_out"]["dev"] == {"best": 1.0, "base": 0.5} and s["held_out"]["paired"]["n"] == 10


def test_no_holdout_runs_every_point_on_every_question_and_says_it_is_optimistic(scripted):
    folder, s = _sweep(scripted, "0,1", holdout=False)
    assert scripted["made"] == [("small-hybrid[alpha=0]", 0, 20), ("small-hybrid[alpha=1]", 1, 20)]
    assert (s["holdout"], s["optimistic"]) == (False, OPTIMISTIC) and "held_out" not in s and "n_dev" not in s
    assert [p["metrics"]["mrr"] for p in s["points"]] == [0.5, 0.5] and s["best"] == 0  # a tie: the first
    assert not (folder / "dev.jsonl").exists()
    assert sweep.table(s)[-1].startswith(f"note: {OPTIMISTIC}")
    assert [r["questions"] for r in csv.DictReader(io.StringIO((folder / "sweep.csv").read_text()))] == ["all", "all"]
    page = (folder / "sweep.html").read_text()
    assert 'id="optimistic"' in page and OPTIMISTIC in page and 'id="held-out"' not in page


def test_the_cli_holds_out_by_default_and_passes_its_options(tmp_path, monkeypatch):
    seen = {}

    def run_sweep(name, experiments, dials, overrides, opts, metric, answers, holdout, dev_fraction, workers,
                  ray_address, force=False):
        seen.update(holdout=holdout, dev_fraction=dev_fraction, overrides=overrides, workers=(workers, ray_address))
        (tmp_path / "sweep.json").write_text(json.dumps({"metric": metric, "dials": {"retriever.alpha": [0]},
                                                         "best": None, "points": [], "holdout": holdout}))
        return tmp_path

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    from lab.cli import main

    assert main(["sweep", "small-hybrid", "--set", "retriever.alpha=0", "--experiments",
                 str(FIXTURES / "experiments"), "--cache", str(tmp_path / "c")]) == 0
    assert (seen["holdout"], seen["dev_fraction"], seen["workers"]) == (True, 0.5, (1, None))  # serial, no Ray
    assert main(["sweep", "small-hybrid", "--set", "retriever.alpha=0", "--no-holdout", "--dev-fraction", "0.3",
                 "--seed", "7", "--experiments", str(FIXTURES / "experiments"), "--cache", str(tmp_path / "c")]) == 0
    assert (seen["holdout"], seen["dev_fraction"], seen["overrides"]["sample"]["seed"]) == (False, 0.3, 7)
    args = build_parser().parse_args(["sweep", "x", "--set", "a=1"])
    assert (args.no_holdout, args.dev_fraction) == (False, 0.5)


# --- the page, for every kind of summary -----------------------------------------------------------

OLD_SWEEP = {  # a sweep.json from before the held-out check
    "experiment": "hybrid", "metric": "mrr", "dials": {"retriever.alpha": [0, 1]}, "best": 1,
    "points": [{"point": {"retriever.alpha": a}, "label": f"alpha={a}", "run": f"r/hybrid[alpha={a}]/1",
                "metrics": {"mrr": m}, "index_reused": True, "texts_embedded": 0, "seconds": 1.0}
               for a, m in ((0, 0.8858), (1, 0.9059))],
}


def test_an_old_sweep_json_renders_as_optimistic(tmp_path):
    page = render_sweep(OLD_SWEEP, tmp_path / "sweep.html").read_text()
    assert 'id="optimistic"' in page and 'id="held-out"' not in page and "0.9059" in page
    assert sweep.table(OLD_SWEEP)[-1].startswith(f"note: {OPTIMISTIC}")
    assert sweep.to_csv(OLD_SWEEP).splitlines()[2] == "1,0.9059,1.0,True,0,all,best"


def test_an_old_optimize_json_renders_its_held_out_scores_without_a_test(tmp_path):
    s = {**OLD_SWEEP, "n_dev": 60, "n_held_out": 61, "seed": 13,
         "held_out": {"best": {"mrr": 0.7860}, "base": {"mrr": 0.6899}}}
    page = render_sweep(s, tmp_path / "optimize.html").read_text()
    assert 'id="held-out"' in page and 'id="paired"' not in page and 'id="optimistic"' not in page
    assert 'id="margin"' not in page  # no dev score of the base
    assert "0.7860" in page and "0.6899" in page and "+0.1199" in page  # optimism: 0.9059 - 0.7860
