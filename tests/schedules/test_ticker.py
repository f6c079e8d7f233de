"""The worker's ticker with a controlled wall clock: it sleeps until the next tick, sends no
statement before it, evaluates what is due, and survives the database going away."""

import datetime as dt
import math
import time

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobqueue import conf
from jobqueue.models import Job, Schedule
from jobqueue.runtime.outage import Health
from jobqueue.runtime.ticker import Ticker

pytestmark = pytest.mark.django_db(transaction=True)

UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC)


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += dt.timedelta(seconds=seconds)


def within(ahead, call):
    """``call()``, a monotonic time, checked to be ``ahead`` seconds after the moment of the
    call (whenever in it the callee read the clock)."""
    before = time.monotonic()
    value = call()
    after = time.monotonic()
    assert before + ahead - 0.001 <= value <= after + ahead + 0.001
    return value


def ticker(clock, schedules=None, health=None):
    if schedules is None:
        schedules = {"ping": {"task": "tests.testapp.tasks.add", "every": 10, "args": [1, 2]}}
    settings = conf.build({"SCHEDULES": schedules})
    return Ticker(settings, "default", health or Health("worker test"), clock=clock)


def test_without_schedules_there_is_no_timer():
    t = ticker(Clock(T0), schedules={})
    t.start()
    assert t.next_at() == math.inf


def test_the_next_tick_is_a_timer_and_nothing_is_sent_before_it():
    clock = Clock(T0)
    t = ticker(clock)
    t.start()
    assert Schedule.objects.get().next_tick == T0 + dt.timedelta(seconds=5)
    within(5, t.next_at)

    clock.advance(4.9)
    with CaptureQueriesContext(connection) as queries:
        within(0.1, lambda: t.run(time.monotonic()))
    assert len(queries) == 0
    assert not Job.objects.exists()


def test_a_due_tick_is_enqueued_and_the_timer_moves_to_the_next():
    clock = Clock(T0)
    t = ticker(clock)
    t.start()
    clock.advance(5.01)
    within(9.99, lambda: t.run(time.monotonic()))
    job = Job.objects.get()
    assert job.run_at == T0 + dt.timedelta(seconds=5)


def test_a_tick_another_worker_won_is_not_enqueued_again():
    clock = Clock(T0)
    first, second = ticker(clock), ticker(clock)
    first.start()
    second.start()
    clock.advance(5.01)
    first.run(time.monotonic())
    # The loser reads the row's next tick and sleeps until it.
    within(9.99, lambda: second.run(time.monotonic()))
    assert Job.objects.count() == 1


def test_a_schedule_whose_task_this_worker_lacks_is_left_to_others(caplog):
    t = ticker(Clock(T0), schedules={"x": {"task": "not.registered", "every": 10}})
    t.start()
    assert t.next_at() == math.inf
    assert not Schedule.objects.exists()
    assert "task not.registered is not registered in this worker" in caplog.text


@pytest.mark.usefixtures("postgresql_only")
def test_a_database_outage_is_retried_and_never_raises(caplog):
    clock = Clock(T0)
    health = Health("worker test")
    t = ticker(clock, health=health)
    t.start()
    clock.advance(5.01)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    now = time.monotonic()
    after = t.run(now)  # the ticker's connection is dead
    assert health.down
    assert "database unavailable" in caplog.text and "evaluating schedule ping" in caplog.text
    assert after >= now + 0.4  # the outage backoff, not a busy loop
    assert not Job.objects.exists()

    t.run(after)  # the connection was closed: the next try opens a fresh one
    assert Job.objects.get().run_at == T0 + dt.timedelta(seconds=5)


def test_during_a_rolling_deploy_the_old_settings_do_not_undo_the_new(caplog):
    clock = Clock(T0)
    entry = {"task": "tests.testapp.tasks.add", "args": [1, 2]}
    old = ticker(clock, schedules={"ping": {**entry, "every": 10}})
    new = ticker(clock, schedules={"ping": {**entry, "every": 60}})
    old.start()  # reads 12:00:10
    new.start()  # the deploy: recomputed from now, 12:01:00
    assert Schedule.objects.get().definition == "every 60"

    clock.advance(5.01)  # 12:00:10, the old worker's tick
    # Left to the new settings: it looks again at the row's next tick, and loses that too.
    within(49.99, lambda: old.run(time.monotonic()))
    assert not Job.objects.exists()
    assert Schedule.objects.get().definition == "every 60"
    assert caplog.text.count("leaving it to the workers with those settings") == 1

    clock.advance(50)  # 12:01:00: the new worker's tick is the one that runs
    new.run(time.monotonic())
    assert Job.objects.get().run_at == T0 + dt.timedelta(seconds=55)
    old.run(time.monotonic())
    assert Job.objects.count() == 1
    assert Schedule.objects.get().definition == "every 60"
    assert caplog.text.count("leaving it to the workers with those settings") == 1
