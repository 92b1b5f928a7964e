"""Compare runs from their files alone: metrics side by side, and what makes them incomparable.

:func:`warnings` names every difference that makes a delta misleading: another eval set or
sample, another metric k, another judge (model, prompt or parameters) for the answer scores,
or the same experiment name run with a different resolved config.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import LabError

ORDER = ("mrr", "ndcg", "coverage", "context_chars", "accuracy", "completeness", "relevance")
HIGHER_IS_BETTER = {"mrr", "ndcg", "coverage", "accuracy", "completeness", "relevance"}


def resolve_run(ref: str, reports_root: Path) -> Path:
    """A run folder, ``reports/<NAME>/LATEST``, or an experiment NAME (its latest run)."""
    path = Path(ref)
    if path.name == "LATEST" and path.is_file():
        path = path.parent / path.read_text().strip()
    if not (path / "results.json").is_file():
        latest = reports_root / ref / "LATEST"
        if latest.is_file():
            path = latest.parent / latest.read_text().strip()
    if not (path / "results.json").is_file():
        raise LabError(f"{ref!r} is neither a run folder nor an experiment with runs in {reports_root}",
                       hint="pass reports/<NAME>/<run-id>, or a NAME that `lab run NAME` has written")
    return path


def _judge_identity(r: dict) -> tuple | None:
    j = (r.get("models") or {}).get("judge")
    if not j:
        return None
    return (j["backend"], j["model"], j.get("fingerprint"), j["prompt_version"], j.get("prompt_sha256"),
            j["temperature"], j.get("max_tokens"))


def warnings(runs: list[dict]) -> list[str]:
    """Reasons the runs' figures are not comparable (empty when they are)."""
    out = []

    def differ(get) -> bool:
        return len({json.dumps(get(r), sort_keys=True) for r in runs}) > 1

    if differ(lambda r: r["data"]["eval_sha256"]):
        out.append("different eval sets: " + ", ".join(f"{r['name']} {r['data']['eval_sha256'][:12]}" for r in runs))
    if differ(lambda r: (r["sample"]["n_questions"], r["sample"].get("limit"), r["sample"].get("seed"))):
        out.append("different questions (sample size or seed): " + ", ".join(
            f"{r['name']} {r['sample']['n_questions']} of {r['sample']['n_total']}" for r in runs))
    if differ(lambda r: r["metrics"]["k"]):
        out.append("different metric k: " + ", ".join(f"{r['name']} k={r['metrics']['k']}" for r in runs))
    judged = [r for r in runs if _judge_identity(r)]
    if len({_judge_identity(r) for r in judged}) > 1:
        out.append("judged by different judges, so answer scores are not comparable: " + ", ".join(
            f"{r['name']} {r['models']['judge']['model']} ({r['models']['judge']['prompt_version']})" for r in judged))
    by_name: dict[str, set] = {}
    for r in runs:
        by_name.setdefault(r["name"], set()).add(r["config_fingerprint"])
    for name, prints in by_name.items():
        if len(prints) > 1:
            out.append(f"{name} was run with {len(prints)} different resolved configs: a changed config "
                       "should have been a new experiment file")
    return out


def table(runs: list[dict]) -> list[str]:
    """Overall metrics side by side, with the delta of each run against the first."""
    names = [f"{r['name']}@{r['run_id'][-6:]}" if sum(x["name"] == r["name"] for x in runs) > 1 else r["name"]
             for r in runs]
    metrics = [m for m in ORDER if any(m in r["metrics"]["overall"] for r in runs)]
    lines = [f"{'metric':<16}" + "".join(f"{n:>24}" for n in names)]
    for m in metrics:
        cells = []
        base = runs[0]["metrics"]["overall"].get(m, {}).get("mean")
        for i, r in enumerate(runs):
            v = r["metrics"]["overall"].get(m, {}).get("mean")
            cell = "-" if v is None else (f"{v:,.0f}" if m == "context_chars" else f"{v:.4f}")
            if i and v is not None and base is not None:
                d = v - base
                cell += f" ({d:+,.0f})" if m == "context_chars" else f" ({d:+.4f})"
                if m in HIGHER_IS_BETTER and d:
                    cell += " ▲" if d > 0 else " ▼"
            cells.append(cell)
        lines.append(f"{m:<16}" + "".join(f"{c:>24}" for c in cells))
    return lines


def load_results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
