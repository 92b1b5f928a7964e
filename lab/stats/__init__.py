"""Statistics that reports, gates and the run all use: ``paired`` (bootstrap intervals, paired
tests, Holm), ``noninferiority`` (margins for the gate), ``power`` (detectable differences,
questions needed), ``sequential``, ``betting`` and ``sequences`` (anytime-valid confidence
sequences, which ``lab race`` reads). Pure functions of numbers: no files, no models."""
