"""The run: questions in, run folder out. ``stages`` (retrieve, answer, judge, ragas over every
question, each returning its counters and sections), ``runner`` (one experiment: assembles the
stages' sections into the run files), ``records`` (the run files' only writer; the schema is
:mod:`lab.runfiles`), ``ragas``, ``parallel``, ``sweep`` and ``optimize`` (many runs)."""
