"""The SQLite watcher: another connection's commit calls it, nothing else does, and
``Service`` gives it to a worker and a supervisor on a SQLite file only."""

import logging
import threading
import time

import pytest
from django.db import connection

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.runtime.listener import Listener
from jobqueue.runtime.service import Service
from jobqueue.runtime.watcher import Watcher
from jobqueue.sql import Queries
from jobqueue.store.jobs import Store
from jobqueue.supervisor.supervisor import Supervisor
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sqlite_only(vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL has LISTEN")


class Changes:
    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.count += 1


@pytest.fixture
def watched(sqlite_only):
    changes = Changes()
    watcher = Watcher(path=Queries("default").database_file(), on_change=changes)
    watcher.start()
    assert watcher.connected.wait(5), "the watcher never opened the database"
    # Its first look at the version calls on_change once: a commit just before is not lost.
    wait_for(lambda: changes.count == 1, timeout=5, message="the first call")
    yield watcher, changes
    watcher.stop()


def test_a_commit_from_another_connection_calls_it(watched):
    _, changes = watched
    tasks.noop.enqueue("from the test's connection")
    wait_for(lambda: changes.count >= 2, timeout=2, interval=0.01, message="the commit seen")


def test_reads_and_writes_that_change_nothing_call_nothing(watched):
    _, changes = watched
    # What an idle worker sends between its own commits: an empty claim must not wake the
    # loop that sent it, or every look would cause the next one.
    for _ in range(3):
        assert Job.objects.filter(status="pending").count() == 0
        assert Job.objects.filter(pk=-1).update(status="running") == 0
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobqueue_job WHERE id = -1")
        time.sleep(0.15)
    time.sleep(0.3)
    assert changes.count == 1


def test_stop_ends_the_thread_at_once(watched):
    watcher, _ = watched
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 0.5
    assert not watcher._thread.is_alive()
    assert not watcher.connected.is_set()


def test_a_file_it_cannot_open_is_said_once_and_retried(sqlite_only, tmp_path, caplog):
    changes = Changes()
    watcher = Watcher(path=str(tmp_path / "absent" / "db.sqlite3"), on_change=changes)
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        watcher.start()
        time.sleep(0.6)  # a few retries
        watcher.stop()
    warnings = [r.getMessage() for r in caplog.records if "cannot watch" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert changes.count == 0 and not watcher.connected.is_set()


def test_each_database_gets_its_listener(vendor, monkeypatch):
    settings = conf.get()
    store = Store("default", settings)
    on_demand = conf.build({"POOLS": {"default": {"queues": "*", "resident": False}}})
    if vendor == "mysql":
        # No LISTEN, no file to watch: MySQL's workers and supervisor poll.
        assert Service(store=store, settings=settings).listener is None
        assert Supervisor(settings=on_demand).listener is None
        return
    expected = Listener if vendor == "postgresql" else Watcher
    assert isinstance(Service(store=store, settings=settings).listener, expected)
    assert isinstance(Supervisor(settings=on_demand).listener, expected)
    assert Service(store=store, settings=settings, listen=False).listener is None
    if vendor == "sqlite":
        # No other process can reach an in-memory database: nothing to watch.
        memory = "file:memorydb_default?mode=memory&cache=shared"
        monkeypatch.setitem(connection.settings_dict, "NAME", memory)
        assert Queries("default").database_file() is None
        assert Service(store=Store("default", settings), settings=settings).listener is None
