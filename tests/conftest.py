"""Fixtures shared by every test: the database vendor, waits with deadlines, real workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

# The test kit's fixtures (jobqueue_captured, jobqueue_enqueued, jobqueue_run), as users add them.
pytest_plugins = ["jobqueue.pytest_plugin"]

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI") == "true"


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float = 10,
    interval: float = 0.02,
    message: str = "condition",
) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


@pytest.fixture
def vendor() -> str:
    return connection.vendor


@pytest.fixture
def postgresql_only(vendor: str) -> None:
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only; run with DATABASE_URL=postgres://...")


class WorkerProcess:
    """A real ``manage.py runjobs`` process against the test database."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runjobs", *args],
            env=env,
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Its own process group, as under a terminal or a service manager: a signal
            # sent to the group (Ctrl-C) reaches it and its children, not pytest.
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def signal_group(self, signum: int) -> None:
        """What Ctrl-C in a terminal, or systemd's default KillMode, does."""
        os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@pytest.fixture
def start_worker(transactional_db: None, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real worker processes: ``start_worker("--concurrency", "2", settings={...})``."""
    started: list[WorkerProcess] = []

    def start(
        *args: str, settings: dict[str, Any] | None = None, supervisor: bool = False
    ) -> WorkerProcess:
        """One worker of the "default" pool, or with ``supervisor=True`` bare ``runjobs``."""
        if not supervisor and "--pool" not in args:
            args = ("--pool", "default", *args)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
            "JOBQUEUE_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "JOBQUEUE_TEST_SETTINGS": json.dumps(settings or {}),
            "PYTHONUNBUFFERED": "1",
        }
        worker = WorkerProcess(list(args), env, tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    for worker in started:
        # Shown by pytest only when the test failed.
        print(f"----- {worker.log_path.name} (pid {worker.pid}) -----\n{worker.output()}")
