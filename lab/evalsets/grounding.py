"""Is a reference answer supported by its evidence? One yes/no LLM verdict per item.

The generator drops candidates whose answer its own excerpts do not support; the audit reports
rows of any eval set whose reference answer its golden spans do not support. The verdict is
decoded under a grammar (``{"supported": "yes" | "no"}``), at temperature 0, cached like every
other call (prompt ``lab/prompts/supported-yesno-v1.txt``).
"""

from __future__ import annotations

import json
from typing import Sequence

from lab.models.llm import LabLLM, LLMCallError
from lab.prompts import Prompt, load_prompt

PROMPT = "supported-yesno-v1"
SCHEMA = {"type": "object", "properties": {"supported": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["supported"], "additionalProperties": False}
#: Evidence beyond this many characters is cut (a span can be a whole document).
EVIDENCE_CHARS = 2400


def load() -> Prompt:
    return load_prompt(PROMPT, {"evidence", "question", "answer"})


def supported(llm: LabLLM, prompt: Prompt, question: str, answer: str, evidence: Sequence[str]) -> bool | None:
    """True when the model says the evidence states every fact of the answer; None when the
    call failed or its output did not parse (counted by the caller, never taken as a yes)."""
    text = "\n---\n".join(e.strip() for e in evidence)[:EVIDENCE_CHARS]
    messages = prompt.messages(evidence=text, question=question.strip(), answer=answer.strip())
    try:
        out = llm.chat(messages, prompt.version, schema=SCHEMA, temperature=0.0, max_tokens=12)
        return json.loads(out.text)["supported"] == "yes"
    except (LLMCallError, ValueError, KeyError, TypeError):
        return None
