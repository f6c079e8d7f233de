"""Handlers that misbehave, on a real worker process with one slot.

Each bad job ends failed (never running) after exactly its own attempts, with an error that
says what happened, and the ordinary jobs queued between them all succeed on the same slot:
no handler and no value breaks the worker or strands a job. One worker runs every case.
"""

import datetime as dt
import signal

import pytest
from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.store.errors import LAST_ERROR_LIMIT, MESSAGE_LIMIT, TRACEBACK_LIMIT
from tests.conftest import wait_for
from tests.factories import JobFactory
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

LEFT = "jobqueue.runtime.attempt.HandlerLeftTransaction"
MALFORMED = "jobqueue.runtime.attempt.MalformedArguments"

# task -> (error type, words in every error message of its two attempts)
FAILING = {
    tasks.leaves_atomic_open: (
        LEFT,
        "the handler returned with a transaction still open on database 'default'",
    ),
    tasks.leaves_autocommit_off: (
        LEFT,
        "the handler returned with autocommit turned off on database 'default'",
    ),
    tasks.returns_nul: ("TypeError", "NUL"),
    tasks.returns_lone_surrogate: ("TypeError", "surrogate"),
    tasks.returns_huge_int: ("TypeError", "integer"),
    tasks.raises_unprintable: ("tests.testapp.tasks.Unprintable", "str() of the Unprintable"),
    tasks.raises_nul_message: ("ValueError", "a NUL \\x00 and a lone surrogate \\udc80"),
    tasks.raises_huge_message: ("ValueError", "characters cut"),
}


def test_misbehaving_handlers_fail_alone_and_the_slot_runs_on(start_worker):
    bad: dict[int, object] = {}
    ordinary = []
    for task in FAILING:
        bad[task.enqueue().pk] = task
        ordinary.append(tasks.noop.enqueue("after").pk)
    snoozed = tasks.snoozes_forever.enqueue().pk
    ordinary.append(tasks.noop.enqueue("after").pk)
    backed_off = tasks.backs_off_forever.enqueue().pk
    ordinary.append(tasks.noop.enqueue("after").pk)
    # Rows edited by hand: args that are not a list, kwargs that are not a dict.
    tampered = [
        JobFactory(args={"a": 1, "b": 2}).pk,
        JobFactory(args="12").pk,
        JobFactory(args=[1, 2], kwargs=[3]).pk,
    ]
    ordinary.append(tasks.noop.enqueue("after").pk)

    worker = start_worker("--concurrency", "1", settings={"POLL_INTERVAL": 0.1})
    everything = [*bad, snoozed, backed_off, *tampered, *ordinary]
    wait_for(
        lambda: (
            not Job.objects.filter(pk__in=everything, run_at__lte=timezone.now())
            .exclude(status__in=("succeeded", "failed"))
            .exists()
        ),
        timeout=90,
        interval=0.2,
        message="every due job to finish",
    )
    # Absurd delays are clamped to MAX_DELAY, ten years: pending, due then, nothing lost.
    ten_years = timezone.now() + dt.timedelta(seconds=conf.MAX_DELAY)
    for pk, attempts in ((snoozed, 0), (backed_off, 1)):
        row = Job.objects.get(pk=pk)
        assert (row.status, row.attempts) == ("pending", attempts)
        assert abs(row.run_at - ten_years) < dt.timedelta(hours=1)
    # Ten years on, the one that backs off runs its last attempt and fails for good.
    Job.objects.filter(pk=backed_off).update(run_at=timezone.now())

    # The slot is still good, and on SQLite no forgotten transaction holds the write lock:
    # this enqueue (a write from another process) and its run go through at once.
    last = tasks.noop.enqueue("last").pk
    wait_for(
        lambda: (
            Job.objects.get(pk=last).status == "succeeded"
            and Job.objects.get(pk=backed_off).status == "failed"
        ),
        timeout=30,
        message="a job enqueued afterwards to succeed, and the last attempt to fail",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0

    rows = {row.pk: row for row in Job.objects.all()}
    assert not [pk for pk, row in rows.items() if row.status == "running"]
    assert {(rows[pk].status, rows[pk].attempts) for pk in [*ordinary, last]} == {("succeeded", 1)}

    for pk, task in bad.items():
        row = rows[pk]
        kind, words = FAILING[task]
        assert (row.status, row.attempts, len(row.errors)) == ("failed", 2, 2), task.name
        for entry in row.errors:
            assert entry["type"] == kind, task.name
            assert words in entry["message"], (task.name, entry["message"][:300])
            assert len(entry["message"]) <= MESSAGE_LIMIT
            assert len(entry["traceback"]) <= TRACEBACK_LIMIT
        assert row.last_error.startswith(kind) and len(row.last_error) <= LAST_ERROR_LIMIT

    # The writes the handlers never committed were rolled back; the ones before stayed.
    labels = list(Execution.objects.values_list("label", flat=True))
    assert labels.count("leaves_atomic_open") == labels.count("leaves_autocommit_off") == 2
    assert "leaves_atomic_open:inside" not in labels
    assert "leaves_autocommit_off:uncommitted" not in labels

    # A 5 MB message is stored cut, and logged cut, on each attempt.
    huge = next(rows[pk] for pk, task in bad.items() if task is tasks.raises_huge_message)
    assert "x" * 1000 in huge.errors[0]["message"]
    assert "4,99" in huge.errors[0]["message"]  # "[4,99x,xxx characters cut]"
    assert len(worker.output()) < 1_000_000

    assert (rows[backed_off].attempts, len(rows[backed_off].errors)) == (2, 2)
    assert rows[backed_off].last_error == "ValueError: failed; see you in 31,709 years"
    assert "the retry delay 1000000000000.0 s is outside 0 .. 315360000 s" in worker.output()
    assert "the snooze delay 1000000000000.0 s is outside" in worker.output()

    for pk in tampered:
        row = rows[pk]
        assert (row.status, row.attempts, len(row.errors)) == ("failed", 1, 1)
        assert row.errors[0]["type"] == MALFORMED
        assert "the stored arguments of job" in row.errors[0]["message"]
        assert "are malformed" in row.errors[0]["message"]
    assert "args is a dict, not a list" in rows[tampered[0]].errors[0]["message"]
    assert "args is a str, not a list" in rows[tampered[1]].errors[0]["message"]
    assert "kwargs is a list, not a dict" in rows[tampered[2]].errors[0]["message"]


def test_a_burst_worker_leaves_after_a_result_the_database_refuses(start_worker):
    # Once, on PostgreSQL, this NUL byte failed the writer's shared statement every second
    # forever: no job was claimed again, and --burst never left.
    bad = tasks.returns_nul.enqueue().pk
    good = tasks.noop.enqueue("after").pk
    assert start_worker("--concurrency", "1", "--burst").wait(60) == 0
    assert Job.objects.get(pk=bad).status == "failed"
    assert Job.objects.get(pk=good).status == "succeeded"
