"""Text as the tolerant matches compare it: whitespace runs as one space, quotes and dashes plain,
markdown emphasis dropped, NFC, lower case, with each folded character's offset in the original
(so a match found in folded text maps back to exact offsets). Used by excerpt location, keyword
derivation and the judge's perturbations."""

from __future__ import annotations

import unicodedata

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                       "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
                       "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
                       "\u00a0": " ", "*": None, "`": None})


def folded_offsets(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs as one space, quotes and dashes plain, markdown emphasis
    dropped, lower case; and for each character of the result, its offset in ``text``."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i, ch in enumerate(text):
        ch = ch.translate(_FOLD)
        if not ch:
            continue
        if ch.isspace():
            if not space and out:
                out.append(" ")
                where.append(i)
            space = True
            continue
        space = False
        for c in unicodedata.normalize("NFC", ch).lower():
            out.append(c)
            where.append(i)
    return "".join(out), where


def folded_text(text: str) -> str:
    """``text`` as the tolerant match and the keyword checks compare it."""
    return folded_offsets(text)[0]
