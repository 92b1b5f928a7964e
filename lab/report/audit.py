"""The views of an eval-set audit, from its findings dict alone (the dict
``lab.evalsets.audit.audit_eval_set`` returns; it may have been read back from JSON): a compact
terminal summary and a self-contained HTML page in the house style.

Both views walk the same :data:`SECTIONS` list, worst first, so a new finding is written once.
"""

from __future__ import annotations

import posixpath
from collections import Counter

from lab.progress import duration
from lab.report.html import COLOURS, PAGE_ROWS, environment

#: Example rows per finding in the terminal; the rest are on the page.
SHOWN = 3

#: Every finding that lists rows, worst first: (anchor, where in the findings, title, why it matters).
SECTIONS: tuple[tuple[str, tuple[str, str], str, str], ...] = (
    ("checks", ("checks", "rows"), "Rows the rules doubt",
     "A span in an example's output (a code block, a console transcript, a table), a question its span cannot "
     "answer (\"how many\" without a number), a question naming a file or path, spans too short to hold the "
     "answer, or an answer its category contradicts: lab generate rejects such rows. Read these first."),
    ("answer-check", ("answer_check", "doubted"), "Questions the answer check doubts",
     "lab audit --check asked the model to copy the words of the span's passage (the span and the prose sentences "
     "within two of it) that answer the question: none, a neighbour's words or the question's own. Unlike its "
     "yes/no, this tells rows apart: on documentation held out from it, the rows it doubted were mostly wrong "
     "and those it passed mostly right (docs/own-documents.md#audit-answer-check). Read these next."),
    ("spans", ("spans", "errors"), "Golden spans that do not match their document",
     "The span metrics score a retrieval that finds the right text as a miss. Where the content was found, "
     "the fix gives the offsets to store."),
    ("exact", ("duplicates", "exact"), "Exact duplicate questions",
     "A duplicated question counts twice in every mean."),
    ("nowhere", ("keywords", "nowhere"), "Keywords in no document",
     "No retrieval can find them: the question scores 0 on the keyword metrics whatever the pipeline."),
    ("unsupported", ("support", "unsupported"), "Reference answers their spans do not support",
     "Answers are judged against a reference the evidence does not back."),
    ("near", ("duplicates", "near"), "Near-duplicate questions",
     "Paraphrases of one question give it more weight than the others."),
    ("common", ("keywords", "common"), "Keywords in most documents",
     "Any retrieval finds them, so they say little about a pipeline."),
    ("in_question", ("keywords", "in_question"), "Keywords in the question",
     "Word-matching retrieval (BM25) finds them for free: they favour it over dense retrieval."),
    ("touching_none", ("coverage", "rows_touching_none"), "Questions that touch no document",
     "Under the coverage rule no single document answers them (often a question across two documents)."),
    ("failed", ("support", "failed"), "Support checks that failed",
     "No verdict: counted neither as supported nor as unsupported."),
    ("size", ("size", "rows"), "Trivial or over-long rows",
     "The generator's size filter: a yes/no answer or a very short question says little."),
    ("without", ("keywords", "without"), "Rows without keywords",
     "The keyword metrics are n/a for them (said so in results, never 0); the span metrics, MRR and nDCG (spans) "
     "among them, still score them."),
    ("not_checked", ("spans", "not_checked"), "Spans not checked",
     "The knowledge base holds the document in another format, so offsets into the original cannot be checked."),
    ("twins", ("spans", "twins"), "Golden spans with twins",
     "The same text (whitespace and case aside) is elsewhere in the knowledge base: a passage holding a twin "
     "counts as holding the span in MRR and nDCG (spans) and span recall (twins count), not in span precision, "
     "recall and IoU."),
)


def _rows(findings: dict, where: tuple[str, str]) -> list[dict]:
    return (findings.get(where[0]) or {}).get(where[1]) or []


def _fix(row: dict) -> str:
    fix = row.get("fix")
    if not fix:
        return ""
    out = f"start_index {fix['start_index']}, end_index {fix['end_index']}"
    if fix.get("source") != row.get("source"):
        out = f"source {fix['source']}, {out}"
    return out + (", content as in the document" if "content" in fix else "")


def _not_run(findings: dict) -> list[str]:
    """Checks that need a model or a run and were not given one."""
    out = []
    if not findings["duplicates"].get("near_checked"):
        out.append("near duplicates (no embedding model)")
    if not findings["support"].get("checked"):
        out.append("support of reference answers (`lab audit --check` asks the LLM)")
    if findings.get("power") is None:
        out.append("detectable differences (no run's samples)")
    return out


