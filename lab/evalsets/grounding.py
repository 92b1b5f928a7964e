"""Is a reference answer grounded in its evidence, and does it answer its question? Two yes/no
LLM verdicts per item, asked apart in one call.

The generator drops candidates that fail either; the audit reports rows of any eval set that
fail either. The verdicts are decoded under a grammar (``{"answers": "yes" | "no", "entailed":
"yes" | "no"}``), at temperature 0, cached like every other call (prompt
``lab/prompts/supported-yesno-v2.txt``). ``supported-yesno-v1`` asked both in one verdict
("is every fact stated, and does the answer answer the question?"); a model answering one
question about two conditions tends to judge the easier one, so v2 asks each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from lab.evalsets.standalone import plain
from lab.models.llm import LabLLM, LLMCallError
from lab.prompts import Prompt, load_prompt

PROMPT = "supported-yesno-v2"
#: Verdict keys in the order the model writes them (the grammar keeps it).
VERDICTS = ("answers", "entailed")
SCHEMA = {"type": "object", "properties": {k: {"type": "string", "enum": ["yes", "no"]} for k in VERDICTS},
          "required": list(VERDICTS), "additionalProperties": False}
#: The one-verdict check (``supported-yesno-v1``), kept so a version named in an old sidecar can be rerun.
SCHEMA_V1 = {"type": "object", "properties": {"supported": {"type": "string", "enum": ["yes", "no"]}},
             "required": ["supported"], "additionalProperties": False}
#: Evidence beyond this many characters is cut (a span can be a whole document).
EVIDENCE_CHARS = 2400


@dataclass(frozen=True)
class Verdict:
    """The two verdicts on one reference answer; ``ok`` when both are yes."""

    answers: bool
    entailed: bool

    @property
    def ok(self) -> bool:
        return self.answers and self.entailed

    @property
    def reason(self) -> str | None:
        """The generator's rejection reason: ``unsupported`` (a fact the evidence does not state)
        first, then ``not_answering`` (the answer does not give what the question asks)."""
        return None if self.ok else "unsupported" if not self.entailed else "not_answering"

    @property
    def why(self) -> str:
        if self.ok:
            return "supported by its evidence and answering its question"
        faults = ([] if self.entailed else ["the evidence does not state every fact of the answer"]) + \
                 ([] if self.answers else ["the answer does not give what the question asks"])
        return "; ".join(faults)


def load(version: str = PROMPT) -> Prompt:
    return load_prompt(version, {"evidence", "question", "answer"})


def verdict(llm: LabLLM, prompt: Prompt, question: str, answer: str, evidence: Sequence[str]) -> Verdict | None:
    """Both verdicts; None when the call failed or its output did not parse (counted by the
    caller, never taken as a yes). A ``supported-yesno-v1`` prompt's one verdict stands for both."""
    one = prompt.version == "supported-yesno-v1"
    try:
        out = llm.chat(_messages(prompt, question, answer, evidence), prompt.version,
                       schema=SCHEMA_V1 if one else SCHEMA, temperature=0.0, max_tokens=12 if one else 24)
        got = json.loads(out.text)
        if one:
            yes = got["supported"] == "yes"
            return Verdict(yes, yes)
        return Verdict(got["answers"] == "yes", got["entailed"] == "yes")
    except (LLMCallError, ValueError, KeyError, TypeError):
        return None


def verbatim(answer: str, evidence: Sequence[str]) -> bool:
    """Whether ``answer`` is its one span's own words (its markup taken off, whitespace aside), as
    an extractive ``lab generate`` row's reference is: every fact of it is stated by construction,
    and whether it gives what its question asks is the answer check's to read (the yes/no verdict
    said yes to 45 of 45 such rows of Pint's and sphinx-gallery's sets, and to 15 of 15 of restic's
    with 8 bad), so ``lab audit --check`` does not ask it of them."""
    return len(evidence) == 1 and " ".join(answer.split()) == " ".join(plain(evidence[0]).split())


def asked(answer: str, evidence: Sequence[str], own_words: bool = True) -> bool:
    """Whether ``lab audit --check`` asks the yes/no verdicts of ``answer``: it has spans and words,
    and, when the answer check reads every row (``own_words``), it is not its span's own words
    (:func:`verbatim`). The audit's support finding and its count of calls both read it."""
    return bool(evidence) and bool(answer.strip()) and not (own_words and verbatim(answer, evidence))


def _messages(prompt: Prompt, question: str, answer: str, evidence: Sequence[str]) -> list[dict]:
    text = "\n---\n".join(e.strip() for e in evidence)[:EVIDENCE_CHARS]
    return prompt.messages(evidence=text, question=question.strip(), answer=answer.strip())


def cached(llm: LabLLM, prompt: Prompt, question: str, answer: str, evidence: Sequence[str]) -> bool:
    """Whether :func:`verdict`'s call is in ``llm``'s cache (it then costs no model time)."""
    one = prompt.version == "supported-yesno-v1"
    return llm.cached(_messages(prompt, question, answer, evidence), prompt.version, SCHEMA_V1 if one else SCHEMA,
                      0.0, None, 12 if one else 24)


def supported(llm: LabLLM, prompt: Prompt, question: str, answer: str, evidence: Sequence[str]) -> bool | None:
    """True when both verdicts are yes; None when there is no verdict."""
    v = verdict(llm, prompt, question, answer, evidence)
    return None if v is None else v.ok
