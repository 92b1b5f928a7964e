"""Whether a sentence can stand alone as the answer to a question (``lab generate``'s extractive
candidates, :mod:`lab.evalsets.extract`): :func:`why_not` says why it cannot, :func:`plain` is
the sentence as a reader sees it, markup taken off.

Each rule was read against rows people graded (docs/generated-rows-read.md): a sentence that
points to the text around it or elsewhere, a walkthrough's step, the authors' news, what used to
be ("Originally, ..."), a caption, a mention of some things none named, or one that states no fact.
"""

from __future__ import annotations

import re

from lab.evidence.text import AUXILIARIES

#: Sentence length, in words, of a candidate.
MIN_WORDS, MAX_WORDS = 6, 45

#: Openings that point to what came before: a sentence so begun does not stand alone.
_POINTING = re.compile(r"^(?:it|its|this|that|these|those|they|them|their|he|she|then|but|and|or|also|however|so|"
                       r"here|there|the result(?!\s+(?:of|from)\b)|"
                       r"such|both|thus|hence|therefore|otherwise|instead|similarly|likewise|for example|for instance|"
                       r"in this case|in that case|in other words|"
                       r"as (?:mentioned|described|shown|seen|noted)|as you can see|see|note:?|"
                       r"an? (?:\w+ )?note|now|in addition|another|"
                       r"for (?:this|these|those)|"
                       r"again|finally|first|second|next|last|lastly|alternatively|additionally|furthermore|moreover|the latter|"
                       r"the former|the same|the patterns?|the above|the others?|the rest|the remaining|the command|"
                       r"the output|because of (?:that|this)|on top of that|"
                       r"in contrast|by contrast|in comparison|unlike (?:that|this|those|these)|for that|"
                       r"either (?:method|way|option|one|approach|of (?:them|these|those))|for more (?:details|information)|"
                       r"be sure|if (?:yes|so|not|no)(?=\s*,)|"
                       # "The function can control whether ...": the section's function, or the one before
                       r"the (?:function|method|class|object|module|template|tag|value|argument|parameter|option|setting|"
                       r"attribute|property|decorator|callable|plugin|backend|command|flag|field|key|variable|callback|"
                       r"handler)(?=\s+(?:can|is|are|will|must|should|does|may|returns?|takes?|has|accepts?)\b))\b",
                       re.I)
#: Lowercase openings that continue a sentence begun before the sentence: after a code block or a
#: formula ("where :math:`d` is the number of features.", "will build all examples starting with
#: ``plot_compute_``.") or in a list a lead-in began ("by loading all plugins ..."). Case matters:
#: "Where possible, ..." opens a sentence. Of the 22,154 candidates of 54 folders of documentation
#: read here, it takes 154, nearly all fragments ("the", "a", "in", "for" and "when", lowercase
#: openers too, open list items that stand alone as often as not: left).
_CONTINUES = re.compile(r"^(?:where|which|whose|whereby|will|would|is|are|was|were|has|have|had|with|by|to|if|"
                        r"using|without|whether|must|can|could|may|might|should|shall|than|as|because|while|"
                        r"whereas|from|via|of|at|on)\b")
#: Words that send the reader elsewhere in the document: "(see table below)", "in this case", "here"
#: ("The full range of Python colon expressions are allowed here"), "For X, see Y.".
_ELSEWHERE = re.compile(r"\b(?:below|above|as follows|the following|this case|this situation|this example|the example|"
                        r"this command|"
                        r"these commands|the previous|the next|the latter|the former|have a look at|"
                        r"read (?:its|the) documentation|(?:is|are) (?:documented|described|listed) (?:in|on|at)|"
                        r"for (?:more |further |full |the )?details|by reading|consult|why not|file an? (?:issue|bug)|"
                        r"refer to|can be found (?:in|on|at|under)|find (?:the |more )?details|"
                        r"(?:later|earlier) (?:chapter|section|page)s?|"
                        r"(?:do|does|enable|achieve|accomplish) this|either (?:method|way|option|approach))\b"
                        r"|\(see\b|\bhere\b|\bthis[.)]*$|^check (?:out )?(?:this|the|our)\b|"
                        r"^(?:for|to|if|when|on|in)\b[^,]*,\s*see\b|"  # "To create custom tags ..., see Calling ..."
                        r"\b(?:is|are) in the\b[^.]{0,60}\bdocumentation\b"
                        r"|\b(?:these|those) (?!(?:are|were|is|was|can|will|must|may|should|have)\b)[a-z]\w*"
                        r"|\bthis (?:trick|feature|approach|technique|behaviou?r|functionality|pattern)\b", re.I)
#: A lead-in: a need the next sentence meets ("Sometimes you want to have default values for your
#: initializer."), or a pointer after an adverb ("Sometimes they're referred to as NG APIs."); a
#: dummy "it" stays ("Sometimes it is useful to save a Future ...").
_LEAD_IN = re.compile(r"^(?:sometimes|often|occasionally|in some cases|at times),?\s+(?:(?:you|users?|people)\s+"
                      r"(?:\w+\s+){0,2}?(?:want|need|wish|prefer)s?\b|(?:they|this|these|those)\b)", re.I)
