"""Is this eval set any good? Findings on any eval set, generated or hand-written, before runs.

A run's numbers are only as good as its questions: a duplicated question counts twice, a golden
span at wrong offsets scores a correct retrieval as a miss, a keyword in the question hands BM25 a
free hit, one in most documents is found by any retrieval, one in no document never, and eight
questions in a category cannot tell two pipelines apart. :func:`audit_eval_set` finds these and
returns a JSON-serialisable dict (each finding: its rows as ``{id, line, question, detail, ...}``
and counts; ``summary.problems`` in words, worst first) that :mod:`lab.report.audit` prints and
renders. Models come in as callables (``embed``, ``support``), so each check is testable alone.
"""

from __future__ import annotations

import math
import posixpath
import re
import statistics
import textwrap
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np

from lab.evalsets.evalset import EvalRow, Reference, same_text
from lab.evalsets.grounding import asked
from lab.evalsets.excerpts import (NEAR_DUPLICATE, contradicts_category, heading_span, locate, names_a_file,
                                   figure_not_in_spans, near_duplicate_pairs, one_document_answer, short_span,
                                   size_problem)
from lab.evalsets.twins import find_twins
from lab.evidence.states import words_not_in_spans
from lab.evalsets.census import all_candidates
from lab.evalsets.extract import blocks, example_page, in_example
from lab.evalsets.asks import answer_type, restates
from lab.metrics.addressed import addressed_documents
from lab.metrics.aggregate import SMALL_CATEGORY
from lab.evidence.text import fold, fold_at
from lab.stats.power import RHO  # the assumed correlation of two pipelines' per-question values

ALPHA, POWER = 0.05, 0.80


def _item(row: EvalRow, detail: str, **extra: object) -> dict:
    return {"id": row.id, "line": row._line, "question": row.question, "detail": detail, **extra}


def _listed(**lists: list) -> dict:
    """Each list of rows with its count: ``{name: rows, "n_" + name: len(rows)}``."""
    return {k: v for name, rows in lists.items() for k, v in ((name, rows), (f"n_{name}", len(rows)))}


def _question_key(question: str) -> str:
    """Whitespace and case folded: the spelling exact duplicates are compared in."""
    return " ".join(fold(question, "case").split())


def _duplicates(rows: Sequence[EvalRow], embed: Callable[[list[str]], np.ndarray] | None, threshold: float) -> dict:
    """Exact duplicates: every row after the first with the same folded question. Near
    duplicates: pairs at cosine >= ``threshold`` that are not exact ones (those are listed once)."""
    first: dict[str, EvalRow] = {}
    exact = [_item(row, f"same question as {f.id} (line {f._line})", other=f.id) for row in rows
             if (f := first.setdefault(_question_key(row.question), row)) is not row]
    near = []
    if embed is not None:
        vectors = np.asarray(embed([r.question for r in rows]))
        if vectors.ndim != 2 or len(vectors) != len(rows):
            raise ValueError(f"embed returned an array of shape {vectors.shape} for {len(rows)} questions")
        for i, j, sim in near_duplicate_pairs(vectors, threshold):
            a, b = rows[i], rows[j]
            if _question_key(a.question) != _question_key(b.question):
                near.append(_item(b, f"cosine {sim:.3f} to {a.id} (line {a._line}): {a.question}",
                                  other=a.id, similarity=round(sim, 4)))
    return {**_listed(exact=exact, near=near), "threshold": threshold, "near_checked": embed is not None}


def folder(source: str) -> str:
    """The top-level folder of a document's path (``.`` for one at the knowledge base's root)."""
    return source.split("/", 1)[0] if "/" in source else "."


def _touched(row: EvalRow, docs: dict[str, str]) -> set[str]:
    """The documents a row is about: those its spans name; without spans, those holding all of
    its keywords (folded), which is where keyword retrieval can score it."""
    if row.references:
        return {r.source for r in row.references if r.source in docs}
    kws = [fold(k, "case") for k in row.keywords or []]
    return {s for s, text in docs.items() if all(k in text for k in kws)} if kws else set()


