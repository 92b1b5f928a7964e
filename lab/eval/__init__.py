"""Questions in, run folder out: ``evalset`` (JSONL rows, golden spans), ``stages`` (retrieve,
answer, judge, ragas over every question), ``judge``, ``ragas``, ``records`` (the run files'
schema and their only writer), ``runner`` (one experiment), ``sweep`` and ``optimize`` (many)."""
