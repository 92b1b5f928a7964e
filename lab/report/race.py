"""``lab race``'s page and terminal lines, from the race folder's ``race.json`` and its two runs:
the comparison page of the two runs with each metric's confidence sequence plotted (the interval
narrowing question by question, the stopping point marked), and the decision in words."""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import DataError
from lab.metrics import catalog
from lab.metrics.catalog import fmt_delta
from lab.paths import write_atomic
from lab.stats.sequences import LABELS, LEGACY_SEQUENCE

PLOT_W, PLOT_H, PAD = 560, 180, 40
REASONS = {"difference": "every metric's confidence sequence excluded 0",
           "futile": "for every metric, the confidence sequence ruled out a difference as large as the effect that "
                     "matters, or the whole set could not detect one at the spread seen so far",
           "decided": "every metric decided (a difference or futile)",
           "exhausted": "the questions ran out before a decision: the fixed-n paired test decides",
           "budget": "--max was reached before a decision: rerun with a larger --max to continue the same order",
           "pass": "every metric's confidence sequence ruled out a drop as large as the margin",
           "fail": "a metric's confidence sequence showed a drop larger than the margin"}


def load(folder: Path) -> dict:
    """A race folder's ``race.json``; a race recorded before races named their confidence sequence
    read the empirical-Bernstein one, and says so (``sequence``)."""
    path = Path(folder) / "race.json"
    try:
        race = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such file", hint="pass a race folder: reports/_race/A--B/<run-id>") from None
    return {**race, "sequence": race.get("sequence") or LEGACY_SEQUENCE}


def sequence_text(race: dict) -> str:
    """The name of the confidence sequence a race read, in words."""
    return LABELS.get(race["sequence"], str(race["sequence"]))


def plots(race: dict) -> list[dict]:
    """Per metric: the sequence's band, the running mean and 0, in SVG coordinates."""
    out = []
    for p in race["paths"]:
        n = len(p["lower"])
        if not n or p.get("category") is not None:  # a category's sequence is a line of the table, not a plot
            continue
        span = 4.0 if catalog.is_score(p["metric"]) else 1.0

        def x(t: int) -> float:
            return PAD + (PLOT_W - PAD - 10) * (t - 1) / max(n - 1, 1)

        def y(v: float) -> float:
            v = max(-span, min(span, v))
            return 10 + (PLOT_H - 30) * (span - v) / (2 * span)

        upper = [(x(t + 1), y(v)) for t, v in enumerate(p["upper"])]
        lower = [(x(t + 1), y(v)) for t, v in enumerate(p["lower"])]
        band = " ".join(f"{a:.1f},{b:.1f}" for a, b in upper + lower[::-1])
        mean = " ".join(f"{x(t + 1):.1f},{y(v):.1f}" for t, v in enumerate(p["mean"]))
        out.append({"metric": p["metric"], "label": catalog.METRICS[p["metric"]].label, "n": n, "band": band,
                    "mean": mean, "zero": y(0.0), "stop_x": x(n), "w": PLOT_W, "h": PLOT_H, "pad": PAD,
                    "top": f"{span:+g}", "bottom": f"{-span:+g}", "last": {"mean": p["mean"][-1],
                                                                          "lower": p["lower"][-1],
                                                                          "upper": p["upper"][-1]}})
    return out


def lines(race: dict) -> list[str]:
    """The decision in words, for the terminal."""
    a, b = race["a"], race["b"]
    why = REASONS[race["reason"]]
    if race.get("margin") is not None and race["reason"] in ("exhausted", "budget"):
        why = why.replace("the fixed-n paired test decides", "the fixed-n gate decides")
    out = [f"{b} against {a}{' (gate, margin %g)' % race['margin'] if race.get('margin') is not None else ''}: "
           f"stopped after {race['stopped_at']} of {race['n_total']} questions ({race['reason']}: {why})",
           f"  read with the {sequence_text(race)}"]
    for m, v in race["verdicts"].items():
        if v.get("n"):
            out.append(f"  {m}: {v['verdict']}, {b} - {a} {fmt_delta(m, v['mean'])}, "
                       f"{1 - race['alpha']:.0%} confidence sequence [{fmt_delta(m, v['lower'])}, "
                       f"{fmt_delta(m, v['upper'])}] over {v['n']} questions")
        else:
            out.append(f"  {m}: no values")
    for cat, verdicts in (race.get("by_category") or {}).items():
        for m, v in verdicts.items():
            out.append(f"  {m} in {cat}: " + (f"{v['verdict']}, {fmt_delta(m, v['mean'])} [{fmt_delta(m, v['lower'])}, "
                                              f"{fmt_delta(m, v['upper'])}] over {v['n']} questions" if v.get("n")
                                              else "no values"))
    if race.get("by_category"):
        family = len(race["metrics"]) * (1 + len(race["by_category"]))
        out.append(f"  every sequence at alpha / {family} (the metrics overall and in each category: "
                   f"{race['alpha']:g} for all the claims together)")
    saved = race["questions_saved"]
    out.append(f"  {saved} questions not run ({race['llm_calls_saved']:,} LLM calls saved at this race's calls per "
               f"question); {race['wall_s']:.1f} s")
    return out