#: A step of a walkthrough, told to the reader ("Open your shell and cd into ...", "Great, you
#: just generated a skeleton package."): the tutorial's story, not a fact of the product.
#: A note on an example's numbered line ("line 10: This contains the position of ...") is one too.
_WALKTHROUGH = re.compile(r"^(?:open|find|go to|navigate to|cd|switch to|head (?:over )?to|great|congratulations|"
                          r"well done|voil[aà])\b|\byou(?:'ve| have)? just\b|\byou(?:'ll| will) (?:see|learn|now)\b|"
                          r"^lines?\s+\d+(?:\s*(?:,|-|–|and|to)\s*\d+)*\s*[:.)–-]", re.I)
#: The authors speaking of themselves ("We are proud to be a sponsor of PyCon 2016."): news about
#: the project, not a fact of the product; "we recommend" is a rule and stays.
_AUTHORS = re.compile(r"\b(?:we|we're|we'll|we've|our|ours)\b(?! (?:recommend|suggest|advise|encourage|strongly))|"
                      r"(?<![\w.-])us(?![\w.-])", re.I)
#: A subject said to exist in a vague quantity, none named: "Some parentheses are optional in the
#: Python grammar.", "Werkzeug provides a couple of functions to parse HTTP headers".
_SOME = re.compile(r"^(?:some|many|several|a few|various|a couple of)\b|\ba couple of\b", re.I)


def role_name(names: str = r"[\w:.-]+") -> str:
    """The name of a role whose name ``names`` (a pattern) matches, reStructuredText's (":pep:") or
    MyST's ("{pep}"), before its backquoted text."""
    return r"(?::(?:" + names + r"):|(?<!`)\{(?:" + names + r")\})"


def role(names: str = r"[\w:.-]+") -> str:
    """A role whose name ``names`` matches, with the text a reader sees of it (group 1)."""
    return role_name(names) + r"`[~!]?([^`<\s][^`<]*?)(?:\s*<[^>]+>)?`"


#: A reStructuredText role, or a MyST Markdown one, and the text a reader sees of it (group 1):
#: ":meth:`~flask.Flask.run`", ":ref:`the tutorial <tutorial>`", "{func}`structlog.configure`";
#: ROLE_NAME, the role's name alone (":pep:" of ":pep:`3333`", "{mod}" of "{mod}`contextvars`").
#: A MyST role is not code that opens with braces ("`{name}` placeholders").
ROLE = role()
ROLE_NAME = role_name() + r"(?=`[^`\s])"
#: A sentence whose subject is another page ("{doc}`types` help you to write correct code.",
#: ":doc:`tutorial` shows ..."): a link list's entry, about that page (a section's link, ``:ref:``,
#: often names a thing: ":ref:`Fixtures <fixtures-api>` are defined using ...").
_PAGE_LINK = re.compile(r"^\W*" + role_name("doc") + "`")
#: Words before named examples: "Several backends, for example Google Drive and Dropbox, ...".
NAMING = re.compile(r"\b(?:for example|for instance|such as|e\.g\.|including|namely)\b|:\s", re.I)
CODE_TERM = re.compile(r"``[^`]+``|`[^`]+`|(?<![\w-])--?[A-Za-z][\w-]*")
_FIGURE = re.compile(r"\d")
#: A statement that something can be done or found, without what: "... is also configurable.",
#: "... for your bucket here."
_EMPTY_END = re.compile(r"\b(?:here|configurable|possible|available|supported|recommended|optional|allowed)\.$", re.I)
#: A judgement with no fact in it, names or not: "Making a request with Requests is very simple."
_ONLY_EASY = re.compile(r"\b(?:is|are)\s+(?:\w+ly\s+|very\s+|quite\s+|pretty\s+)?(?:simple|easy|straightforward)\.$", re.I)
_NAME = re.compile(r"(?<=\s)[A-Z][\w.-]*[A-Za-z0-9]")
_RULE = re.compile(r"\b(?:must|never|always|only|default(?:s|ed)?|required?|requires|cannot|can't|not|supports?|"
                   r"recommended|instead|limit(?:s|ed)?|maximum|minimum|at least|at most|per)\b", re.I)
#: A sentence that says something changed, not to what: "In Click 2.0 the signature
#: for callbacks changed."
_SAYS_CHANGED = re.compile(r"\b(?:has |have )?changed\.$", re.I)
#: A sentence about what used to be ("Originally, structlog used a generic wrapper class by
#: default."): asked as what is, its answer is wrong.
_HISTORY = re.compile(r"^(?:originally|formerly|previously|historically|in the past|in earlier versions)\b", re.I)


def _verbless(read: str) -> bool:
    """No word past the first reads as a verb (an auxiliary, :data:`lab.evidence.text.AUXILIARIES`,
    ``-n't``, ``-s`` but not ``-ss``, ``-us``, ``-is``, ``-ed``; a possessive is none; plurals count
    too: the rule only needs to be lenient): a caption, a blurb or a list entry's label ("A fake
    wrapper around Python's timeit."), not a statement."""
    for i, word in enumerate(re.findall(r"[A-Za-z][\w'’-]*", read)):
        low = word.lower()
        if low in AUXILIARIES or low.endswith(("n't", "n’t")):
            return False
        if low.endswith(("'s", "’s")) or i == 0 or len(low) <= 3:
            continue
        if (low.endswith("s") and not low.endswith(("ss", "us", "is"))) or low.endswith("ed"):
            return False
    return True


