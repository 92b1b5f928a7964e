"""Metrics: pure per-question functions (``retrieval``) and aggregation (``aggregate``)."""