def _coverage(rows: Sequence[EvalRow], docs: dict[str, str], documents: dict[str, str],
              literal: dict[str, list]) -> dict:
    """Questions per category, per document and per folder, and the documents none is about
    (``docs``: the texts case-folded; ``without_candidates``: those of the documents none is about
    that hold no sentence ``lab generate`` asks from, such as an API page of directives, code or
    tables alone: no generated question can be about them; ``untouched_examples``: the example and
    tutorial pages among them, which ``lab generate`` asks from last)."""
    per_doc: dict[str, list[str]] = {s: [] for s in sorted(docs)}
    found = all_candidates(documents, {s: blocks(text, s, literal.get(s, ())) for s, text in documents.items()})
    none = []
    for row in rows:
        touched = _touched(row, docs)
        for s in sorted(touched):
            per_doc[s].append(row.id)
        if not touched:
            none.append(_item(row, "its spans name no document of the knowledge base" if row.references else
                              "no one document holds all its keywords" if row.keywords else "no keywords, no spans"))
    in_folder = {f: [s for s in per_doc if folder(s) == f] for f in sorted({folder(s) for s in per_doc})}
    return {
        "categories": [{"name": c, "n": n, "small": n < SMALL_CATEGORY}
                       for c, n in sorted(Counter(r.category for r in rows).items())],
        "small_category": SMALL_CATEGORY,
        "documents": [{"source": s, "folder": folder(s), "n": len(ids)} for s, ids in per_doc.items()],
        "untouched": [s for s, ids in per_doc.items() if not ids],
        "without_candidates": [s for s, ids in per_doc.items() if not ids and not found[s]],
        "untouched_examples": [s for s, ids in per_doc.items() if not ids and example_page(s)],  # asked last
        "folders": [{"folder": f, "n_documents": len(ss), "n_untouched": sum(not per_doc[s] for s in ss),
                     "n_questions": len({i for s in ss for i in per_doc[s]})} for f, ss in in_folder.items()],
        **_listed(rows_touching_none=none),
        "rule": "a row touches the documents its spans name; without spans, each document holding all of its "
                "keywords (case-folded)",
    }


def _find(content: str, text: str, near: int) -> tuple[int, int] | None:
    """Where a span's content is in a document: the exact occurrence nearest the offsets it
    gave, else :func:`locate`'s tolerant match (whitespace, quotes, case)."""
    if hits := [m.start() for m in re.finditer(re.escape(content), text)] if content else []:
        best = min(hits, key=lambda h: abs(h - near))
        return best, best + len(content)
    return locate(content, text)


def _span_problem(ref: Reference, documents: dict[str, str]) -> tuple[str, str, dict | None] | None:
    """(kind, detail, fix) of a span that does not match its document; None for one that does.
    The fix is where the content is: in the span's document, or for a document the knowledge base
    does not have, in the first one holding the content exactly."""
    text = documents.get(ref.source or "")
    if text is None:
        kind, detail = "missing_document", f"{ref.source!r} names no document of the knowledge base"
        holders = [s for s, t in documents.items() if ref.content in t]
    elif ref.end_index > len(text):
        kind, detail = "out_of_range", f"end_index {ref.end_index} is past the end of {ref.source} ({len(text)} chars)"
        holders = [ref.source]
    elif not same_text(text[ref.start_index:ref.end_index], ref.content):
        kind, detail = "mismatch", f"the content does not match {ref.source} chars {ref.start_index}-{ref.end_index}"
        holders = [ref.source]
    else:
        return None
    at = _find(ref.content, documents[holders[0]], ref.start_index) if holders else None
    if at is None:
        return kind, f"{detail}; the content is {'in no document' if text is None else 'nowhere in it'}", None
    fix = {"source": holders[0], "start_index": at[0], "end_index": at[1]}
    if not same_text(found := documents[holders[0]][at[0]:at[1]], ref.content):  # matched folded: the doc's text
        fix["content"] = found
    where = "" if text is not None else f"in {holders[0]} "
    return kind, f"{detail}; the content is {where}at {at[0]}-{at[1]}", fix


