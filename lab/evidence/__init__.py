"""A question's gold evidence and whether a list of passages holds it: the lab's central concept,
in one place.

- :mod:`lab.evidence.text`: how texts are compared: one :func:`~lab.evidence.text.fold` (at four
  levels, with offsets where a match must map back to the original), one word rule, one stop
  list, the figures, and one citation grammar (``[2]``, ``[1, 3]``, ``[1; 3]``).
- :mod:`lab.evidence.holds`: a :class:`~lab.evidence.holds.Passage`, a piece of
  :class:`~lab.evidence.holds.Evidence` (a golden span with its places, a keyword, or a quoted
  text) and the one rule :func:`~lab.evidence.holds.holds` with
  :func:`~lab.evidence.holds.first_holding`: what the keyword and span metrics, the loss funnel and
  ``lab tune`` all ask.
- :mod:`lab.evidence.states`: what an answer states of its evidence, and what it states that its
  context or its spans do not hold.

Pure functions on the ground floor: no I/O, nothing of the lab above its kernel (an import
contract in ``pyproject.toml`` keeps it so).
"""
