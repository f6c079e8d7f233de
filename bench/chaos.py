"""What the soak does to a running system: the supervisor process, its workers, the server.

Everything here acts on real processes with real signals; nothing is simulated.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench import procfs
from bench.systems.base import REPO


@dataclass(frozen=True)
class Process:
    """A pid and its start time: a pid the kernel reused is not the same process."""

    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> Process | None:
        stat = procfs.stat(pid)
        return None if stat is None else cls(pid, int(stat[19]))

    def alive(self) -> bool:
        stat = procfs.stat(self.pid)
        # An orphan nobody reaps stays a zombie: it has exited all the same.
        return stat is not None and int(stat[19]) == self.started and stat[0] != "Z"


def children(parent: int) -> list[Process]:
    """The live child processes of ``parent``, from /proc."""
    found = []
    for pid in procfs.pids():
        stat = procfs.stat(pid)
        if stat is not None and stat[0] != "Z" and int(stat[1]) == parent:
            found.append(Process(pid, int(stat[19])))
    return found


class SupervisorProcess:
    """One ``manage.py runjobs`` (the supervisor of every pool), its output in ``log``."""

    started: ClassVar[list[SupervisorProcess]] = []  # every one, to stop them all at the end

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.started.append(self)
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "django", "runjobs"],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the soak does not reach it, and the
                # soak decides when and how it stops.
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def workers(self) -> list[Process]:
        return children(self.proc.pid)

    def kill(self) -> list[Process]:
        """SIGKILL the supervisor alone; return the workers it leaves orphaned."""
        orphans = self.workers()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        return orphans

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM and wait: the supervisor stops its workers, handing their jobs back."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def signal_process(process: Process, signum: int) -> bool:
    """Send ``signum`` if ``process`` is still the same live process; False if it is gone."""
    if not process.alive():
        return False
    try:
        os.kill(process.pid, signum)
    except ProcessLookupError:
        return False
    return True


class Cluster:
    """A local PostgreSQL cluster under ``pg_ctlcluster``: ``"15 chaos"``, ``"15 main"``."""

    def __init__(self, name: str) -> None:
        parts = name.split()
        if len(parts) != 2:
            raise ValueError(f"a cluster is '<version> <name>', such as '15 main': {name!r}")
        self.version, self.name = parts
        self._restart: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.failures: list[str] = []

    def __str__(self) -> str:
        return f"{self.version} {self.name}"

    @classmethod
    def serving(cls, port: int) -> Cluster:
        """The cluster listening on ``port``, from ``pg_lsclusters``."""
        listing = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[2] == str(port):
                return cls(f"{fields[0]} {fields[1]}")
        raise LookupError(f"no local PostgreSQL cluster listens on port {port} (pg_lsclusters)")

    def start_restart(self) -> None:
        """Begin ``pg_ctlcluster ... restart`` without waiting: the chaos goes on meanwhile."""
        self._restart = subprocess.Popen(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "restart"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.restarts += 1

    def restarting(self) -> bool:
        """True while a restart runs; a failed one is recorded in ``failures``."""
        if self._restart is None:
            return False
        if self._restart.poll() is None:
            return True
        if self._restart.returncode != 0:
            output = (
                self._restart.stdout.read().decode(errors="replace") if self._restart.stdout else ""
            )
            self.failures.append(f"exit status {self._restart.returncode}: {output.strip()}")
        self._restart = None
        return False

    def wait(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.restarting():
            if time.monotonic() > deadline:
                raise TimeoutError(f"pg_ctlcluster restart of {self} took over {timeout:g} s")
            time.sleep(0.1)