def _spans(rows: Sequence[EvalRow], documents: dict[str, str]) -> dict:
    """Golden spans checked against their documents as ``check_references`` does at run time
    (which stops at the first), but all of them, each with its fix where the content is found; and
    the spans with twins (their text elsewhere, :mod:`lab.evalsets.twins`), with how many places."""
    stems = {posixpath.splitext(s)[0] for s in documents}
    errors, not_checked, twins, n = [], [], [], 0
    # each document's words fold, made once for every span's twins (as twins.span_twins does)
    folded = {s: fold_at(text, "words") for s, text in documents.items()} if any(r.references for r in rows) else {}
    for row in rows:
        for i, ref in enumerate(row.references or []):
            n += 1
            if ref.source not in documents and ref.source and posixpath.splitext(ref.source)[0] in stems:
                not_checked.append(_item(row, f"references.{i}: {ref.source} is in the knowledge base in another "
                                              "format; offsets into the original are not checked", reference=i))
            elif (problem := _span_problem(ref, documents)) is not None:
                kind, detail, fix = problem
                errors.append(_item(row, f"references.{i}: {detail}", reference=i, kind=kind, source=ref.source,
                                    fix=fix))
            elif (found := find_twins((ref.source, ref.start_index, ref.end_index), documents, folded=folded)).n:
                docs = sorted({s for s, _, _ in found.places})
                shown = ", ".join(docs[:3]) + (f" and {len(docs) - 3} more" if len(docs) > 3 else "")
                twins.append(_item(row, f"references.{i}: the same text in {found.n} other place"
                                        f"{'s' if found.n > 1 else ''} ({shown})", reference=i, source=ref.source,
                                   n_twins=found.n, twin_sources=docs))
    return {"n_spans": n, **_listed(errors=errors, not_checked=not_checked, twins=twins),
            "n_fixable": sum(e["fix"] is not None for e in errors),
            "n_twin_places": sum(t["n_twins"] for t in twins)}


def _keywords(rows: Sequence[EvalRow], docs: dict[str, str], share: float) -> dict:
    """Keywords that retrieval finds for free (in the question, in most documents) or never (in
    no document), and the rows without keywords (the keyword metrics are n/a for them)."""
    held = {k: sum(k in text for text in docs.values()) for k in {fold(kw, "case") for r in rows for kw in r.keywords or []}}
    found: dict[str, list[dict]] = {"in_question": [], "common": [], "nowhere": [], "without": []}
    for row in rows:
        if not row.keywords:
            k = len(row.references or [])
            found["without"].append(_item(row, f"no keywords; {k} golden span(s)" if k else
                                          "no keywords and no golden spans (labelled chunk ids only)", has_spans=k > 0))
            continue
        n = {kw: held[fold(kw, "case")] for kw in row.keywords}
        if asked := [kw for kw in n if fold(kw, "case") in fold(row.question, "case")]:
            found["in_question"].append(_item(row, "in the question: " + ", ".join(asked), keywords=asked))
        if often := [kw for kw in n if n[kw] > share * len(docs)]:
            found["common"].append(_item(row, ", ".join(f"{kw} in {n[kw]} of {len(docs)} documents" for kw in often),
                                         keywords=often))
        if never := [kw for kw in n if not n[kw]]:
            found["nowhere"].append(_item(row, "in no document: " + ", ".join(never), keywords=never))
    common = {kw: held[fold(kw, "case")] for r in found["common"] for kw in r["keywords"]}
    return {**_listed(**found), "common_share": share, "common_terms": dict(sorted(common.items())),
            "n_without_spans": sum(not w["has_spans"] for w in found["without"])}


