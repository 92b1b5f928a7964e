"""Which device a model runs on: ``auto`` picks CUDA, then Apple's MPS, then the CPU; ``cpu``,
``cuda`` or ``mps`` force one (a forced accelerator that is not there is an error, never a silent
fall back to the CPU).

The device changes how fast vectors and scores come, not their keys: the embedding cache, the
index key and a config's fingerprint leave it out (a config that writes ``device: cpu`` is another
config, so its fingerprint differs from the same config without it). Vectors computed on a GPU
differ from the CPU's in the last bits (float32 kernels sum in another order); the figure measured
on SciFact's corpus is in docs/public-benchmarks.md. A run records the device it used in
``results.json`` (``devices``), and a tuned model its card (``device``).
"""

from __future__ import annotations

import logging
from typing import Any

from lab.errors import ConfigError

log = logging.getLogger(__name__)

#: What a config or ``lab tune --device`` may name.
DEVICES = ("auto", "cpu", "cuda", "mps")


def _torch() -> Any:
    import torch  # heavy: deferred to the first model that needs a device

    return torch


def available() -> dict[str, bool]:
    """Whether this machine has each accelerator, as torch sees it."""
    torch = _torch()
    mps = getattr(torch.backends, "mps", None)
    return {"cuda": bool(torch.cuda.is_available()), "mps": bool(mps is not None and mps.is_available())}


def pick_device(requested: str | None = "auto", where: str = "device") -> str:
    """The device to load a model on: ``requested`` when forced, else (``auto`` or None) CUDA,
    then MPS, then the CPU. A forced accelerator this machine lacks is a ConfigError naming
    ``where`` (the config field or option)."""
    wanted = requested or "auto"
    if wanted not in DEVICES:
        raise ConfigError(f"{where}: unknown device {wanted!r}", hint=f"use one of {', '.join(DEVICES)}")
    if wanted == "cpu":
        return "cpu"
    found = available()
    if wanted == "auto":
        return "cuda" if found["cuda"] else "mps" if found["mps"] else "cpu"
    if not found[wanted]:
        raise ConfigError(f"{where}: {wanted} was asked for, and torch finds no {wanted.upper()} device here",
                          hint="write device: auto (the best device there is) or device: cpu")
    return wanted


def describe(device: str) -> str:
    """The device in words for results and cards: ``cuda`` with the card's name (``cuda (NVIDIA
    H100 80GB HBM3)``), else its name alone."""
    if device == "cuda":
        try:
            return f"cuda ({_torch().cuda.get_device_name(0)})"
        except Exception:  # the name is for people; a driver that cannot give it changes nothing
            return "cuda"
    return device


def device_record(requested: str | None) -> dict:
    """``{"asked": ..., "used": ...}`` of a model loaded with :func:`pick_device` (a cross-encoder
    reranker's, in results.json)."""
    return {"asked": requested or "auto", "used": describe(pick_device(requested))}
