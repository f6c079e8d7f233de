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


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds of the process and of the children it has waited for (utime, stime,
    cutime, cstime), None if it is gone. A zombie still has them: read it before it is reaped."""
    fields = stat(pid)
    if fields is None:
        return None
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float | None:
    """CPU seconds spent so far by the postgres processes on this host, with the backends
    that have ended (in the postmaster's count of its children); None if none runs here."""
    total, found = 0.0, False
    for pid in pids():
        if command(pid) != "postgres":
            continue
        seconds = cpu_seconds(pid)
        if seconds is None:  # gone meanwhile
            continue
        total += seconds
        found = True
    return total if found else None


def rss_kib(pid: int) -> tuple[int, int] | None:
    """The process's resident set now and at its peak (``VmRSS``, ``VmHWM``), in KiB;
    None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def descendants(pid: int) -> list[int]:
    """The pids of the process's children, their children and so on, now."""
    children: dict[int, list[int]] = {}
    for other in pids():
        fields = stat(other)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(other)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found
