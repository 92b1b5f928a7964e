"""Targets: RAG systems the lab did not build, asked as they are (the ``target:`` section).

``contract`` is what a target returns (answer, contexts, candidates, usage) and how a reply in
another shape is read; ``python``, ``http`` and ``replay`` are the three ways in; ``calls`` asks
a target every question, each reply cached per (target identity, question, history). This
package knows nothing of metrics or judges: the run (:mod:`lab.eval.target`) scores what it returns.
"""
