"""What a generated question asks for, against what its sentence holds: rules that need no model
(``lab generate``'s extractive checks, :mod:`lab.evalsets.questions`, and the audit's doubts).

Each rule was read against rows people graded (docs/own-documents.md): a question that asks what
something is when its sentence only mentions it, one that asks for a value, a name or steps its
sentence does not give, one that asks what to do of a sentence that says what not to do, one that
asks what something does of a sentence saying it does not, one that asks for several things of a
sentence that lists none, and one that restates its sentence (its answer is in the question).
One rule mends instead of refusing: a question's closing words that say where it was read ("... in
the documentation?") are taken off when what is left names a thing (:func:`without_where_read`).
"""

from __future__ import annotations

import re

from lab.evalsets.standalone import NAMING, ROLE, ROLE_NAME, plain, role
from lab.evidence.text import content_words, fold, stem

#: What a question names: a capitalised word past its first, a term in code markup, an option, a
#: name in capitals ("RESTIC_REPOSITORY"), a term in single quotes ("the 'debug' option").
_TERM = re.compile(r"``([^`]+)``|`([^`]+)`|(?<![\w-])(--?[A-Za-z][\w-]*)|(?<!^)(?<![.?!]\s)\b([A-Z][\w.-]*[A-Za-z0-9])|"
                   r"(?<![\w'])'([^'\s][^']{0,40}?)'(?![\w'])")




_ASKS = [
    ("a date or period", re.compile(r"^\s*(?:in )?what (?:year|date|month|day)\b|^\s*since when\b", re.I),
     re.compile(r"\b(?:1[89]|20)\d\d\b|\b(?:January|February|March|April|May|June|July|August|September|October|"
                r"November|December)\b")),
    ("a time or a condition", re.compile(r"^\s*when\b", re.I),
     re.compile(r"\d|\b(?:if|when|whenever|after|before|once|until|while|during|every|each|on|at|unless|as soon as)\b",
                re.I)),
    ("a number", re.compile(r"\bhow (?:many|much|long|often|large|big|small|old)\b|\bwhat (?:is the )?(?:number|amount|"
                            r"percentage|size)\b", re.I),
     re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|"
                r"hundred|thousand|million|billion|once|twice|single|double|half|all|no|none|every|unlimited)\b", re.I)),
    ("a variable's name", re.compile(r"\b(?:which|what)(?: (?:is|are) the)? (?:environment )?variables?\b", re.I),
     re.compile(r"``[^`]+``|`[^`]+`|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\$\w+")),
    ("an option or command", re.compile(r"\b(?:which|what) (?:flag|option|switch|parameter|argument|command|"
                                         r"subcommand|environment variable|variable)s?\b", re.I),
     re.compile(r"``[^`]+``|`[^`]+`|(?<![\w-])--?[A-Za-z][\w-]*|\b[A-Z][A-Z0-9_]{2,}\b|\b[a-z]+ [a-z]+\b")),
    ("a name", re.compile(r"^\s*who\b", re.I), re.compile(r"(?<!^)\b[A-Z][\w.-]*[A-Za-z0-9]")),
    ("an address", re.compile(r"\bwhat (?:is|are) the (?:url|address|link|web ?site|endpoint)s?\b", re.I),
     re.compile(r"://|\bwww\.|\b[\w-]+\.(?:com|org|net|io|dev)\b|``[^`]+``|`[^`]+`")),
    ("an average", re.compile(r"\b(?:average|median|typical)\b|\bmean (?:size|value|number|time|length|count)\b", re.I),
     re.compile(r"\b(?:average|mean|median|typical|typically|usually|on the whole|roughly|approximately|about|around)\b",
                re.I)),
    ("a number", re.compile(r"\bwhat (?:is|are) the (?:[\w/-]+ ){0,2}(?:port|size|limit|count|version|number|percentage|"
                            r"amount|maximum|minimum|timeout|duration)s?\b", re.I),
     re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|hundred|thousand|unlimited|"
                r"no limit)\b", re.I)),
    ("a default value", re.compile(r"\bwhat (?:is|are) the default\b", re.I),
     re.compile(r"\bby default\b|\bdefaults? (?:to|is|are|value)\b|\bdefault\b[\w\s'`-]{0,30}?\b(?:is|are|was)\b|"
                r"\bdefault:", re.I)),
    ("steps in order", re.compile(r"\bwhat (?:is|are) the (?:\w+ )?(?:steps?|process|procedure|sequence)\b", re.I),
     re.compile(r"\b(?:first|then|after|before|next|finally|followed by|once|until)\b|:\s", re.I)),
    ("a purpose", re.compile(r"\bwhat (?:is|are) the (?:purpose|use|role|function)s? of\b|\bwhat (?:is|are) .{0,60}\bused "
                             r"for\b|^\s*why\b", re.I),
     re.compile(r"\b(?:allows?|lets?|enables?|so that|in order to|used (?:to|for)|purpose|helps?|makes? it possible|"
                r"important|necessary|required|needed|"
                r"is for|are for|because|to (?:avoid|prevent|ensure|make|keep|allow|speed|reduce|protect))\b",
                re.I)),
    ("a name", re.compile(r"\bwhat (?:is|are) the names? of\b", re.I),
     re.compile(r"``[^`]+``|`[^`]+`|(?<!^)\b[A-Z][\w.-]*[A-Za-z0-9]|\b\w+[_.]\w+\b|\b\w+(?:-\w+){2,}\b|"
                r"\b(?:named|called)\s+\S")),
]
#: A question about "the command" or "the option" that names none: it leans on the text it came from.
_GENERIC = re.compile(r"\bthe (?:command|option|flag|user|file|tool|program|service|script|bucket|server|operation|"
                      r"output|setting|repository|backend|result|feature|function|method|package|system)\b", re.I)