def _support(rows: Sequence[EvalRow], support: Callable[[str, str, list[str]], Any] | None,
             own_words: bool = False) -> dict:
    """The reference answer of every row with spans, checked against the spans' contents (a row
    without spans has no evidence: skipped). ``support`` returns a :class:`grounding.Verdict`
    (both verdicts; a row failing either is listed with its faults) or a bool; a failed check
    (None) is counted apart, never a yes. ``own_words`` (the answer check reads every row): a
    reference that is its span's own words is not asked (:func:`grounding.asked`), only counted."""
    if support is None:
        return {"checked": False}
    unsupported, failed, n, two, same, bare = [], [], 0, False, 0, 0
    for row in rows:
        evidence = [r.content for r in row.references or []]
        if not evidence or not row.reference_answer.strip():
            bare += 1
            continue
        if not asked(row.reference_answer, evidence, own_words):  # its span's own words: the answer check reads it
            same += 1
            continue
        n += 1
        verdict = support(row.question, row.reference_answer, evidence)
        two = two or hasattr(verdict, "ok")
        if verdict is None:
            failed.append(_item(row, "the check failed: no verdict"))
        elif not getattr(verdict, "ok", verdict):
            answer = textwrap.shorten(row.reference_answer, 80, placeholder="...")
            if isinstance(verdict, bool):  # a bare no names no fault
                unsupported.append(_item(row, f"not supported by its {len(evidence)} span(s): {answer}"))
            else:  # a grounding.Verdict names its faults
                unsupported.append(_item(row, f"{verdict.why} ({len(evidence)} span(s)): {answer}",
                                         faults=[k for k in ("answers", "entailed") if not getattr(verdict, k)]))
    return {"checked": True, "two_verdicts": two, "n_checked": n, "n_supported": n - len(unsupported) - len(failed),
            **_listed(unsupported=unsupported, failed=failed), "n_skipped": bare, "n_verbatim": same}


def _answer_check(rows: Sequence[EvalRow], check: Callable[[EvalRow], str | None] | None) -> dict:
    """The answer check (:mod:`lab.evalsets.answercheck`) of every row with a span: ``check``
    returns why the model's answer from the span's passage fails the question, or None."""
    if check is None:
        return {"checked": False}
    spanned = [r for r in rows if r.references]
    return {"checked": True, "n_checked": len(spanned),
            **_listed(doubted=[_item(r, why) for r in spanned if (why := check(r)) is not None])}


def detectable_difference(values: Sequence[float], rho: float = RHO, alpha: float = ALPHA,
                          power: float = POWER) -> dict:
    """The smallest paired difference in mean MRR that ``len(values)`` questions detect, by the
    normal approximation ``(z_{1-alpha/2} + z_{power}) * sd_d / sqrt(n)``; ``sd_d``, the sd of
    per-question differences of two pipelines, is ``sd(values) * sqrt(2 * (1 - rho))`` (sd with
    n - 1). Under two values there is no sd: ``mde`` is None."""
    # deferred: only an audit given a run's samples needs scipy
    from scipy.stats import norm

    n = len(values)
    if n < 2:
        return {"n": n, "sd": None, "sd_d": None, "mde": None}
    sd = statistics.stdev(values)
    sd_d = sd * math.sqrt(2 * (1 - rho))
    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    return {"n": n, "sd": sd, "sd_d": sd_d, "mde": z * sd_d / math.sqrt(n)}


def _power(samples: Sequence[dict] | None, ids: set[str | None]) -> dict | None:
    """The detectable MRR difference overall and per category, from a run's per-question MRR
    (questions where it is n/a are counted apart)."""
    if samples is None:
        return None
    scored = [(s["category"], m) for s in samples
              if isinstance(m := (s.get("metrics") or {}).get("mrr"), (int, float)) and not isinstance(m, bool)]
    return {
        "assumption": f"sd of paired differences = sd(MRR) * sqrt(2 * (1 - rho)) with rho = {RHO} (two pipelines' "
                      f"per-question MRR assumed correlated at {RHO}); normal approximation, two-sided alpha "
                      f"{ALPHA}, power {POWER:.0%}",
        "metric": "mrr", "rho": RHO, "alpha": ALPHA, "power": POWER,
        "overall": detectable_difference([m for _, m in scored]),
        "categories": [{"name": c, **detectable_difference([m for cat, m in scored if cat == c])}
                       for c in sorted({c for c, _ in scored})],
        "n_unscored": len(samples) - len(scored), "n_not_in_set": sum(s.get("id") not in ids for s in samples),
    }


