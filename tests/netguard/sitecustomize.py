"""Loaded by the interpreter of end-to-end runs (tests put this folder on PYTHONPATH): every
connection to a non-loopback address is refused and written to $LAB_NETGUARD_LOG, so a test
can prove that a run reached for no network."""

import os
import socket

_connect = socket.socket.connect


def _guarded(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1") or host.startswith("/")):
        with open(os.environ["LAB_NETGUARD_LOG"], "a") as fh:
            fh.write(f"{host}\n")
        raise OSError(f"network blocked by the test guard: {host}")
    return _connect(self, address)


if os.environ.get("LAB_NETGUARD_LOG"):
    socket.socket.connect = _guarded