#: A question's closing words that say where it was read, not what it asks: "... in the
#: documentation?", "... described in the document?", "... in the grammar.md file?".
_WHERE_READ = re.compile(
    r",?\s+(?:(?:as\s+)?(?:described|mentioned|discussed|explained|shown|defined|documented|listed|given)\s+)?"
    r"(?:in|from|within|according to|based on|on)\s+(?:"
    r"(?:the|this|that)\s+(?:[\w`'\"%.()-]+\s+){0,3}?(?:section|chapter)(?:\s+of\s+(?:the|this)\s+"
    r"(?:[\w`'\"%.-]+\s+){0,2}?(?:document(?:ation)?|docs|page|guide|manual))?"
    r"|(?:the|this|that)\s+(?:[\w`'\"%.-]+\s+){0,2}?(?:document(?:ation)?|docs|file|page|text|passage|excerpt)"
    r"(?:\s+(?:file|page|document))?|['\"`]?[\w/.-]+\.(?:md|rst|txt|html?)['\"`]?(?:\s+file)?)\s*(?=\?$)", re.I)
#: A bare identifier names a thing too: "lexer_callbacks", "json.loads", "parse()", "%ignore".
_IDENTIFIER = re.compile(r"\b\w+_\w+\b|\b[a-z]\w*\.\w+\b|\b\w+\(\)|%\w+|\"[^\"]+\"")


def without_where_read(question: str) -> str | None:
    """The question without closing words that say where it was read ("What does the %ignore
    directive do in the grammar.md file?" reads "What does the %ignore directive do?"), when what
    is left names a thing (:data:`_TERM`, or an identifier); None otherwise: the question goes to
    the vague and file-naming checks as asked ("What is the main feature of the parser described
    in the document?" names nothing without its document)."""
    m = _WHERE_READ.search(question)
    if m is None:
        return None
    left = question[:m.start()].rstrip(" ,") + "?"
    return left if _TERM.search(left) or _IDENTIFIER.search(left) else None


def asks_elsewhere(question: str, sentence: str, heading: str, title: str) -> str | None:
    """The first thing the question names (a name, a code term, an option) that neither its
    sentence nor the sentence's section title or document name holds: the model took it from the
    nearby text, so the sentence does not answer the question (None: every name is there)."""
    held = fold(f"{sentence} {heading} {title}", "case")
    for m in _TERM.finditer(question):
        term = next(g for g in m.groups() if g)
        if fold(term.strip("`"), "case") not in held:
            return term
    return None


