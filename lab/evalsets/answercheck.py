"""The answer check of ``lab generate --answer-check`` (extractive mode): the model is given a
question and its sentence and asked to copy the words of the sentence that answer it, or NONE;
its reply, not a yes/no, is read by rule. A question passes when the reply is not NONE, at least
:data:`INSIDE` of the reply's content words are the sentence's, and the reply holds a content word
of the sentence that the question lacks (a circular question's answer adds nothing).

The local 1.5B model's yes/no did not separate good rows from bad (P(yes) 0.95-0.99 on good rows,
0.77-0.99 on bad); its copied answer, read this way, did: on two documentation sets held out from
the rule (pexpect's and factory_boy's, 90 rows read), the bad share among the rows passing fell
from 28% to 15%, keeping 36 of 43 good rows (docs/own-documents.md#held-out-5). The words are
read by the lab's one text rule, :func:`lab.evidence.text.content_words` (replayed on those two
sets it gives 17%). Tested on two more sets generated with it (structlog's, coverage.py's), it
left 24% and 29% bad, not the 20% a default needed (36% and 38% without it): opt-in
(docs/own-documents.md#held-out-6).

``--answer-check`` now reads the passage (:data:`PASSAGE_PROMPT`): the sentence among the prose
sentences within two of it, the same rules, and the reply must be its own sentence's words more
than any neighbour's. On Bottle's documentation, held out and registered before it was generated,
the rows it passed were 17% bad (4 of 24) against 31% for the sentence's check (11 of 36) and of
all 45 rows; it dropped 10 of 14 bad rows and 6 of 21 good ones, too many good ones to be the
default; a set generated with it there was 16% bad (7 of 45), at about 2.5 times the minutes a row.
Sets generated with it on five more documentation sets, each registered before it was generated:
13% (Peewee), 11% (cattrs, 18 rows), 24% (Tornado), 10% (Kombu, 10 rows) and 33% (Celery) bad, 42
of 208 rows with Bottle's: under 20% on four of six; release pages let bad rows through
(docs/own-documents.md#passage-check).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from lab.evalsets import grounding
from lab.evalsets.extract import blocks, document_sentences
from lab.evalsets.standalone import plain
from lab.evidence.text import content_words as words
from lab.models.llm import LabLLM, LLMCallError
from lab.progress import Ticker, duration
from lab.prompts import Prompt, load_prompt

log = logging.getLogger(__name__)

PROMPT = "answer-check-v1"
#: The check over the passage: the sentence among its neighbours (docs/own-documents.md#passage-check).
PASSAGE_PROMPT = "answer-check-passage-v1"
INSIDE = 0.6
#: Seconds a check call takes on 2 cores, for the plan line (Pint's documentation on a slow day: a
#: median 3.9 s an answer check, 4.4 s a pair of yes/no verdicts).
CALL_SECONDS = 4.0
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 300}},
          "required": ["answer"], "additionalProperties": False}


def read(question: str, sentence: str, answer: str, neighbours: Sequence[str] = ()) -> str | None:
    """Why the reply ``answer`` fails the question (None: it passes); with ``neighbours`` (the
    passage's other sentences), also when one of them holds more of the answer's words."""
    said = words(answer)
    if answer.strip().upper().startswith("NONE") or not said:
        return f"the model finds no answer to it in its {'passage' if neighbours else 'sentence'}"
    mine = len(said & words(sentence))
    if mine / len(said) < INSIDE:
        return f"the model's answer is not the sentence's words ({mine / len(said):.0%} of them are)"
    if any(len(said & words(other)) > mine for other in neighbours):
        return f"the model's answer ({answer[:60]!r}) is a neighbouring sentence's words more than its own"
    if not (said & words(sentence)) - words(question):
        return f"the model's answer ({answer[:60]!r}) adds nothing to the question: circular"
    return None


def check(llm: LabLLM, prompt: Prompt, question: str, sentence: str, seed: int,
          before: Sequence[str] = (), after: Sequence[str] = ()) -> str | None:
    """One call: why the model's answer to ``question`` from ``sentence`` fails (None: it passes).
    With ``PASSAGE_PROMPT``, the model reads the sentence between ``before`` and ``after``. The
    prompt's steps, before the question, are its head: evaluated once (``LabLLM.chat``'s ``head``),
    about a fifth of a check call's seconds (docs/own-documents.md#check-head)."""
    passage = "passage" in prompt.fields
    try:
        out = llm.chat(_messages(prompt, question, sentence, before, after), prompt.version, schema=SCHEMA,
                       temperature=0.0, seed=seed, max_tokens=80, head=prompt.head("question"))
        answer = str(json.loads(out.text)["answer"])
    except (LLMCallError, ValueError, KeyError, TypeError) as exc:
        return f"the answer check's reply is not the JSON asked for ({type(exc).__name__})"
    return read(question, sentence, answer, [*before, *after] if passage else ())


def _messages(prompt: Prompt, question: str, sentence: str, before: Sequence[str], after: Sequence[str]) -> list[dict]:
    if "passage" in prompt.fields:
        return prompt.messages(question=question, passage=" ".join([*before, sentence, *after]))
    return prompt.messages(question=question, sentence=sentence)


