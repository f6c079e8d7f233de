"""jobqueue.testing.capture(): record enqueues, with or without rows, and assert on them."""

import contextvars
import datetime as dt
import threading

import pytest
from django.db import connections, transaction

from jobqueue import task
from jobqueue.models import Job
from jobqueue.tasks.base import Call
from jobqueue.testing import capture, run_jobs
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


@task
def fan_out(count):
    for i in range(count):
        tasks.add.enqueue(i, i)


@task
async def async_fan_out(count):
    for i in range(count):
        tasks.add.enqueue(i, i)


def test_without_write_nothing_is_written_and_unsaved_jobs_come_back():
    with capture() as enqueued:
        job = tasks.send_email.enqueue("ada@example.com")
        tasks.add.using(delay=60, priority=5).enqueue(1, b=2)
    assert not Job.objects.exists()
    assert job is not None and job.pk is None and job.queue == "emails"
    assert len(enqueued) == 2 and enqueued[0].job is job
    later = enqueued[1]
    assert (later.task_name, later.args, later.kwargs) == (
        "tests.testapp.tasks.add",
        (1,),
        {"b": 2},
    )
    assert later.priority == 5 and later.run_at > job.run_at + dt.timedelta(seconds=59)


def test_with_write_the_rows_are_written_in_the_callers_transaction():
    with capture(write=True) as enqueued:
        job = tasks.add.enqueue(1, 2)
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.add.enqueue(3, 4)
            raise RuntimeError("roll back")
    assert Job.objects.get().pk == job.pk
    # The capture records calls; a rolled-back one is recorded but has no row.
    assert [e.args for e in enqueued] == [(1, 2), (3, 4)]


def test_assert_enqueued_compares_arguments_as_the_handler_receives_them():
    with capture() as enqueued:
        tasks.send_email.enqueue(to="ada@example.com")
        tasks.send_email.enqueue("ada@example.com")
        tasks.add.enqueue(1, 2)
    assert len(enqueued.assert_enqueued(tasks.send_email, "ada@example.com", count=2)) == 2
    enqueued.assert_enqueued("tests.testapp.tasks.add")
    enqueued.assert_enqueued(tasks.add, 1, b=2, count=1)
    enqueued.assert_not_enqueued(tasks.send_email, "grace@example.com")
    enqueued.assert_not_enqueued(tasks.echo)


def test_failed_assertions_say_what_was_enqueued():
    with capture() as enqueued:
        tasks.send_email.enqueue("ada@example.com")
    with pytest.raises(AssertionError) as missing:
        enqueued.assert_enqueued(tasks.send_email, "grace@example.com")
    assert "expected tests.testapp.tasks.send_email('grace@example.com') to be enqueued" in str(
        missing.value
    )
    assert "Enqueued: tests.testapp.tasks.send_email('ada@example.com') on queue 'emails'" in str(
        missing.value
    )
    with pytest.raises(AssertionError, match=r"enqueued 2 time\(s\), found 1"):
        enqueued.assert_enqueued(tasks.send_email, count=2)
    with pytest.raises(AssertionError, match="not to be enqueued, found 1"):
        enqueued.assert_not_enqueued(tasks.send_email)
    with capture() as empty:
        pass
    with pytest.raises(AssertionError, match="Nothing was enqueued"):
        empty.assert_enqueued(tasks.add)


def test_invalid_enqueues_still_fail_inside_a_capture():
    with capture() as enqueued:
        with pytest.raises(TypeError, match="not JSON-serialisable"):
            tasks.echo.enqueue(object())
        with pytest.raises(ValueError, match="priority"):
            tasks.add.using(priority=500)
    assert len(enqueued) == 0


def test_enqueue_many_and_idempotency_keys_are_captured():
    with capture(write=True) as enqueued:
        tasks.add.enqueue_many([(1, 2), Call((3, 4), idempotency_key="k")])
        assert tasks.add.using(idempotency_key="k").enqueue(5, 6) is None
    assert [e.idempotency_key for e in enqueued] == [None, "k", "k"]
    assert enqueued[2].job is None  # the duplicate wrote nothing


def test_captures_nest_and_stop_at_the_end_of_the_block():
    with capture() as outer:
        tasks.add.enqueue(1, 2)
        with capture(write=True) as inner:
            tasks.add.enqueue(3, 4)
    tasks.add.enqueue(5, 6)
    assert [e.args for e in outer] == [(1, 2)]
    assert [e.args for e in inner] == [(3, 4)]
    assert sorted(Job.objects.values_list("args", flat=True)) == [[3, 4], [5, 6]]


def in_thread(target, *args, context=None):
    """Start ``target(*args)`` in a new thread (in ``context``, if given): the thread and
    the list of what it raised."""
    raised = []

    def body():
        try:
            if context is None:
                target(*args)
            else:
                context.run(target, *args)
        except BaseException as exc:
            raised.append(exc)
        finally:
            connections.close_all()  # the thread's own connection, opened by an enqueue

    thread = threading.Thread(target=body)
    thread.start()
    return thread, raised


@pytest.mark.django_db(transaction=True)
def test_a_capture_does_not_see_the_enqueues_of_another_thread():
    capturing, enqueued_there = threading.Event(), threading.Event()

    def enqueue_for_real():
        assert capturing.wait(10)
        try:
            tasks.add.enqueue(1, 2)  # this thread has no capture: the row is written
        finally:
            enqueued_there.set()

    thread, raised = in_thread(enqueue_for_real)
    with capture() as enqueued:
        capturing.set()
        assert enqueued_there.wait(10)
        tasks.add.enqueue(3, 4)
    thread.join(10)
    assert raised == []
    assert [e.args for e in enqueued] == [(3, 4)]
    assert list(Job.objects.values_list("args", flat=True)) == [[1, 2]]


def test_captures_in_two_threads_at_once_each_record_their_own_and_nest():
    both_open = threading.Barrier(2, timeout=10)
    seen = {}

    def capture_here(label, a):
        with capture() as outer:
            both_open.wait()  # both captures are open before either thread enqueues
            tasks.add.enqueue(a, a)
            with capture() as inner:
                tasks.add.enqueue(a, -a)
            both_open.wait()  # and stay open until both threads have enqueued
        seen[label] = ([e.args for e in outer], [e.args for e in inner])

    thread, raised = in_thread(capture_here, "there", 2)
    capture_here("here", 1)
    thread.join(10)
    assert raised == []
    assert seen == {"here": ([(1, 1)], [(1, -1)]), "there": ([(2, 2)], [(2, -2)])}
    assert not Job.objects.exists()


def test_a_thread_run_in_a_copy_of_the_context_is_captured():
    with capture() as enqueued:
        thread, raised = in_thread(tasks.add.enqueue, 5, 6, context=contextvars.copy_context())
        thread.join(10)
    assert raised == []
    assert [e.args for e in enqueued] == [(5, 6)]


def test_the_enqueues_of_jobs_run_inside_a_capture_are_captured():
    # run_jobs() calls handlers in the test's thread; asyncio.run() gives an async handler
    # a copy of that thread's context, capture included.
    fan_out.enqueue(2)
    async_fan_out.enqueue(1)
    with capture() as enqueued:
        run = run_jobs()
    assert len(run.succeeded) == 2
    assert sorted(e.args for e in enqueued) == [(0, 0), (0, 0), (1, 1)]