def answer_type(question: str, sentence: str) -> str | None:
    """Why the sentence cannot answer what the question's wording asks for (None: it can): a
    "when" question needs a time or a condition, "what year" a date, "how many" a number,
    "which option" an option or command, "who" a name, "what is the default" a value, "what are
    the steps" an order; before them :func:`denies` and two questions in one ("What is Jinja2
    and how does it work?"), after them :func:`mentions_only`,
    :func:`says_not_to` and :func:`lists_none`."""
    if (why := denies(question, sentence)) is not None:
        return why
    if _TWO.search(question):
        return "the question asks two things; one sentence answers one at most"
    if (why := names_given(question, sentence)) is not None:
        return why
    for kind, asks, holds in _ASKS:
        if asks.search(question):
            return None if holds.search(sentence) else f"the question asks for {kind}; its answer holds none"
    return mentions_only(question, sentence) or says_not_to(question, sentence) or lists_none(question, sentence)


#: A question asking for a name or a title.
_ASKS_NAME = re.compile(r"\bwhat (?:is|are) the (?:[\w-]+ )?(?:names?|titles?)\b|\bwhat is [^?]{0,40}\bcalled\b", re.I)
#: The names a sentence marks: code, a link's or a role's text, a quotation.
_MARKED = re.compile(ROLE + r"|`([^`<]+?)(?:\s*<[^>]+>)?`_{1,2}|\[([^\]]+)\]\(|"
                     r"``([^`]+)``|`([^`]+)`|\"([^\"]{3,80})\"")


def names_given(question: str, sentence: str) -> str | None:
    """A question asking for a name or a title whose own words hold every name its sentence
    marks (in code, a link's or a role's text, quotes): "What is the name of the tutorial on
    using Behave with Pyramid?" of "Wayne Witzel III, `Using Behave with Pyramid`_, 2014.". The
    answer is in the question; nothing is left to find."""
    if not _ASKS_NAME.search(question):
        return None
    marked = [next(g for g in m.groups() if g) for m in _MARKED.finditer(sentence)]
    asked = fold(question, "case")
    if marked and all(fold(name.strip("~."), "case") in asked for name in marked):
        return f"the question asks for a name it gives itself ({marked[0]!r})"
    return None


#: Two questions in one: "What is Jinja2 and how does it work?".
_TWO = re.compile(r"\b(?:and|or) (?:how|what|why|when|where|which|who)\b", re.I)
#: "What is (the) X ...?": X, up to its first preposition, relative word or participle.
_WHAT_IS = re.compile(r"^\s*what (?:is|are) (?:an? |the )?(?P<x>[^?]+?)\s*(?:\b(?:in|for|of|on|to|with|when|that|which|"
                      r"by|from|between|regarding|within|if|as|at|under)\b[^?]*|\b\w+ed\b[^?]*)?\?\s*$", re.I)
#: What a bare definition question may close with: "in the context of Y", "in Flask" (a name).
_IN_NAMED = r"(?:\s+in (?:the context of [^?]+|[A-Z`'\"][^?]*))?"
#: A bare definition question: "What is X?", "What are X in Flask?", "What is X in the context of Y?".
_DEFINITION = re.compile(r"^\s*(?i:what (?:is|are) (?:an? |the )?)(?:(?!(?i:in|for|of|on|to|with|when|that|which|by|from|as|at|"
                         r"about|used|and|or)\b)[\w'`.-]+\s*){1,4}" + _IN_NAMED + r"\?\s*$")
#: "What does X mean?", "What does X mean in Y?": a bare definition question asked another way
#: (read case-blind, its closing name too).
_MEANS = re.compile(r"^\s*what does (?:an? |the )?(?P<x>[^?]+?)\s+mean" + _IN_NAMED + r"\?\s*$", re.I)
#: Words after which a sentence says what its subject is or holds.
_DEFINES = {"is", "are", "was", "were", "means", "mean", "refers", "refer", "stands", "stand", "contains", "contain",
            "consists", "describes", "defines", "lists", "holds", "include", "includes", "=", ":", "("}