def cached(llm: LabLLM, prompt: Prompt, question: str, sentence: str, seed: int, before: Sequence[str] = (),
           after: Sequence[str] = ()) -> bool:
    """Whether :func:`check`'s call is in ``llm``'s cache (it then costs no model time)."""
    return llm.cached(_messages(prompt, question, sentence, before, after), prompt.version, SCHEMA, 0.0, seed, 80)


def neighbours(text: str, sentences: Sequence[tuple[int, int]], start: int, end: int,
               window: int = 2) -> tuple[list[str], list[str]]:
    """The prose sentences of a document (``sentences``: :func:`lab.evalsets.extract.document_sentences`)
    within ``window`` before the span ``[start, end)`` and after it, markup taken off: a generated
    row's passage as ``lab generate`` read it (its sentence is the span), and a written row's span
    among the sentences around it (``lab audit --check``)."""
    return ([plain(text[a:b]) for a, b in sentences if b <= start][-window:],
            [plain(text[a:b]) for a, b in sentences if a >= end][:window])


def seed_of(eval_set: Path) -> int:
    """The seed ``lab generate`` asked the model with for ``eval_set`` (its sidecar ``<stem>.gen.json``:
    an ``--answer-check`` run's check calls are cached under it), 0 for a set written otherwise."""
    sidecar = eval_set.with_suffix(".gen.json")
    try:
        seed = json.loads(sidecar.read_text(encoding="utf-8")).get("seed", 0) if sidecar.is_file() else 0
    except (OSError, ValueError, AttributeError):  # an unreadable sidecar: the set's rows are what is audited
        return 0
    return seed if isinstance(seed, int) else 0


def model_checks(llm: LabLLM, documents: dict[str, str], literal: dict[str, list] | None = None, seed: int = 0,
                 rows: Sequence = (), bar: bool = False, cached_only: bool = False):
    """``lab audit --check``'s two model checks of a row: ``support(question, answer, evidence)``
    (the yes/no verdicts, :mod:`lab.evalsets.grounding`) and ``answer_check(row)`` (this module's
    check over the span's passage: the span among the prose sentences within two of it, as
    ``lab generate --answer-check`` reads a candidate, so a generated row's check is its cached
    call; a row of several spans is read as their text, without neighbours). ``rows``: those the
    audit will check: before any call, a line says how many calls they take, how many are cached
    and about how long the rest take (:data:`CALL_SECONDS`); then the computed calls' progress (a
    bar on a terminal, else a line now and then, with ETA). ``cached_only``: an answer check whose
    call is not cached passes, and no model is run (the review queue's notes, from an earlier
    ``lab audit --check`` or ``--answer-check``)."""
    verdicts, asked = grounding.load(), load_prompt(PASSAGE_PROMPT)
    sentences: dict[str, list[tuple[int, int]]] = {}

    def passage(row) -> tuple[str, list[str], list[str]]:
        """The row's span as the check reads it, and the sentences before and after it."""
        refs = row.references
        before, after = [], []
        if len(refs) == 1 and (text := documents.get(source := refs[0].source or "")) is not None:
            if source not in sentences:  # each document parsed once, however many rows it holds
                sentences[source] = document_sentences(text, blocks(text, source, (literal or {}).get(source, ())))
            before, after = neighbours(text, sentences[source], refs[0].start_index, refs[0].end_index)
        return " ".join(plain(r.content) for r in refs), before, after

    def yes_no(row) -> bool:  # the verdicts lab.evalsets.audit._support will ask
        return grounding.asked(row.reference_answer, [r.content for r in row.references])

    def in_cache(row) -> int:
        """How many of the row's calls are cached."""
        said, before, after = passage(row)
        return (yes_no(row) and grounding.cached(llm, verdicts, row.question, row.reference_answer,
                                                 [r.content for r in row.references])) \
            + cached(llm, asked, row.question, said, seed, before, after)

    checked = [r for r in rows if r.references]
    calls = len(checked) + sum(map(yes_no, checked))
    have = sum(map(in_cache, checked))
    total = calls - have
    if checked:
        rest = f"{have} cached; {total} to compute, about {duration(total * CALL_SECONDS)} ({CALL_SECONDS:g} s a " \
               "call, 2-core prior)" if total else "all cached (no model time)"
        log.info("audit --check: %d rows with a span: the answer from each one's passage, and the yes/no verdicts of "
                 "the %d whose reference answer is not its span's own words: %d calls, %s", len(checked),
                 calls - len(checked), calls, rest)
    ticker = Ticker("audit --check", total, bar, unit="calls") if total else None

    def done(before: int) -> None:  # a cached call takes no time: the progress counts the computed ones
        if ticker is not None and llm.usage.calls + llm.usage.failed > before:
            ticker.update()
            if ticker.done >= ticker.total:
                ticker.close()

    def support(question: str, answer: str, evidence: list[str]) -> grounding.Verdict | None:
        n = llm.usage.calls + llm.usage.failed
        verdict = grounding.verdict(llm, verdicts, question, answer, evidence)
        done(n)
        return verdict

    def answer_check(row) -> str | None:
        said, before, after = passage(row)
        if cached_only and not cached(llm, asked, row.question, said, seed, before, after):
            return None
        n = llm.usage.calls + llm.usage.failed
        why = check(llm, asked, row.question, said, seed, before, after)
        done(n)
        return why

    return support, answer_check
