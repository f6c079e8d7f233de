"""Fixtures shared by every test: the database vendor, waits with deadlines, real workers."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection, connections

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


def pg_cluster() -> tuple[str, str] | None:
    """The local cluster that tests stopping or restarting PostgreSQL control, as
    ``(version, name)``: ``JOBQUEUE_PG_CLUSTER`` ("15 chaos"), else the cluster whose port
    serves the test database (through PgBouncer: ``DATABASE_DIRECT_URL``'s port). None if
    there is none (no ``pg_ctlcluster`` here, a remote server)."""
    named = os.environ.get("JOBQUEUE_PG_CLUSTER", "").split()
    if len(named) == 2:
        return named[0], named[1]
    direct = os.environ.get("DATABASE_DIRECT_URL")
    settings = connection.settings_dict
    host = urlsplit(direct).hostname if direct else settings.get("HOST")
    port = str((urlsplit(direct).port if direct else settings.get("PORT")) or 5432)
    if host not in ("127.0.0.1", "localhost", "::1", "", None):
        return None
    try:
        listed = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in listed.splitlines():
        version, name, cluster_port, *_ = line.split()
        if cluster_port == port:
            return version, name
    return None


@pytest.fixture
def pg_ctl(postgresql_only: None) -> Callable[[str], None]:
    """``pg_ctl("stop" | "start" | "restart")`` on the cluster of :func:`pg_cluster`."""
    cluster = pg_cluster()
    if cluster is None:
        pytest.skip("needs a local pg_ctlcluster-managed server (or JOBQUEUE_PG_CLUSTER)")

    def control(action: str) -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", *cluster, action],
            check=True,
            capture_output=True,
            timeout=60,
        )

    return control


def database_is_back() -> bool:
    """True once the test database accepts a new connection (after ``pg_ctl``)."""
    connection.close()
    try:
        connection.ensure_connection()
        return True
    except Exception:
        return False


BEHIND_PGBOUNCER = os.environ.get("DATABASE_POOLER") == "pgbouncer"


@pytest.fixture
def pgbouncer_url(postgresql_only: None) -> str:
    """The test database through PgBouncer in transaction mode (``DATABASE_URL`` under
    ``DATABASE_POOLER=pgbouncer``, as in ``tox -e py312-django61-pgbouncer``)."""
    if not BEHIND_PGBOUNCER:
        pytest.skip("needs PgBouncer: DATABASE_POOLER=pgbouncer with DATABASE_URL through it")
    settings = connection.settings_dict
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


def _pgbouncer_release(database: str) -> None:
    """Make PgBouncer close its server connections to ``database``, idle in its pool, which
    would keep PostgreSQL from dropping it ("being accessed by other users")."""
    import psycopg

    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/pgbouncer"
    try:
        # The admin console: KILL drops the connections and pauses the database, RESUME
        # lets clients in again. Unknown to PgBouncer (never used) is fine too.
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"KILL {database}")
            admin.execute(f"RESUME {database}")
    except psycopg.Error:
        pass


def _test_database_name() -> str:
    settings = connection.settings_dict
    return (settings.get("TEST") or {}).get("NAME") or f"test_{settings['NAME']}"


@pytest.fixture(scope="session")
def _pgbouncer_pool_emptied() -> None:
    """Before the test database is made: a run that was killed may have left PgBouncer holding
    connections to the old one, which Django drops first."""
    if BEHIND_PGBOUNCER:
        _pgbouncer_release(_test_database_name())


@pytest.fixture(scope="session")
def django_db_setup(_pgbouncer_pool_emptied: None, django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database, and under ``DATABASE_POOLER=pgbouncer`` what the pooler
    needs: its pool emptied before the drop, and ``DATABASE_DIRECT_URL`` (the worker's LISTEN
    address) naming the test database rather than the one it replaces, since a NOTIFY is
    heard only by listeners on the same database."""
    if not BEHIND_PGBOUNCER:
        yield
        return
    direct = os.environ.get("DATABASE_DIRECT_URL")
    if direct:
        os.environ["DATABASE_DIRECT_URL"] = urlunsplit(
            urlsplit(direct)._replace(path=f"/{connection.settings_dict['NAME']}")
        )
    yield
    if direct:
        os.environ["DATABASE_DIRECT_URL"] = direct
    connections.close_all()
    _pgbouncer_release(connection.settings_dict["NAME"])


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


def listen_for_jobs() -> Any:
    """A psycopg connection that LISTENs where a worker does (PostgreSQL only): on the
    database itself, even when Django's connections go through PgBouncer."""
    import psycopg

    from jobqueue.runtime.listener import connection_target
    from jobqueue.store.channel import NOTIFY_CHANNEL

    url, params = connection_target("default", None)
    listener = psycopg.connect(url, autocommit=True, **params)
    listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
    return listener


def notifications(listener: Any, wait: float = 0.3) -> list[tuple[str, str]]:
    """The ``(channel, payload)`` pairs ``listener`` received within ``wait`` seconds."""
    select.select([listener.fileno()], [], [], wait)
    return [(n.channel, n.payload) for n in listener.notifies(timeout=0.05, stop_after=100)]