#: What other rules judge ("what is the name of", "the purpose of", "the default").
_OTHER_KINDS = {"name", "names", "purpose", "purposes", "use", "role", "function", "default", "difference",
                "differences", "number", "amount", "size", "port", "url", "address", "version", "steps", "step",
                "process", "procedure", "sequence"}
_TOKEN = re.compile(r"``[^`]+``|`[^`]+`|[\w'./-]+|[:=(]")
#: A token that names something (code markup, an option, a path, a name in capitals, digits, a
#: word with inner hyphens): what a markup-free sentence keeps of its names.
_NAMED = re.compile(r"^`|^--?\w|[_./\d]|^[A-Z]|\w-\w")


def mentions_only(question: str, sentence: str) -> str | None:
    """Why a "what is X?" question is not answered by a sentence that only mentions X (None: it
    may be): X (up to three words, before its first preposition or participle) is in the sentence,
    but nothing after it says what it is or holds (a verb such as "is", "means", "contains" within
    eight words, a colon, a name right after it) and no name other than X's own comes just before
    it ("the restic self-update command" names the command; "the root user" does not say what the
    root user is). A bare definition question ("What is a web application?", "What is the WSGI
    specification?", at most "in" a name after X) needs more: a defining verb or a colon after X
    (a name near it, "A web application needs an HTTP server", or a parenthesis, "The WSGI
    specification (:pep:`3333`) decided ...", does not say what X is; a colon counts right after
    X only). "What does X mean?" is a bare definition question too."""
    means = _MEANS.match(question)
    m = means or _WHAT_IS.match(question)
    if not m:
        return None
    x = re.findall(r"[\w'-]+", m.group("x").lower())
    if not x or len(x) > 3 or x[0] in _OTHER_KINDS or x[-1] in _OTHER_KINDS:
        return None
    head, own = x[-1], set(x)
    pure = bool(means or _DEFINITION.match(question))
    tokens = _TOKEN.findall(re.sub(ROLE_NAME, "", sentence) if pure else sentence)  # ":pep:`3333`" is no colon
    low = [fold(t.strip("`").strip(".,;'"), "case") for t in tokens]
    at = [i for i, t in enumerate(low) if t in (head, head + "s", head + "es") or t.rstrip("s") == head
          or head in t.split()]
    if not at:
        return None  # X is not in the sentence: the round trip and the reader judge it

    def names(j: int) -> bool:
        return bool(_NAMED.search(tokens[j].lstrip("(").rstrip(".,;:'")) and re.search(r"[^\W_]", tokens[j]) and j > 0
                    and not set(low[j].split()) & own)

    defines = _DEFINES - {"("} if pure else _DEFINES
    for i in at:
        after = range(i + 1, len(low))
        if any(low[j] in defines for j in after if j < i + 9) or ":" in (low[i + 1:i + 3] if pure else low[i + 1:]):
            return None
        if not pure and (any(names(j) for j in after if j < i + 4) or any(names(j) for j in range(max(0, i - 3), i))):
            return None
    return f"the question asks what {' '.join(x)} is; its sentence only mentions it"


_DO = re.compile(r"\b(?:recommended|best|right|correct|proper|should|way to|how (?:do|can|should|to))\b", re.I)
_DONT = re.compile(r"^\W*(?:do not|don't|never|avoid)\b|\b(?:is not recommended|should not|must not)\b", re.I)


def says_not_to(question: str, sentence: str) -> str | None:
    """A question asking what to do ("the recommended way", "how should") of a sentence that only
    says what not to do ("Do not use the development server when deploying to production.")."""
    if _DO.search(question) and _DONT.search(plain(sentence)):
        return "the question asks what to do; its sentence says what not to do"
    return None


_NOT = re.compile(r"\b(?:not|never|no longer)\s+(?:\w+ly\s+)?(?:be\s+)?(\w+)|\b\w+n't\s+(?:\w+ly\s+)?(\w+)", re.I)
_NEGATED_Q = re.compile(r"\b(?:not|n't|never|no longer|without|avoid|prevent|instead of|unless|except)\b", re.I)