def _mde(cell: dict | None) -> str:
    return "-" if not cell or cell.get("mde") is None else f"{cell['mde']:.3f}"


def audit_lines(findings: dict, *, more: str = "the HTML page") -> list[str]:
    """The terminal summary: counts, the problems worst first, up to :data:`SHOWN` rows of each
    finding and where the rest are (``more``: the page's path, when the caller wrote one)."""
    s, cov, power = findings["summary"], findings["coverage"], findings.get("power")
    counts = ", ".join(f"{n} {word if n == 1 else words}" for n, word, words in (
        (s["n_rows"], "row", "rows"), (s["n_categories"], "category", "categories"),
        (s["n_documents"], "document", "documents"), (s["n_spans"], "golden span", "golden spans")))
    out = [f"audit of {findings['source']}: {counts}: {'ok' if s['ok'] else 'NOT OK'}"]
    out += checked_lines(s.get("checked_by"))
    out += ["problems, worst first:"] + [f"  - {p}" for p in s["problems"]] if s["problems"] else ["no problems found"]
    for _, where, title, _ in SECTIONS:
        rows = _rows(findings, where)
        if not rows:
            continue
        out.append(f"{title}: {len(rows)}")
        out += [f"  {r['id']} (line {r['line']}): {r['detail']}" for r in rows[:SHOWN]]
        if len(rows) > SHOWN:
            out.append(f"  ... {len(rows) - SHOWN} more in {more}")
    if spans := findings["spans"].get("n_spans"):
        with_twins = findings["spans"].get("n_twins", 0)
        out.append(f"golden spans with twins (the same text elsewhere): {with_twins} of {spans}"
                   + (f", {findings['spans']['n_twin_places']} places" if with_twins else ""))
    small = cov["small_category"]
    out.append("categories: " + ", ".join(f"{c['name']} {c['n']}" + (f" (under {small})" if c["small"] else "")
                                          for c in cov["categories"]))
    out.append("folders: " + ", ".join(f"{f['folder']} {f['n_questions']} questions / {f['n_documents']} documents"
                                       for f in cov["folders"]))
    for d in (findings.get("addressed") or [])[:SHOWN]:
        out.append(f"addressed to an assistant or evaluator: {d['source']}: {'; '.join(d['reasons'])}")
    if cov["untouched"]:  # those with sentences to ask from first: the rest can have no generated question
        bare = set(cov.get("without_candidates", []))
        last = set(cov.get("untouched_examples", []))  # the pages lab generate asks from last
        first = sorted(cov["untouched"], key=lambda s: (s in bare, s in last))
        shown = ", ".join(first[:SHOWN])
        extra = f" and {len(first) - SHOWN} more in {more}" if len(first) > SHOWN else ""
        out.append(f"documents no question touches: {shown}{extra}" + (
            f" ({len(bare)} of them hold{'s' * (len(bare) == 1)} no sentence lab generate asks from: directives, code "
            "or tables alone)" if bare else ""))
    sup = findings["support"]
    same, skipped = sup.get("n_verbatim", 0), (f"; {sup['n_skipped']} rows without spans not checked"
                                               if sup.get("n_skipped") else "")
    if sup.get("checked") and same and not sup["n_checked"]:  # an extractive set: the answer check reads every row
        out.append(f"support check (--check): not asked of the {same} reference answers that are their spans' own "
                   f"words (each states its span by construction; the answer check reads whether it answers){skipped}")
    elif sup.get("checked"):  # the verdict for every row, said even when every row passed
        faults = Counter(f for r in sup.get("unsupported", []) for f in r.get("faults", []))
        split = (f" ({faults['entailed']} with a fact the spans do not state, {faults['answers']} not answering "
                 f"the question)" if faults else "")
        both = " and answering their question" if faults or sup.get("two_verdicts") else ""
        out.append(f"support check (--check): {sup['n_supported']} of {sup['n_checked']} reference answers supported by "
                   f"their spans{both}, {sup.get('n_unsupported', 0)} not{split}, {sup.get('n_failed', 0)} without a "
                   f"verdict" + (f"; not asked of {same} that are their spans' own words" if same else "") + skipped)
    if power:
        cells = ", ".join(f"{c['name']} {_mde(c)} (n={c['n']})" for c in power["categories"])
        out.append(f"smallest MRR difference detectable at {power['power']:.0%} power: overall "
                   f"{_mde(power['overall'])} (n={power['overall']['n']}); {cells}")
        out.append(f"  assuming {power['assumption']}")
    if not_run := _not_run(findings):
        out.append("not checked: " + "; ".join(not_run))
    return out


