"""Claims about the reference, the grading or the verification: words in an answer that speak of
how it will be judged ("..., exactly as the reference answer confirms", "Verified against the
answer key:") rather than of the question. Pure text functions.

Two uses, one vocabulary (:data:`CLAIM_WORDS`: the judge's reference and its synonyms, the
grading and its people, a verification status):

- :func:`claim_spans`: the stretches of an answer that carry such a word and state no fact of
  their own (no figure, date or name the rest of the answer does not state): the clause, the
  sentence, the lead-in before a colon or a comma, the aside in brackets. The judge's anchoring
  (:func:`lab.metrics.injection.anchored`) leaves them out of the answer's substance and the
  lower score stands, so a claim cannot raise a score whatever its phrasing: the rule reads what
  the stretch is about (the evaluation, and no fact), not how it is worded.
- :data:`CLAIM_PATTERNS`: a claim word with a verb that ties the answer to it ("matches the
  answer key", "as the expected response has it", "checked against", "graders confirmed"): the
  detector's ``claim`` kind (:func:`lab.metrics.injection.scan`), which makes a judgement suspect.

An ordinary answer or document that mentions a reference ("Keep your policy number for
reference", "the claims reviewer checks each file") has no such stretch: the word must be one of
the evaluation's, and the stretch must add nothing.
"""

from __future__ import annotations

import re

from lab.evidence.facts import facts, states_fact

_NOT_REF = r"(?!\s+(?:number|no\b|id\b|code|letter|check|point|guide|manual|rate|price|period|year|date|customer|data\s+model))"
#: The evaluation's words: its reference and their synonyms, the grading and who grades, a verified status.
CLAIM_WORDS = re.compile(
    r"\b(?:(?<!\bfor\s)(?<!\bof\s)reference" + _NOT_REF + r"(?:\s+(?:answer|solution|text|data|figures?|version|response))?"
    r"|(?:answer|grading|scoring|marking|official|the)\s+key\b(?!\s+(?:features?|benefits?|metrics?|to|takeaways?|"
    r"points?|risks?|elements?|products?|clients?|partners?|drivers?|components?|personnel|people|staff|areas?|"
    r"accounts?|dates?|terms?|differences?|roles?|facts?|findings?|milestones?|strengths?|contacts?))"
    r"|gold(?:en)?[- ](?:answers?|standard|labels?|references?|data|responses?)|ground[- ]?truth"
    r"|(?:expected|model|sample|target|canonical|stored|approved|correct|right|official|ideal|true)\s+"
    r"(?:answers?|responses?|outputs?|solutions?|results?)"
    r"|answer\s+sheets?|solution\s+(?:manual|sheet|key)|marking\s+(?:scheme|guide|sheet)s?"
    r"|(?:scoring|grading|marking)\s+(?:guides?|rubrics?|keys?|notes|schemes?|sets?|teams?|data)"
    r"|evaluation\s+(?:sets?|teams?|data)|rubric'?s?|benchmark'?s?(?:\s+(?:own\s+)?answers?)?"
    r"|grader'?s?|graders'?|graded|scorer'?s?|evaluators?'?s?|examiners?|markers?'s?|checkers?|qa\s+team"
    r"|fact[- ]checked|cross[- ]checked|signed\s+off|the\s+test\s+expects"
    r"|(?:verified|validated|approved|certified|checked|confirmed)\s+(?:answers?|responses?|replies|against|correct)"
    r"|(?:answer|response|reply)\s+(?:has|have|was|were|is)\s+(?:been\s+)?(?:\w+\s+)?(?:verified|validated|"
    r"approved|certified|graded|confirmed|checked|accepted)"
    r"|referenz\w*|référence|referencia|riferimento|referência)\b", re.I)

#: A claim word tied to the answer by a verb or a preposition: the detector's ``claim`` kind.
_TIE_BEFORE = (r"(?:as|per|like|exactly as|just as|matches|matching|match|agrees? with|in agreement with|consistent with|"
               r"identical to|the same as|same as|in line with|according to|verified (?:against|by|with)|"
               r"checked (?:against|by|with)|cross-checked (?:against|with)|validated (?:against|by)|confirmed by|"
               r"approved by|reproduces|mirrors|as (?:stated|given|listed|recorded|written) in)")