def denies(question: str, sentence: str) -> str | None:
    """A question asking what something does of a sentence saying it does not ("What does
    click.argument() take as a parameter?" on "click.argument() does not take a help
    parameter."): a verb the sentence negates is in the question (by its first five letters),
    which itself negates nothing."""
    if _NEGATED_Q.search(question):
        return None
    asked = {w[:5] for w in re.findall(r"[a-z]{3,}", question.lower())}
    for m in _NOT.finditer(plain(sentence)):
        verb = (m.group(1) or m.group(2)).lower()
        if len(verb) >= 3 and verb[:5] in asked and verb not in {"the", "only", "all", "any", "just", "more", "have"}:
            return f"the question asks what {verb!r} does or is; its sentence says it does not"
    return None


#: "What are some X?", "What are the two X?", "Which X are ...": a question asking for several things.
_SEVERAL = re.compile(r"^\s*what are (?:some|several|a few|the (?:two|three|four|five|several|various|different|main|"
                      r"key|other|available|recommended|common)\b)|^\s*(?:list|name) (?:some|the|all)\b", re.I)
#: A list: "A, B and C", "A or B", "two ...", a colon before items.
_LIST = re.compile(r"\w[\w`'\")]*,\s+[^,]+(?:,\s+[^,]+)*,?\s+(?:and|or)\s+\w|\b(?:and|or|as well as)\b|:\s+\S|"
                   r"\b(?:two|three|four|five|six|both|either)\b", re.I)


def lists_none(question: str, sentence: str) -> str | None:
    """A question asking for several things ("What are some Flask extensions for server-side
    sessions?") of a sentence that names no two (no "A, B and C", no "and"/"or", no count), or
    asking which things ("What are the built-in converters ...?") of a sentence that says there
    are some without naming one ("Converters for common types of URL variables are built-in.":
    a vague quantity, no term in code markup, no call, no "for example" or "such as")."""
    read = plain(sentence)
    if _SEVERAL.search(question) and not _LIST.search(read):
        return "the question asks for several things; its sentence lists none"
    coded = _PROSE_ROLE.sub(r"\1", sentence)  # a glossary's term or a page's link names nothing in code
    if _WHICH.search(question) and _UNNAMED.search(read) and not (_CALL.search(coded) or NAMING.search(read)):
        return "the question asks which things; its sentence says there are some and names none"
    return None


#: "What are the X ...?", "Which X ...?": a question asking which things.
_WHICH = re.compile(r"^\s*(?:what are (?:the|some)|which)\b", re.I)
#: Things said to exist, not named: "a couple of functions", "common types of URL variables".
_UNNAMED = re.compile(r"\b(?:a couple of|several|a few|various|a number of|common types of|many|some)\s+(?:\w+\s+)?\w+s\b",
                      re.I)
#: A name in code: markup, or a call ("parse_dict_header()").
_CALL = re.compile(r"`[^`]+`|\b\w+\(\)")
#: A role whose text is prose, not code: a glossary's term, a page's or a section's link, a PEP
#: (":term:`slotted classes`", "{doc}`types`"); its text is group 1.
_PROSE_ROLE = re.compile(role("term|doc|ref|pep|rfc|abbr|guilabel|menuselection"))


def restates(question: str, sentence: str) -> str | None:
    """A question holding every content word of its sentence (3 or more), each read by its
    :func:`stem`: nothing is left for the answer to say ("What is the canonical URL for the about
    endpoint without a trailing slash?" on "The canonical URL for the about endpoint does not have a
    trailing slash."; "What are the ASGI frameworks that can be run using Uvicorn, Daphne, or
    Hypercorn?" on "You can use Uvicorn, Daphne, or Hypercorn to run any ASGI framework.")."""
    said = {stem(w) for w in content_words(sentence)}
    if len(said) >= 3 and said <= {stem(w) for w in content_words(question)}:
        return f"the question holds every content word of its sentence ({len(said)}): nothing is left to answer"
    return None
