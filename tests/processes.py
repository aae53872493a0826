"""The processes a test can see on this machine (the sandbox's tests: nothing a command started
outlives its run)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(token: str) -> int:
    """Processes still alive (zombies aside: they run nothing) whose command line holds `token`:
    a run's own, whatever other tests run meanwhile."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in cmdline and state != "Z":
            count += 1
    return count
