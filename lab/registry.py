"""One registry per kind of component, one canonical name per component."""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterable, TypeVar

from lab.errors import ConfigError

T = TypeVar("T")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the closest of ``choices``, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


class Registry(Generic[T]):
    """Maps canonical names to builders; unknown names fail with suggestions."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = item
            return item

        return decorator

    def names(self) -> list[str]:
        return sorted(self._items)

    def check(self, name: str, where: str = "") -> None:
        """Raise a ConfigError naming the valid choices if ``name`` is unknown."""
        if name in self._items:
            return
        hint = did_you_mean(name, self._items)
        prefix = f"{where}: " if where else ""
        raise ConfigError(
            f"{prefix}unknown {self.kind} {name!r}",
            hint=f"{hint}valid {self.kind} names: {', '.join(self.names())}",
        )

    def get(self, name: str, where: str = "") -> T:
        self.check(name, where)
        return self._items[name]

    def __contains__(self, name: str) -> bool:
        return name in self._items