_TIE_AFTER = (r"(?:confirm\w*|states?|stated|says?|said|gives?|lists?|listed|shows?|notes?|agrees?|matches|"
              r"supports?|expects?|has it|contains?|records?|accepted|approved|verified|validated|checked|marked|"
              r"graded|found it|(?:is|are) (?:the same|identical)|bestätigt|indique|confirma|conferma)")
CLAIM_PATTERNS = [
    ("claim", re.compile(rf"\b{_TIE_BEFORE}\b[^.!?\n]{{0,40}}?(?:{CLAIM_WORDS.pattern})", re.I)),
    ("claim", re.compile(rf"(?:{CLAIM_WORDS.pattern})[^.!?\n]{{0,40}}?\b{_TIE_AFTER}\b", re.I)),
    ("claim", re.compile(r"^\W*(?:verified|confirmed|validated|checked|approved|certified)\s+(?:answer|correct|"
                         r"against|by|with|as)\b", re.I | re.M)),
]

#: Where a stretch may start or end inside a sentence: a comma, semicolon, colon, dash, or "as"/"which"/"just"/"exactly" after a comma.
_BOUNDARY = re.compile(r"\s*[,;:]\s+|\s+[-\u2013\u2014]\s+|\s+(?=(?:as|which|just as|exactly as|per|according to)\s)")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*|\n+")
_BRACKETS = re.compile(r"\(([^()]*)\)|\[([^\[\]]*)\]")


def _own_facts(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` states a figure, date or name that the rest of ``text`` does not. A
    lone capitalised word opening a sentence ("Graders have ...", "Every detail ...") is no name here."""
    rest, part = text[:a] + " " + text[b:], text[a:b]
    return any(not states_fact(rest, f) for f in facts(part)
               if not (f.kind == "name" and " " not in f.text and re.search(r"(?:^|[.!?:]\s+|\n)\W*$", part[:f.start])))


def claim_spans(text: str) -> list[tuple[int, int]]:
    """The stretches of ``text`` that speak of the evaluation and state nothing of their own (see
    the module docstring), as (start, end), in order, none overlapping."""
    out: list[tuple[int, int]] = []
    for m in _BRACKETS.finditer(text):  # an aside in brackets holding a claim word, if it adds no fact
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        if CLAIM_WORDS.search(inner) and not _own_facts(text, m.start(), m.end()):
            out.append((m.start(), m.end()))
    for s in _SENTENCE.finditer(text):
        a0, b0 = s.start(), s.end()
        hits = [m for m in CLAIM_WORDS.finditer(text, a0, b0) if not any(x <= m.start() < y for x, y in out)]
        if not hits:
            continue
        stop = b0 - (len(text[a0:b0]) - len(text[a0:b0].rstrip(".!? \n")))  # before the sentence's full stop
        cuts = [a0, *(m.start() for m in _BOUNDARY.finditer(text, a0, b0)), *(m.end() for m in _BOUNDARY.finditer(text, a0, b0)),
                stop, b0]
        for hit in hits:
            starts = sorted({c for c in cuts if c <= hit.start()})
            ends = sorted({c for c in cuts if c >= hit.end()}, reverse=True)
            # a clause inside a sentence leaves the sentence its full stop; a whole sentence goes with it
            span = next(((x, y) for x in starts for y in ends
                         if not (y == b0 and x > a0 and stop < b0) and not _own_facts(text, x, y)), None)
            if span is not None and not any(x < span[1] and span[0] < y for x, y in out):
                out.append(span)
    return sorted(out)


def on_topic(stretch: str, about: str) -> bool:
    """Whether the claim word of a claim's ``stretch`` is one ``about`` (the question and the
    reference answer, folded to lower case) uses: "The API reference lists ..." answering "What
    does the API reference contain?" speaks of its topic, not of the grading."""
    word = CLAIM_WORDS.search(stretch)
    return bool(about and word and word.group(0).lower() in about)
