"""The worker's parts on their own: the due times, the maintenance chores and the loop's
events, each through its public methods."""

import logging
import threading
import time

import pytest
from django.db import OperationalError

from jobqueue.runtime import maintenance
from jobqueue.runtime.due import Due
from jobqueue.runtime.maintenance import Maintenance, Prune, Rescue
from jobqueue.runtime.outage import Health
from jobqueue.runtime.service import Control
from jobqueue.store.jobs import Store
from jobqueue.supervisor.supervisor import Supervisor
from tests.storage.test_recovery import expired_running

pytestmark = pytest.mark.django_db(transaction=True)


def test_due_times_fall_due_in_order_and_once():
    due = Due()
    assert due.earliest() is None
    before = time.monotonic()
    due.add(30)
    due.add(5)
    after = time.monotonic()
    assert before + 5 <= due.earliest() <= after + 5
    assert not due.pop_due(before)
    assert due.pop_due(after + 5)
    assert not due.pop_due(after + 5)  # forgotten once it fell due
    assert before + 30 <= due.earliest() <= after + 30


class Chore:
    def __init__(self, every):
        self.every = every
        self.runs = []

    def run(self, now):
        self.runs.append(now)
        return now + self.every


def test_each_chore_runs_at_start_then_on_its_own_timer():
    fast, slow = Chore(1), Chore(10)
    chores = Maintenance([fast, slow])
    chores.start(100)
    assert chores.next_at() == 100
    chores.run_due(100)
    assert chores.next_at() == 101
    chores.run_due(100.5)  # nothing is due yet
    chores.run_due(101)
    assert (fast.runs, slow.runs) == ([100, 101], [100])
    assert chores.next_at() == 102


class AwayStore(Store):
    """A store whose maintenance statements find the database away."""

    def prune(self, **kwargs):
        raise OperationalError("the database is away")

    def rescue_pass(self):
        raise OperationalError("the database is away")


def test_a_chore_meets_an_outage_through_health_and_tries_again_later(caplog):
    health = Health("worker w1")
    store = AwayStore()
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        assert Prune(store=store, worker="w1", health=health).run(50) == (
            50 + maintenance.PRUNE_INTERVAL
        )
        rescue = Rescue(store=store, worker="w1", health=health, control=Control(), interval=7)
        assert rescue.run(50) == 57
    assert health.down
    # One line for the outage, whichever chore met it first; no traceback.
    assert caplog.text.count("database unavailable") == 1
    assert "Traceback" not in caplog.text


def test_a_rescue_that_makes_jobs_pending_wakes_the_loop():
    [job] = expired_running()
    control = Control()
    rescue = Rescue(store=Store(), worker="w1", health=Health("w1"), control=control, interval=1)
    assert not control.sleep(time.monotonic())  # nothing woke it yet
    rescue.run(time.monotonic())
    job.refresh_from_db()
    assert job.status == "pending"
    assert control.sleep(time.monotonic())  # woken by the rescue


def test_a_wake_before_the_sleep_ends_it_at_once_and_a_stop_wakes():
    control = Control()
    control.wake()
    assert control.sleep(time.monotonic() + 30)
    assert not control.sleep(time.monotonic() + 0.01)  # cleared by the sleep it ended
    threading.Timer(0.05, control.stop).start()
    assert control.sleep(time.monotonic() + 30)
    assert control.stopping
    assert control.wait_for_stop(0)


def test_the_supervisor_stops_through_the_shared_base():
    supervisor = Supervisor()
    assert not supervisor.stopping
    supervisor.stop()
    assert supervisor.stopping
    assert supervisor.run() == 0  # stopped before its first turn: it only shuts down
