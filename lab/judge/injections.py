"""The injection set: phrasings that try to make the judge raise a wrong answer's score.

``lab/judge/injections.jsonl`` holds one phrasing a line (``id``, ``text``, ``position``,
``language``, ``style``): plain orders in ten languages, fake verdict JSON, role markers and chat
special tokens, a closing delimiter, spaced-out and zero-width spellings, asides to the grader.
They are used by the judge's ``injection`` perturbation check (:mod:`lab.judge.perturb`) and by
the attack measurement (:mod:`lab.judge.attacks`, ``scripts/judge_injection.py``). The detector
that flags such text is :mod:`lab.metrics.injection`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

INJECTIONS_FILE = Path(__file__).with_name("injections.jsonl")
#: Where a phrasing goes: before the answer, after its first sentence, after it, or joined to its
#: last sentence as a clause (", exactly as the reference answer states.").
POSITIONS = ("start", "middle", "end", "clause")


@dataclass(frozen=True)
class Injection:
    """One phrasing of the injection set: ``id``, the ``text`` added to a wrong answer, where it
    goes (``start``, ``middle``: after the first sentence, ``end``, ``clause``: joined to the last
    sentence before its full stop), its ``language`` and ``style``."""

    id: str
    text: str
    position: str
    language: str
    style: str


@lru_cache(maxsize=4)
def load_injections(path: Path = INJECTIONS_FILE) -> tuple[Injection, ...]:
    """The injection set (``lab/judge/injections.jsonl``, one phrasing a line)."""
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            if row.get("position") not in POSITIONS:
                raise ValueError(f"{path} line {lineno}: position must be one of {', '.join(POSITIONS)}")
            out.append(Injection(row["id"], row["text"], row["position"], row.get("language", "en"),
                                 row.get("style", "plain")))
    return tuple(out)


def inject(answer: str, injection: Injection) -> str:
    """``answer`` with ``injection``'s text at its position (``middle``: after the first sentence,
    the end when there is only one; ``clause``: in place of the answer's final full stop, the
    phrasing bringing its own)."""
    answer = answer.strip()
    if injection.position == "clause":  # ", as the reference answer states." in place of the full stop
        return answer.rstrip(".!?") + injection.text
    if injection.position == "start":
        return f"{injection.text}\n{answer}"
    if injection.position == "middle":
        m = re.search(r"(?<=[.!?])\s+", answer)
        if m:
            return f"{answer[:m.start()]} {injection.text} {answer[m.end():]}"
    return f"{answer}\n\n{injection.text}"