_FAQ = re.compile(r"^(?:Q|A)\s*:\s+")  # a FAQ's question or answer label


def plain(sentence: str) -> str:
    """A sentence without its markup, as a reader sees it: whitespace runs as one space, code and
    emphasis markup and link targets taken off (reStructuredText and Markdown alike). The text of
    code and of a role is kept as written: ``__setattr__`` is a name, not emphasis; a PEP's or an
    RFC's role reads as Sphinx shows it ("PEP 557")."""
    kept: list[str] = []  # code's and roles' text, out of the emphasis rules' reach

    def keep(text: str) -> str:
        kept.append(text)
        return f"\x00{len(kept) - 1}\x00"

    text = re.sub(role_name("pep") + r"`(\d+)`", r"PEP \1", sentence)
    text = re.sub(role_name("rfc") + r"`(\d+)`", r"RFC \1", text)
    text = re.sub(ROLE, lambda m: keep(m[1]), text)  # :meth:`~flask.Flask.run`
    text = re.sub(r"`([^`<]+?)\s*<[^>]+>`_{1,2}", r"\1", text)  # `text <url>`__
    text = re.sub(r"(?<!`)`([^`<]+?)`_{1,2}(?!\w)", r"\1", text)  # a link's text, not code: `UTS #35 section 3.3`_
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # [text](url)
    text = re.sub(r"\s*\[\^[^\]]+\]", "", text)  # a footnote's mark: "colorful[^win]", "for you [^fn1], however"
    text = re.sub(r"(?<![\w\]])\[([^\]\[]+)\](?:\[[^\]\[]*\])?(?![(:_])", r"\1", text)  # Markdown's "[*Mypy*]" link
    # Sphinx's default role: "`!psycopg2`" and "`~Cursor.execute()`" read "psycopg2" and "Cursor.execute()"
    text = re.sub(r"``([^`]+)``|`(?:[~!](?=\w))?([^`]+?)(?:\s*<[^<>`]+>)?`", lambda m: keep(m[1] or m[2]), text)
    text = re.sub(r"\\(?=\w)", "", text)  # a reStructuredText escape: "`ErrorTree`\\s" reads "ErrorTrees"
    text = re.sub(r"(\*\*|__|\*)(\S.*?\S|\S)\1", r"\2", text)
    text = re.sub(r"(?<=\w)_(?=[\s.,;:)]|$)", "", text)  # a reference's trailing underscore: "manpage_"
    text = re.sub(r"^\*+|\*+$", "", text.strip())  # emphasis cut by the sentence's end: "**Do not ... ."
    text = re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m[1])], text)
    return " ".join(text.split())


def why_not(sentence: str) -> str | None:
    """Why ``sentence`` cannot be a question's answer by itself (None: it can). Its markup counts
    as a fact (a term in code markup is one); what it says is read without it (a link's text)."""
    flat = " ".join(sentence.split())
    read = plain(sentence)
    n = len(read.split())
    if n < MIN_WORDS:
        return "short"
    if n > MAX_WORDS:
        return "long"
    if not read.endswith("."):
        return "not a statement"  # a question, an introduction ("... as follows:"), a fragment
    if re.search(r"\b(?:e\.g|i\.e)\.$", read):
        return "not a statement"  # an example's lead-in, its example a block below: "... -- e.g."
    opening = _FAQ.sub("", read).lstrip("*_`\"'(")  # a FAQ's "A: This is how ..." opens with "This"
    if (_POINTING.match(opening) or _CONTINUES.match(opening) or _ELSEWHERE.search(read) or _PAGE_LINK.match(flat)
            or _LEAD_IN.match(opening)):
        return "points elsewhere"
    if _HISTORY.match(opening):
        return "the project's history"
    if _WALKTHROUGH.search(opening):
        return "a walkthrough's step"
    if _AUTHORS.search(read):
        return "the authors' story"
    if sum(c.isalpha() for c in flat) < 0.6 * len(flat.replace(" ", "")):
        return "not prose"
    named = _FIGURE.search(flat) or CODE_TERM.search(flat) or _NAME.search(flat)
    if not (named or _RULE.search(flat)):
        return "no fact"
    if (not named and _EMPTY_END.search(read)) or _ONLY_EASY.search(read):  # "The port is also configurable."
        return "no fact"
    if _SOME.search(read.lstrip("*_`\"'(")) and not (CODE_TERM.search(flat) or NAMING.search(read)):
        return "no fact"  # some things, none named
    if _SAYS_CHANGED.search(read):
        return "no fact"  # that it changed, not to what
    if not CODE_TERM.search(flat) and _verbless(read):
        return "a caption"  # "Foundational knowledge on using and configuring Black."
    return None
