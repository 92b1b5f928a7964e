"""User-facing errors: each says what is wrong, where, and how to fix it."""

from __future__ import annotations


class LabError(Exception):
    """An error caused by user input (a config, a data file, a model name).

    The CLI prints the message without a traceback and exits with ``exit_code``.
    """

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  fix: {self.hint}"
        return self.message


class ConfigError(LabError):
    """An experiment config is invalid."""


class DataError(LabError):
    """A knowledge base or eval set is invalid."""


class ModelNotFoundError(LabError):
    """A model named by a config cannot be resolved to weights on this machine."""


class CacheError(LabError):
    """A cache entry is damaged and can be neither set aside nor used."""


class RunFailedError(LabError):
    """A command finished, but the model calls it was for failed: ``lab run`` wrote a run in which
    every answer (or every judgement) failed, so that stage's metrics measure nothing; ``lab ask``
    has an answer that failed. Exit code 3, so that scripts and CI notice."""

    exit_code = 3
