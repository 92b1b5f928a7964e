"""The verbs that check the judge: ``lab agree`` (judge-human agreement from the labels people
gave, kept in the reports folder's labels.sqlite, where a run report's downloaded labels are
imported) and ``lab judge-check`` (perturbation checks of a run's judge, or
of another judging method, on more questions than a run checks)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.config.schema import JUDGE_METHODS as METHODS
from lab.errors import LabError
from lab.judge.agree import AGREEMENT_FILE, from_file, from_store, write_agreement
from lab.judge.labels import LabelStore, login_name, store_root
from lab.paths import cache_root, resolve_run, write_atomic
from lab.runfiles import load_run


def add_parsers(sub: Any, common: Any) -> None:
    agr = sub.add_parser(
        "agree", help="judge-human agreement: kappa, Spearman and the prediction-powered mean accuracy",
        description="Compare the labels people gave a run's answers (correct / partly correct / wrong, and "
                    "optionally a corrected accuracy; made in the run's report.html and downloaded as "
                    "labels.json) with the judge's accuracy: weighted Cohen's kappa (linear, over the classes "
                    "4-5 correct, 2-3 partly, 1 wrong) and Spearman's rho, overall and per category, and the "
                    "mean accuracy estimated from the judge's scores corrected by the labels (prediction-powered "
                    f"inference) beside the judge-only mean, each with a 95% interval. Writes {AGREEMENT_FILE} "
                    "into the run folder. Human scores: the corrected accuracy, else correct 5, partly 3, wrong 1. "
                    "Label answers picked at random (not the ones that look wrong): the prediction-powered "
                    "interval assumes it.",
        epilog="example: lab agree turn13 ~/Downloads/labels.json\n"
               "         lab agree turn13    (the labels the team gave in lab serve, from reports/labels.sqlite)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    agr.add_argument("run", metavar="RUN", help="an experiment NAME (its latest run) or a run folder")
    agr.add_argument("labels", type=Path, metavar="LABELS", nargs="?",
                     help="the labels.json downloaded from the run's report (default: the labels kept by lab serve in "
                          "the reports folder's labels.sqlite, every annotator's; an answer several people labelled "
                          "counts as their mean)")
    agr.add_argument("--annotator", metavar="NAME", help="only this annotator's labels from labels.sqlite")
    agr.add_argument("--import-as", metavar="NAME", dest="import_as",
                     help="keep the LABELS file's labels in labels.sqlite as NAME's (then lab serve shows them)")
    options.reports(agr)

    chk = sub.add_parser(
        "judge-check", help="perturbation checks of a run's judge on more questions (or of another method)",
        description="Judge the reference answers of a judged run's questions and controlled corruptions of them "
                    "(a wrong figure, date or name; a fact left out; an unrelated true fact added; a paraphrase; "
                    "a refusal) and report how often each scores as it should: sensitivity (the targeted "
                    "dimension drops), specificity (the others stay within one point), invariance "
                    "(a paraphrase stays within one point) and above (the partial answer, correct but a fact short, "
                    "scores above the wrong one on accuracy). With --method, another judging method is checked "
                    "and also scores the run's real answers, beside the run's judge. Writes "
                    "judge-check-<method>-n<N>.json into the run folder. Model calls are cached.",
        epilog="example: lab judge-check turn13 --n 100 --method rubric-expected")
    chk.add_argument("run", metavar="RUN", help="an experiment NAME (its latest run) or a run folder")
    chk.add_argument("--n", type=int, default=100, help="questions checked, stratified by category (default 100)")
    chk.add_argument("--method", choices=METHODS, default=None, help="judging method (default: the run's)")
    chk.add_argument("--seed", type=int, default=None, help="sampling seed (default: the run's)")
    options.reports(chk)
    options.cache(chk)
    chk.add_argument("--no-progress", action="store_true", help="no progress bars (progress lines are logged instead)")
    common(chk)

    cand = sub.add_parser(
        "judge-methods", help="perturbation checks of several judging methods on an eval set (which to use?)",
        description="For a category-stratified sample of an eval set's questions, every judging method named "
                    "judges each reference answer and its perturbations (as judge-check does), with the judge and "
                    "generator of --config. Writes <method>.json per method and table.md into --out and prints "
                    "the table. With --table, only prints one table merged from earlier --out folders. Model "
                    "calls are cached: a rerun takes seconds.",
        epilog="example: lab judge-methods --eval eval_sets/company.jsonl --n 60 --methods rubric rubric-expected "
               "--out reports/_judge/company")
    cand.add_argument("--eval", type=Path, help="eval set (JSONL) whose reference answers are perturbed")
    cand.add_argument("--out", type=Path, help="folder for <method>.json and table.md")
    cand.add_argument("--config", default="turn13", help="experiment whose judge and generator are used (default turn13)")
    cand.add_argument("--n", type=int, default=60, help="questions sampled, stratified by category (default 60)")
    cand.add_argument("--seed", type=int, default=13, help="sampling seed (default 13)")
    cand.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS, help="the candidates (default: all)")
    cand.add_argument("--prompt", default=None, help="judge prompt (default: the config's)")
    cand.add_argument("--table", nargs="+", type=Path, metavar="DIR", help="only print one table merged from these --out folders")
    options.cache(cand)
    common(cand)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(m: dict) -> str:
    ci = m.get("ci")
    return f"{_num(m['mean'], 2)} [{_num(ci[0], 2)}, {_num(ci[1], 2)}]" if ci else f"{_num(m['mean'], 2)} (no interval)"


def agreement_lines(a: dict) -> list[str]:
    """The terminal view of an ``agreement.json``."""
    out = [f"judge-human agreement: run {a['run']}, {a['n_pairs']} labelled of {a['n_judged']} judged answers "
           f"(judge {a['judge']['model']}, prompt {a['judge']['prompt_version']})"]
    out.append(f"{'':<16}{'n':>5}{'kappa (linear)':>16}{'spearman':>10}")
    rows = [("overall", a["overall"])] + list(a["by_category"].items())
    for name, row in rows:
        why = row["kappa"]["why"] or row["spearman"]["why"]
        out.append(f"{name:<16}{row['n']:>5}{_num(row['kappa']['value']):>16}{_num(row['spearman']['value']):>10}"
                   + (f"   ({why})" if why else ""))
    c = a["overall"]["confusion"]
    out.append("human \\ judge   " + "".join(f"{k:>9}" for k in c))
    out += [f"{h:<16}" + "".join(f"{n:>9}" for n in row.values()) for h, row in c.items()]
    judge, ppi = a["accuracy_mean"]["judge_only"], a["accuracy_mean"]["ppi"]
    out.append(f"mean accuracy, judge only:           {_interval(judge)} over {judge['n']} answers")
    rect = "-" if ppi["rectifier"] is None else f"{ppi['rectifier']:+.2f}"
    how = f"{ppi['n_labelled']} labelled, {ppi['n_unlabelled']} not; human - judge on the labelled {rect}"
    label = "human labels only" if ppi["n_unlabelled"] == 0 else "judge + labels (PPI)"
    out.append(f"mean accuracy, {label + ':':<22}{_interval(ppi)} ({how})"
               + (f" ({ppi['why']})" if ppi.get("why") else ""))
    if a["disagreements"]:
        shown = a["disagreements"][:8]
        out.append("disagreements (human vs judge): " + ", ".join(f"{d['id']} {d['human']} vs {d['judge']:.3g}"
                                                                for d in shown)
                   + (f" and {len(a['disagreements']) - len(shown)} more" if len(a["disagreements"]) > 8 else ""))
    if a["left_out"]:
        out.append("left out: " + ", ".join(f"{x['id']} ({x['why']})" for x in a["left_out"]))
    out += [f"warning: {w}" for w in a["warnings"]]
    return out


def cmd_agree(args: argparse.Namespace) -> int:
    folder = resolve_run(args.run, args.reports)
    if args.labels is None:
        if args.import_as:
            raise LabError("--import-as needs a LABELS file to import", hint="lab agree RUN labels.json --import-as NAME")
        results, _ = load_run(folder)
        result = from_store(LabelStore(store_root(folder, results, args.reports)), folder, args.annotator)
        said = []
    else:
        if args.annotator:
            raise LabError("--annotator picks labels already kept; a LABELS file's are imported as one annotator's",
                           hint="lab agree RUN labels.json --import-as NAME")
        path = args.labels.expanduser()
        result, imported = from_file(folder, path, args.import_as or login_name(), args.reports)
        same = len(imported.ids) - imported.new - imported.changed
        said = [f"imported {len(imported.ids)} labels of {path} as {imported.annotator}'s into {imported.store.path} "
                f"({imported.new} new, {imported.changed} changed, {same} already there)"]
        kept = imported.store.counts().get(result["run"], 0)
        if kept > len(imported.ids):
            said.append(f"the store keeps {kept} labels of run {result['run']}: lab agree {args.run} reports them "
                        f"all; above, the {len(imported.ids)} of {path.name}")
    out = write_agreement(folder, result)
    print("\n".join(agreement_lines(result) + said))
    print(f"wrote {out}")
    return 0


def check_lines(out: dict) -> list[str]:
    """The terminal view of a judge-check result."""
    s = out["summary"]
    lines = [f"judge checks ({out['method']}, {out['n']} questions, seed {out['seed']}):"]
    for kind, row in s["kinds"].items():
        parts = [f"{measure} {dim} {share:.0%}" for measure in ("sensitivity", "specificity", "invariance", "resistance",
                                                                "above")
                 for dim, share in (row.get(measure) or {}).items() if share is not None]
        lines.append(f"  {kind:<11} n={row['n']:<4} " + (", ".join(parts) or "not measured")
                     + (f" ({row['n_skipped']} skipped)" if row["n_skipped"] else ""))
    met = [g for g in s["goals"] if g["met"]]
    lines.append(f"  goals met: {len(met)} of {len(s['goals'])}")
    for g in s["goals"]:
        share = "-" if g["share"] is None else f"{g['share']:.0%}"
        mark = "ok" if g["met"] else "NO"
        lines.append(f"    {mark:<3}{g['measure']} {g['kind']} {g['dimension']}: {share} (goal {g['goal']:.0%})")
    d = out.get("differs") or {}
    if d.get("share") is not None:
        lines.append(f"  completeness and relevance differ by >= {d['by']} on {d['share']:.0%} of {d['n']} real answers")
    for dim, a in (out.get("agreement_with_run_judge") or {}).items():
        if a["spearman"] is not None:
            lines.append(f"  {dim}: Spearman {a['spearman']:.2f} with the run's judge, mean |diff| {a['mean_abs_diff']:.2f}")
    sec = out.get("seconds") or {}
    if sec:
        lines.append(f"  model time {sec['model']:.0f} s, {sec['per_answer']:.2f} s per judged answer ({sec['calls']} calls)")
    return lines


def cmd_judge_methods(args: argparse.Namespace) -> int:
    from lab.judge import candidates  # loads the model libraries: only when checking

    if args.table:
        print(candidates.merged(args.table))
        return 0
    if args.eval is None or args.out is None:
        raise LabError("lab judge-methods needs --eval and --out to run the checks",
                       hint="pass --eval SET.jsonl --out DIR (or --table DIR ... to merge earlier results)")
    from lab.config import load_experiment
    from lab.evalsets.evalset import load_eval_set
    from lab.judge.rubric import resolve_judge
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.progress import run_all

    root = args.experiments.resolve().parent
    cfg = load_experiment(args.config, args.experiments, {"judge": {"prompt": args.prompt}} if args.prompt else None)
    plan = resolve_judge(cfg.judge, root)
    if plan is None or cfg.generation is None:
        raise LabError(f"experiment {args.config!r} needs a judge and a generation section",
                       hint="pass --config with one that has both (turn13 does)")
    cache = cache_root(args.cache)
    llm = build_llm(plan.llm, cache)
    gen = build_llm(resolve_llm(cfg.generation.llm, "generation", root), cache)
    rows = load_eval_set(args.eval.expanduser(), None).rows
    items = [{"id": r.id, "category": r.category, "question": r.question, "reference": r.reference_answer,
              "keywords": list(r.keywords or [])} for r in rows]
    outs = candidates.check_methods(items, args.methods, llm, plan, gen, args.n, args.seed, args.out.expanduser(),
                                    lambda method: lambda fn, keys: run_all(fn, keys, f"judge {method}", True, 1))
    for method, out in outs.items():
        print(f"{method}: {out['seconds']['wall']:.0f} s")
    print(candidates.table(outs))
    print(f"wrote {args.out}")
    return 0


def cmd_judge_check(args: argparse.Namespace) -> int:
    folder = resolve_run(args.run, args.reports)
    from lab.judge.checks import check_run  # loads the model libraries: only when checking

    cache = cache_root(args.cache)
    out = check_run(folder, args.n, args.method, Path.cwd(), cache, not args.no_progress, args.seed)
    path = folder / f"judge-check-{out['method']}-n{out['n']}.json"
    write_atomic(path, json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print("\n".join(check_lines(out)))
    print(f"wrote {path}")
    return 0


COMMANDS = {"agree": cmd_agree, "judge-check": cmd_judge_check, "judge-methods": cmd_judge_methods}
