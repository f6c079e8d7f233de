"""The worker names pending jobs of unregistered tasks from its maintenance timer."""

import logging
import threading

import pytest
from django.db import connection

from bench.counting import StatementCounter
from jobqueue.models import Job
from jobqueue.runtime import maintenance
from jobqueue.runtime.worker import EXIT_OK, Worker
from jobqueue.sql import load
from tests.conftest import wait_for
from tests.factories import JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def statement_names():
    return {sql: name for name, sql in load(connection.vendor).items()}


def test_the_worker_names_them_once_at_start_not_once_per_claim(caplog):
    JobFactory.create_batch(3, task_name="shop.other.send")
    tasks.add.enqueue_many([(i, i) for i in range(10)])
    names = statement_names()
    with (
        caplog.at_level(logging.DEBUG, logger="jobqueue"),
        StatementCounter(lambda sql: names.get(sql, "other")) as counter,
    ):
        assert Worker(burst=True, concurrency=1, prefetch=0).run() == EXIT_OK
    assert Job.objects.filter(status="succeeded").count() == 10
    assert counter.counts["claim"] >= 10  # one claim per job on one slot, without prefetch
    assert counter.counts["unregistered_pending"] == 1
    [warning] = [r for r in caplog.records if "no live worker has registered" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "3 pending job(s) of task(s) no live worker has registered: shop.other.send (3)." in (
        warning.getMessage()
    )
    # The start-up log at DEBUG names the registered tasks, not only their count.
    assert any(
        "registered task(s):" in r.getMessage() and tasks.add.name in r.getMessage()
        for r in caplog.records
    )


def test_the_worker_names_them_again_on_its_timer(monkeypatch, caplog):
    monkeypatch.setattr(maintenance, "UNREGISTERED_INTERVAL", 0.2)
    JobFactory(task_name="shop.other.send")
    worker = Worker(concurrency=1)
    thread = threading.Thread(target=worker.run)
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        thread.start()
        try:
            wait_for(
                lambda: caplog.text.count("shop.other.send (1)") >= 2,
                message="a second warning from the timer",
            )
        finally:
            worker.stop()
            thread.join(30)


def test_nothing_is_logged_when_every_pending_job_has_a_live_worker(caplog):
    tasks.add.enqueue(1, 2)
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        assert Worker(burst=True, concurrency=1).run() == EXIT_OK
    assert "no live worker has registered" not in caplog.text
