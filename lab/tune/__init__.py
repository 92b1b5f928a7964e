"""Tuning models to a knowledge base: ``lab tune`` (:mod:`lab.tune.train`) and its training questions (:mod:`lab.tune.pairs`)."""
