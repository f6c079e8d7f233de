"""What ``manage.py demo`` tells its stories with: a fresh database, a journal of every
transition, and worker processes it may kill.

The journal hears the worker that runs in the demo's process through ``jobqueue.signals``
(sent on that worker's threads, queued here, printed on the main thread), and reads the
rows of the jobs that worker processes ran: signals fire only in the process that runs the
job, so for those the row's timestamps and ``errors`` entries tell what happened.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from jobqueue import signals, states
from jobqueue.models import Job
from jobqueue.runtime.worker import Worker
from jobqueue.store import explain

DIR_VARIABLE = "JOBQUEUE_DEMO_DIR"  # set once the demo runs on its own database
FINISHED = {states.SUCCEEDED, states.FAILED, states.ABANDONED, states.DISCARDED}
WIDTH = 100


def wrap(text: str, first: str, rest: str) -> str:
    # Paths and URLs stay whole, to be copied.
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


# -- a fresh database ---------------------------------------------------------------------


def prepared() -> bool:
    """Whether this process is the demo re-executed on its own database."""
    return DIR_VARIABLE in os.environ


def restart_on_fresh_database(database: str | None, argv: list[str]) -> NoReturn:
    """Run ``manage.py <argv>`` again, in this process, on ``database`` or a new SQLite file.

    Django reads ``DATABASE_URL`` once, when it sets up, so the demo cannot point itself at
    a new file afterwards; the new process (and every worker process it starts) inherits it.
    """
    directory = tempfile.mkdtemp(prefix="jobqueue-demo-")
    env = {
        **os.environ,
        DIR_VARIABLE: directory,
        "DATABASE_URL": database or f"sqlite:///{Path(directory) / 'demo.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "testproject.demo_settings",
    }
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, str(manage_py()), *argv], env)


def manage_py() -> Path:
    return Path(settings.BASE_DIR) / "manage.py"


def shell_path(path: str | Path) -> str:
    """``path`` as the user would type it from here: relative below the current directory."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def database_url() -> str:
    return os.environ["DATABASE_URL"]


# -- the journal ------------------------------------------------------------------------


@dataclass
class Event:
    at: dt.datetime
    job_id: int
    status: str
    text: str


class Journal:
    """One line per transition, each with the seconds since its story began."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.began = timezone.now()
        self.events: queue.Queue[Event] = queue.Queue()

    # Signals come from the worker's threads: they only queue, the main thread prints.
    def connect(self) -> None:
        signals.job_started.connect(self._started, weak=False)
        signals.job_finished.connect(self._finished, weak=False)
        signals.jobs_recovered.connect(self._recovered, weak=False)

    def disconnect(self) -> None:
        signals.job_started.disconnect(self._started)
        signals.job_finished.disconnect(self._finished)
        signals.jobs_recovered.disconnect(self._recovered)

    def _started(self, sender: Any, *, job_id: int, attempt: int, worker: str, **kw: Any) -> None:
        row = Job.objects.only("max_attempts").get(pk=job_id)
        text = f"attempt {attempt} of {row.max_attempts}, worker {worker}"
        self.events.put(Event(timezone.now(), job_id, states.RUNNING, text))

    def _finished(self, sender: Any, *, job_id: int, status: str, attempt: int, **kw: Any) -> None:
        # Read here, on the worker's thread, before the next attempt can change the row.
        row = Job.objects.get(pk=job_id)
        self.events.put(Event(timezone.now(), job_id, status, self.outcome(row, attempt)))

    def _recovered(self, sender: Any, *, jobs: list[signals.RecoveredJob], **kw: Any) -> None:
        for job in jobs:
            if job.status == states.ABANDONED:
                text = "parked by the demo's worker, which saw the lease run out"
            else:
                text = f"recovered by the demo's worker: {Job.objects.get(pk=job.id).last_error}"
            self.events.put(Event(timezone.now(), job.id, job.status, text))

    def outcome(self, row: Job, attempt: int) -> str:
        if row.status == states.SUCCEEDED:
            return f"result {row.result!r}"
        failed = f"attempt {attempt} failed: {row.last_error}"
        if row.status == states.PENDING:
            due = (row.run_at - row.updated_at).total_seconds()
            return f"{failed}; retry due at +{self.seconds(row.run_at):.2f} s (in {due:.2f} s)"
        return f"{failed}; no attempts left"

    # What the main thread prints.
    def story(self, number: int, title: str) -> None:
        self.write(f"\n{number}. {title}")
        self.began = timezone.now()

    def say(self, text: str, indent: int = 3) -> None:
        """A sentence of the story, wrapped under its first word."""
        self.write(wrap(text, " " * indent, " " * (indent + 2)))

    def line(self, event: Event) -> None:
        head = f"  {self.seconds(event.at):5.2f} s  #{event.job_id:<3} {event.status:<10} "
        self.write(wrap(event.text, head, " " * len(head)))

    def note(self, job_id: int, status: str, text: str, at: dt.datetime | None = None) -> None:
        self.line(Event(at or timezone.now(), job_id, status, text))

    def enqueued(self, job: Job, call: str) -> None:
        self.note(job.id, job.status, f"{call} enqueued on queue {job.queue}", job.enqueued_at)

    def follow(self, job_id: int, until: set[str], timeout: float) -> Event:
        """Print the events as they come until ``job_id`` reaches one of ``until``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                message = f"job {job_id} did not reach {sorted(until)} in {timeout} s"
                raise CommandError(message) from None
            self.line(event)
            if event.job_id == job_id and event.status in until:
                return event

    def seconds(self, at: dt.datetime) -> float:
        return (at - self.began).total_seconds()


def wait_for(condition: Callable[[], Any], what: str, timeout: float) -> Any:
    """``condition()``'s first true value, looked at every 20 ms, or a CommandError."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise CommandError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.02)
    return value


def latest_crash(row: Job) -> dict[str, Any]:
    return next(entry for entry in reversed(row.errors) if explain.is_crash(entry))


# -- workers --------------------------------------------------------------------------


class InProcessWorker:
    """The ``default`` pool's worker, on a thread of the demo's process."""

    def __init__(self) -> None:
        self.worker = Worker(pool="default", shutdown_timeout=5)
        self.thread = threading.Thread(target=self.worker.run, name="demo-worker")

    def __enter__(self) -> InProcessWorker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self.thread.join()


class WorkerProcesses:
    """``runjobs --pool killable`` processes, their output appended to the demo's log."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as output:
            proc = subprocess.Popen(
                [sys.executable, str(manage_py()), "runjobs", "--pool", "killable"],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.started.append(proc)
        return proc

    def live(self) -> subprocess.Popen[bytes]:
        """The worker process still running, or a new one."""
        running = [proc for proc in self.started if proc.poll() is None]
        return running[-1] if running else self.start()

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.started:
            proc.wait(timeout=15)