def checked_lines(by: dict | None) -> list[str]:
    """What was checked and by what, and what none of it can see (older findings: nothing)."""
    if not by:
        return []
    model = by["model"]
    doubts = by["rule_doubts"]
    return [f"checked by rules: {'; '.join(by['rules'])} ({doubts} {'row' if doubts == 1 else 'rows'} doubted)",
            "checked by the model: " + (_model(model) if model else "not asked (lab audit --check)"),
            _person(by["person"]),
            f"not seen by any of these: {by['unseen']}"]


def _model(model: dict) -> str:
    """The yes/no verdicts' count (none where every reference was its span's own words), the answer
    check's (findings from before it: none) and the references not asked."""
    parts = []
    if model["n_checked"] or not model.get("n_verbatim"):
        parts.append(f"{model['n_supported']} of {model['n_checked']} reference answers supported by their spans")
    if "answer_checked" in model:
        n, doubted = model["answer_checked"], model["answer_doubted"]
        parts.append(f"the answer from the span's passage doubts {doubted} of {n} questions"
                     + (" (listed)" if doubted else ""))
    if model.get("n_verbatim"):
        parts.append(f"{model['n_verbatim']} reference answers are their spans' own words (no yes/no verdict asked)")
    return "; ".join(parts)


def _person(p: dict) -> str:
    """What people read: the counts of a reviewed copy (older findings: how many rows, none read)."""
    if not p.get("n_read"):
        return f"read by a person: 0 of {p['n_rows']} rows" + (f" ({p['dropped']} dropped)" if p.get("dropped") else "")
    dropped = f"; {p['dropped']} dropped, not in this set" if p.get("dropped") else ""
    return (f"read by a person: {p['n_read']} of {p['n_rows']} rows ({p['kept']} kept, {p['fixed']} fixed{dropped}) "
            f"by {', '.join(p['by'])}{_reading(p.get('reading'))}; unread: {p['n_rows'] - p['n_read']}, "
            f"{p['doubted_unread']} of them doubted by the rules")


def _reading(r: dict | None) -> str:
    """How long the reading took, as the queue's page timed it (a copy from before, or verdicts
    given by a script: nothing said)."""
    if not r or not r.get("n_timed"):
        return ""
    return (f", in {duration(r['seconds'])} of reading (median {duration(r['median_seconds'])} a row, "
            f"{r['n_timed']} verdicts timed)")


def folder_chart(folders: list[dict]) -> dict:
    """Horizontal bars of questions per folder (inline SVG), untouched documents noted."""
    top = max([f["n_questions"] for f in folders] + [1])
    width, left = 300, 120
    bars = [{"y": 26 + 22 * i, "label": f["folder"], "n": f["n_questions"], "w": width * f["n_questions"] / top,
             "note": f"{f['n_documents']} docs" + (f", {f['n_untouched']} untouched" if f["n_untouched"] else ""),
             "colour": COLOURS["bad" if f["n_untouched"] == f["n_documents"] else "neutral"]}
            for i, f in enumerate(folders)]
    return {"width": left + width + 150, "left": left, "height": 34 + 22 * len(bars), "bars": bars}


def audit_view(findings: dict) -> dict:
    """What the page shows beyond the dict's own fields: sections, the joined category table,
    the chart."""
    power = findings.get("power") or {}
    mde = {c["name"]: c for c in power.get("categories", [])}
    sections = []
    for anchor, where, title, why in SECTIONS:
        rows = _rows(findings, where)
        sections.append({"anchor": anchor, "title": title, "why": why, "n": len(rows), "rows": rows[:PAGE_ROWS],
                         "fixes": [_fix(r) for r in rows[:PAGE_ROWS]] if anchor == "spans" else None})
    return {
        "name": posixpath.basename(findings["source"].replace("\\", "/")) or findings["source"],
        "sections": sections,
        "categories": [{**c, "power": mde.get(c["name"])} for c in findings["coverage"]["categories"]],
        "chart": folder_chart(findings["coverage"]["folders"]),
        "not_run": _not_run(findings), "checked": checked_lines(findings["summary"].get("checked_by")),
        "page_rows": PAGE_ROWS,
    }


def render_audit(findings: dict) -> str:
    """The audit page: one self-contained HTML file (styles and chart inline, every text escaped)."""
    return environment().get_template("audit.html").render(f=findings, v=audit_view(findings))
