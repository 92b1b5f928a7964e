"""Versioned prompt files: ``lab/prompts/<name>.txt``, one per prompt version.

A file holds a comment header (lines starting with ``#``) and two sections, ``=== system`` and
``=== user``, whose ``{placeholders}`` are filled with :meth:`Prompt.messages`. The file name is
the version, recorded with every answer and judgement, together with a hash of the file's text,
so an edited prompt is visible in results. A new idea is a new file, as with configs.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ConfigError
from lab.registry import did_you_mean

PROMPTS_DIR = Path(__file__).parent
_SECTION = re.compile(r"^=== (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Prompt:
    version: str
    sha256: str  # of the file's text, first 12 hex digits
    system: str
    user: str

    @property
    def fields(self) -> set[str]:
        return {f for text in (self.system, self.user) for _, f, _, _ in string.Formatter().parse(text) if f}

    def messages(self, **values: str) -> list[dict]:
        """Chat messages with the placeholders filled; every placeholder must be given."""
        missing = self.fields - set(values)
        if missing:
            raise KeyError(f"prompt {self.version} needs {sorted(missing)}")
        return [
            {"role": "system", "content": self.system.format(**values)},
            {"role": "user", "content": self.user.format(**values)},
        ]


    def head(self, field: str, **values: str) -> int:
        """How many characters of the user message come before placeholder ``field``, filled
        with ``values`` (those of the placeholders before it): a head that every call with
        those values shares."""
        return len(self.user[: self.user.index("{" + field + "}")].format(**values))


def available() -> list[str]:
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))


def load_prompt(name: str, needs: set[str] | None = None, where: str = "prompt") -> Prompt:
    """Load ``lab/prompts/<name>.txt``; ``needs`` are placeholders the caller will fill."""
    path = PROMPTS_DIR / f"{name}.txt"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or not path.is_file():
        raise ConfigError(
            f"{where}: no prompt {name!r} in {PROMPTS_DIR}",
            hint=did_you_mean(name, available()) + f"available: {', '.join(available())}",
        )
    text = path.read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    parts = _SECTION.split(body)
    sections = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    if set(sections) != {"system", "user"}:
        raise ConfigError(f"{path}: a prompt file needs a '=== system' and a '=== user' section")
    prompt = Prompt(name, hashlib.sha256(text.encode()).hexdigest()[:12], sections["system"], sections["user"])
    if needs is not None and prompt.fields - needs:
        raise ConfigError(
            f"{path}: unknown placeholders {sorted(prompt.fields - needs)}",
            hint=f"{where} can fill {sorted(needs)}",
        )
    return prompt
