"""Are two sets of runs the same? For refactors that must change nothing observable.

    python scripts/diff_runs.py BEFORE_REPORTS AFTER_REPORTS turn13 turn18 hybrid ...

For each experiment NAME, the latest run under each reports folder is compared:

- ``samples.jsonl``: every field of every question (chunks, scores, ranks, metrics, answers,
  judgements), except the per-question ``timings``;
- ``results.json``: metrics, per-category metrics, the config and its fingerprint, the index
  key, the eval set's and corpus's hashes, and every counter that is not about this machine's
  caches (LLM calls, cache hits and the tokens of the calls computed); left out: run id, times,
  environment (commit, versions), whether the index or the
  embeddings were served from the cache, and the absolute paths of the knowledge base and eval
  set (the two checkouts live in different folders; the config's own paths are compared);
- ``report.html``: the BEFORE run's page re-rendered by the current code from BEFORE's files
  must be byte-identical to the page BEFORE wrote (reports are a pure function of the files).

Prints one line per experiment and exits 1 when anything differs.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from lab.paths import resolve_run
from lab.report.html import render_run

#: results.json keys that describe the machine, the moment or the cache, not the run's outcome.
VOLATILE = {"run_id", "created_at", "timings", "environment"}
CACHE_COUNTERS = {"embeddings_computed", "embeddings_cached", "query_embeddings_computed",
                  "query_embeddings_cached", "rerank_scores_computed", "rerank_scores_cached"}


def _samples(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text(encoding="utf-8").splitlines() if line]
    for r in rows:
        r.pop("timings", None)
        for key in ("answer", "judgement"):
            if isinstance(r.get(key), dict):
                r[key].pop("seconds", None)
                r[key].pop("cached", None)
        for part in (r.get("calibration") or {}).values():  # the calibration's judgements, as above
            if isinstance(part, dict):
                part.pop("seconds", None)
                part.pop("cached", None)
    return rows


def _results(folder: Path) -> dict:
    r = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for key in VOLATILE:
        r.pop(key, None)
    r["data"] = {k: v for k, v in r["data"].items() if k not in ("knowledge_base", "eval_set")}
    r["index"] = {k: v for k, v in r["index"].items() if k not in ("reused", "texts_embedded", "path")}
    r["counters"] = {k: v for k, v in r["counters"].items() if k not in CACHE_COUNTERS and not k.startswith("llm_")}
    for usage in (r.get("llm_usage") or {}).values():
        for k in ("calls", "cached", "seconds", "prompt_tokens", "completion_tokens"):  # computed calls only
            usage.pop(k, None)
    return r


def _diff(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} after"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"[:300]]


def _report_identical(folder: Path) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy)
        render_run(copy)
        return (copy / "report.html").read_bytes() == (folder / "report.html").read_bytes()


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    before_root, after_root, names = Path(argv[0]), Path(argv[1]), argv[2:]
    failed = False
    for name in names:
        before, after = resolve_run(name, before_root), resolve_run(name, after_root)
        sb, sa = _samples(before), _samples(after)
        diffs = _diff(sb, sa, "samples") + _diff(_results(before), _results(after), "results")
        same_report = _report_identical(before)
        n_metrics = len(json.loads((after / "results.json").read_text())["metrics"]["overall"])
        if diffs or not same_report:
            failed = True
            print(f"{name:<22} DIFFERENT: {len(diffs)} fields" + ("" if same_report else ", report.html re-render"))
            for d in diffs[:10]:
                print(f"    {d}")
        else:
            print(f"{name:<22} identical: {len(sa)} samples, {n_metrics} metrics, report.html re-rendered byte for byte")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
