"""What ``/proc`` says about the processes on this host (Linux, as the bench and soak need)."""

from __future__ import annotations

import os
from pathlib import Path


def pids() -> list[int]:
    """The pid of every process now."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def command(pid: int) -> str | None:
    """The process's command name (``postgres``), None if it is gone or not ours to read."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name, None if the process is gone.

    Numbered from 0: state 0, ppid 1, utime, stime, cutime and cstime 11-14, starttime 19
    (proc(5) numbers them from 1 with the pid and the command name first).
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces or ")": split after the last.
    return text[text.rindex(")") + 2 :].split()