def _doubt(row: EvalRow, documents: dict[str, str], literal: dict[str, list]) -> str | None:
    """Why the generator would have rejected ``row`` today (the rule checks of
    :mod:`lab.evalsets.generate` and :mod:`lab.evalsets.questions`): a span in a code block, a
    console transcript or a table (the example's output, not a fact of the documents), a question
    of a kind its span does not hold ("how many" without a number), a question naming a file or
    path, a span under 6 words, an answer its category contradicts (a two-document answer using one
    span among them), a figure no span holds, an answer with under half of its own words in its
    spans."""
    refs = row.references or []
    spans = [r.content for r in refs if r.content]
    for ref in refs:
        text = documents.get(ref.source)
        if text is not None and (kind := in_example(text, ref.source, ref.start_index, ref.end_index,
                                                    literal.get(ref.source, ()))) is not None:
            return f"its span lies in a {kind} in {ref.source}: an example's output, not a fact of the documents"
    if spans and (why := answer_type(row.question, " ".join(spans)) or restates(row.question, " ".join(spans))):
        return why
    if (name := names_a_file(row.question, [r.source for r in refs])) is not None:
        return f"the question names a file or path: {name}"
    if (why := short_span(spans, row.reference_answer)) is not None:
        return why
    if (why := heading_span(spans)) is not None:
        return why
    return contradicts_category(row.category, row.reference_answer) or \
        one_document_answer(row.category, spans, row.reference_answer) or \
        (figure_not_in_spans(spans, row.reference_answer) or words_not_in_spans(spans, row.reference_answer,
                                                                                 row.question) if spans else None)


def _problems(f: dict) -> list[str]:
    """The findings in words, worst first: what makes scores wrong before what makes them weak."""
    s, d, k, c, sup = f["spans"], f["duplicates"], f["keywords"], f["coverage"], f["support"]
    small = [x["name"] for x in c["categories"] if x["small"]]
    said = [  # (count, what): only counts above 0 are problems
        (len(f.get("addressed") or []), "documents that speak to an AI assistant or evaluator (a planted instruction "
                                        "reaches the answer and the judge): {}"),
        (s["n_errors"], f"golden spans that do not match the knowledge base: {{}} ({s['n_fixable']} with a fix)"),
        (d["n_exact"], "exact duplicate questions: {}"),
        (k["n_nowhere"], "rows with keywords in no document (never found): {}"),
        (sup.get("n_unsupported", 0), "reference answers their spans do not support: {}"),
        (f.get("answer_check", {}).get("n_doubted", 0), "questions the model's answer check doubts (no answer in "
                                                        "the span's passage, a neighbour's words, or circular): {}"),
        (d["n_near"], f"near-duplicate pairs (cosine >= {d['threshold']}): {{}}"),
        (k["n_common"], f"rows with keywords in over {k['common_share']:.0%} of documents (any retrieval finds them): "
                        "{}"),
        (k["n_in_question"], "rows with keywords in the question (they favour BM25): {}"),
        (len(c["untouched"]), f"documents touched by no question: {{}} of {len(c['documents'])}"
         + (f" ({n} of them hold{'s' * (n == 1)} no sentence lab generate asks from)"
            if (n := len(c.get("without_candidates", []))) else "")),
        (len(small), f"categories under {c['small_category']} questions: {{}} ({', '.join(small)})"),
        (sup.get("n_failed", 0), "support checks that failed (no verdict): {}"),
        (f["size"]["n_rows"], "trivial or over-long rows (the generator's size filter): {}"),
        (f.get("checks", {}).get("n_rows", 0), "rows the generator's rules doubt (a span in an example, a question "
                                               "its span cannot answer, a file named, a short span, a category "
                                               "the answer contradicts, an answer its spans do not hold): {}"),
        (k["n_without"], "rows without keywords (keyword metrics n/a): {}"),
    ]
    return [what.replace("{}", str(n), 1) for n, what in said if n]  # not format: names may hold braces


