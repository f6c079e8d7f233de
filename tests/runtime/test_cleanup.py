"""A connection a handler left in a transaction is rolled back and reset, on both vendors."""

import threading

import pytest
from django.db import connection, connections, transaction

from jobqueue.runtime.cleanup import restore_connections
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def leave_atomic():
    transaction.atomic().__enter__()
    Execution.objects.create(label="left", pid=1)


def leave_nested_atomic():
    transaction.atomic().__enter__()
    transaction.atomic().__enter__()  # a savepoint inside it
    Execution.objects.create(label="left", pid=1)


def leave_autocommit_off():
    transaction.set_autocommit(False)
    Execution.objects.create(label="left", pid=1)


def leave_raw_begin():
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
    Execution.objects.create(label="left", pid=1)


def close_inside_atomic():
    transaction.atomic().__enter__()
    Execution.objects.create(label="left", pid=1)
    connection.close()  # Django now thinks the block is open on a closed connection


CASES = {
    leave_atomic: "a transaction still open",
    leave_nested_atomic: "a transaction still open",
    leave_autocommit_off: "autocommit turned off",
    leave_raw_begin: "a transaction still open",
    close_inside_atomic: "a transaction still open",
}


def in_a_thread(fn):
    """Run ``fn`` on a thread of its own, with its own connections, as a slot does."""
    outcome = {}

    def target():
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.parametrize("leave", list(CASES), ids=[fn.__name__ for fn in CASES])
def test_what_a_handler_left_is_rolled_back_and_the_connection_works_on(leave):
    def handler_then_restore():
        leave()
        found = restore_connections()
        # The slot's next job: it writes in autocommit, and that write commits.
        Execution.objects.create(label="next job", pid=1)
        state = (connection.in_atomic_block, connection.get_autocommit())
        return found, state, restore_connections()

    found, state, found_after = in_a_thread(handler_then_restore)
    assert found == [f"{CASES[leave]} on database 'default'"]
    assert state == (False, True)
    assert found_after == []
    assert list(Execution.objects.values_list("label", flat=True)) == ["next job"]


def test_a_clean_connection_is_left_as_it_is():
    def handler_then_restore():
        Execution.objects.create(label="committed", pid=1)
        raw = connection.connection
        return restore_connections(), connection.connection is raw

    assert in_a_thread(handler_then_restore) == ([], True)


@pytest.mark.django_db(transaction=False)
def test_under_run_jobs_only_what_the_handler_left_is_rolled_back():
    from jobqueue.models import Job
    from jobqueue.testing import run_jobs
    from tests.testapp import tasks

    # Inside the test's own transaction, as run_jobs usually runs: that one stays open.
    Execution.objects.create(label="the test's", pid=1)
    job = tasks.leaves_atomic_open.enqueue()
    run_jobs()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == ("failed", 2)
    assert row.errors[0]["type"] == "jobqueue.runtime.attempt.HandlerLeftTransaction"
    assert connection.in_atomic_block
    labels = list(Execution.objects.values_list("label", flat=True))
    assert labels == ["the test's", "leaves_atomic_open", "leaves_atomic_open"]