def render_race(folder: Path, junit: Path | None = None) -> tuple[list[str], bool | None]:
    """Write the race folder's ``compare.html`` (the two runs, the sequence plotted) and return the
    terminal lines (the decision, and the fixed-n test where the questions ran out) and, for a
    gate, whether it passed (the fixed-n gate's verdict where the sequence did not decide); with
    ``junit``, a JUnit XML file of the gate there."""
    from lab.report.compare import load_runs, paired_lines, render_compare

    race = load(folder)
    runs = load_runs([race["runs"][race["a"]], race["runs"][race["b"]]], Path(folder).parent)
    page = render_compare(runs, Path(folder), force=True, race={**race, "plots": plots(race),
                                                                 "reason_text": REASONS[race["reason"]],
                                                                 "sequence_text": sequence_text(race)})
    out = lines(race)
    passed = None
    undecided = race["reason"] in ("exhausted", "budget")
    if race.get("margin") is not None:
        from lab.report.gate import gate_lines, gate_runs, junit_xml

        if undecided:  # the sequence did not decide: the fixed-n gate over the questions used
            result = gate_runs(runs[0], runs[1], {m: race["margin"] for m in race["metrics"]}, race["alpha"])
            out += ["  the fixed-n gate over those questions:"] + ["    " + x for x in gate_lines(result)]
            passed = result["passed"]
            if junit is not None:
                write_atomic(junit, junit_xml(result))
        else:
            passed = race["reason"] == "pass"
            if junit is not None:
                write_atomic(junit, race_junit(race))
    elif undecided:
        out += ["  the fixed-n paired test over those questions:"] + ["    " + x for x in paired_lines(runs)]
    out.append(f"race: {Path(folder) / 'race.json'}")
    out.append(f"comparison: {page}")
    return out, passed


def race_junit(race: dict) -> str:
    """A sequential gate's JUnit XML: ``<testsuite name="lab gate">``, one testcase per metric, a
    failure in each that failed, the race's figures as properties."""
    import xml.etree.ElementTree as ET

    suite_name = "lab gate"
    failed = [m for m, v in race["verdicts"].items() if v.get("verdict") == "fail"]
    counts = {"tests": str(len(race["verdicts"])), "failures": str(len(failed)), "errors": "0"}
    root = ET.Element("testsuites", {"name": suite_name, **counts, "time": f"{race['wall_s']:.3f}"})
    suite = ET.SubElement(root, "testsuite", {"name": suite_name, **counts, "skipped": "0",
                                              "time": f"{race['wall_s']:.3f}"})
    props = ET.SubElement(suite, "properties")
    for name, value in (("baseline", race["runs"][race["a"]]), ("candidate", race["runs"][race["b"]]),
                        ("alpha", f"{race['alpha']:g}"), ("margin", f"{race['margin']:g}"),
                        ("method", f"sequential: {sequence_text(race)}"),
                        ("questions", f"{race['stopped_at']} of {race['n_total']}")):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for m, v in race["verdicts"].items():
        case = ET.SubElement(suite, "testcase", {"classname": suite_name, "name": m, "time": "0"})
        line = (f"{v.get('verdict', '').upper()} {m}: {race['b']} - {race['a']} {v.get('mean', 0):+.6f}, confidence "
                f"sequence [{v.get('lower', 0):+.6f}, {v.get('upper', 0):+.6f}], margin {race['margin']:g}, "
                f"n {v.get('n', 0)}")
        if v.get("verdict") == "fail":
            ET.SubElement(case, "failure", {"message": line, "type": "NonInferiorityFailed"}).text = line
        ET.SubElement(case, "system-out").text = line
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