def audit_eval_set(rows: Sequence[EvalRow], documents: dict[str, str], *, source: str,
                   embed: Callable[[list[str]], np.ndarray] | None = None,
                   support: Callable[[str, str, list[str]], Any] | None = None,
                   run_samples: Sequence[dict] | None = None, reviewed: dict | None = None,
                   near_threshold: float = NEAR_DUPLICATE, common_share: float = 0.5,
                   literal: dict[str, list] | None = None,
                   answer_check: Callable[[EvalRow], str | None] | None = None) -> dict:
    """The findings on ``rows`` (from ``load_eval_set``) against ``documents`` ({source path as
    the loader spells it: text}). ``embed`` turns on near duplicates, ``support(question,
    answer, evidence)`` the check of reference answers against their spans, ``run_samples`` (a
    run's samples.jsonl rows) the detectable MRR difference per category, ``reviewed`` (the sidecar
    of a reviewed copy, :mod:`lab.serve.reviews`) the rows a person dropped, ``literal`` the HTML
    pages' ``<pre>`` ranges (:attr:`lab.rag.loaders.Corpus.literal`), ``answer_check(row)`` the
    model's answer from each span's passage read by rule (why it fails, or None). ``source`` names the
    eval set in the reports. ``summary.ok`` is false when a score would be wrong, not just weak:
    a span error, an exact duplicate, a keyword in no document."""
    docs = {s: fold(t, "case") for s, t in documents.items()}
    f = {
        "source": source,
        "duplicates": _duplicates(rows, embed, near_threshold),
        "coverage": _coverage(rows, docs, documents, literal or {}),
        "spans": _spans(rows, documents),
        "keywords": _keywords(rows, docs, common_share),
        "support": _support(rows, support, answer_check is not None),
        "answer_check": _answer_check(rows, answer_check),
        "size": _listed(rows=[_item(r, why) for r in rows if (why := size_problem(r.question, r.reference_answer))]),
        "checks": _listed(rows=[_item(r, why + (f" (read by {r.review.by}: {r.review.verdict})" if r.review else ""))
                                for r in rows if (why := _doubt(r, documents, literal or {}))]),
        "power": _power(run_samples, {r.id for r in rows}),
        "addressed": addressed_documents(documents),
    }
    f["summary"] = {
        "n_rows": len(rows), "n_categories": len(f["coverage"]["categories"]), "n_documents": len(documents),
        "n_spans": f["spans"]["n_spans"], "problems": _problems(f),
        "ok": not (f["spans"]["n_errors"] or f["duplicates"]["n_exact"] or f["keywords"]["n_nowhere"]),
        "checked_by": _checked_by(f, rows, reviewed),
    }
    return f


def _checked_by(f: dict, rows: Sequence[EvalRow], reviewed: dict | None) -> dict:
    """What was checked, and by what: rules (always), the model (``--check``), a person (the rows
    of a reviewed copy that carry a ``review``; the rows dropped, from its sidecar). What none of
    them saw is said with it: rules and a small model cannot see a reference answer that is
    wrong, or a question its span does not answer."""
    sup, ac = f["support"], f.get("answer_check", {})
    read = [r for r in rows if r.review]
    doubted = {x["id"] for x in f["checks"]["rows"]}
    return {
        "rules": ["span offsets against the documents", "exact and near duplicates", "keywords in the documents",
                  "coverage of documents and categories", "the generator's rules (examples, answer types, files, "
                  "short spans, categories, figures and words held by the spans)"],
        "rule_doubts": f["checks"]["n_rows"],
        "model": {"n_checked": sup["n_checked"], "n_supported": sup["n_supported"], "n_verbatim": sup["n_verbatim"],
                  **({"answer_checked": ac["n_checked"], "answer_doubted": ac["n_doubted"]}
                     if ac.get("checked") else {})} if sup.get("checked") else None,
        "person": {"n_read": len(read), "n_rows": len(rows),
                   "kept": sum(r.review.verdict == "keep" for r in read),
                   "fixed": sum(r.review.verdict == "fix" for r in read),
                   "dropped": (reviewed or {}).get("dropped"), "by": sorted({r.review.by for r in read}),
                   "reading": (reviewed or {}).get("reading"),
                   "doubted_unread": sum(1 for r in rows if r.id in doubted and not r.review)},
        "unseen": "a reference answer that is wrong, or a question its span does not answer, passes every rule; "
                  "a small model's yes/no does not tell them apart, and its answer check (lab audit --check) "
                  "misses some (docs/own-documents.md#audit-answer-check): read the rows doubted, then a sample",
    }
