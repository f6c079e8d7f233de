"""Database outages: one line when the database goes, one when it is back, and a backoff."""

import logging

import pytest
from django.db import DatabaseError, DataError, InterfaceError, OperationalError

from jobqueue.runtime.outage import OUTAGE_CAP, Backoff, Health


def test_an_outage_is_logged_once_whatever_the_number_of_failures(caplog):
    health = Health("worker w1")
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        for _ in range(50):
            assert health.failed(OperationalError("connection refused\nmore"), "claiming")
        assert health.failed(InterfaceError("connection already closed"), "renewing leases")
        assert health.down
        health.ok()
        health.ok()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == (
        "worker w1: database unavailable (connection refused, while claiming); retrying "
        f"with backoff up to {OUTAGE_CAP:g} s"
    )
    assert messages[1].startswith("worker w1: database is back after ")
    assert "(51 failed statement(s)); resuming" in messages[1]
    assert len(messages) == 2
    assert not health.down


def test_an_error_that_is_not_an_outage_is_left_to_the_caller(caplog):
    health = Health("worker w1")
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        assert not health.failed(DataError("invalid byte sequence"), "claiming")
        assert not health.failed(ValueError("a bug"), "claiming")
        health.ok()
    assert not health.down
    assert not caplog.records


def test_the_backoff_doubles_up_to_its_cap_and_starts_again_after_a_reset():
    backoff = Backoff()
    assert [backoff.next() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 0.5


@pytest.mark.django_db(transaction=True)
def test_trying_meets_an_outage_once_and_closes_the_connection(caplog):
    from django.db import connection

    health = Health("worker w1")
    connection.ensure_connection()
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        for _ in range(3):
            with health.trying("claiming", "default", "worker %s: claim failed", "w1") as attempt:
                raise OperationalError("server closed the connection")
            assert attempt.failed and attempt.outage
            assert isinstance(attempt.error, OperationalError)
    assert connection.connection is None  # closed: the next statement opens a fresh one
    assert [r.getMessage() for r in caplog.records] == [
        "worker w1: database unavailable (server closed the connection, while claiming); "
        f"retrying with backoff up to {OUTAGE_CAP:g} s"
    ]


def test_trying_logs_what_is_not_an_outage_with_its_traceback(caplog):
    health = Health("worker w1")
    with (
        caplog.at_level(logging.WARNING, logger="jobqueue.worker"),
        health.trying("pruning", "default", "worker %s: pruning failed", "w1") as attempt,
    ):
        raise ValueError("a bug")
    assert attempt.failed and not attempt.outage and not health.down
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "worker w1: pruning failed"
    assert record.exc_info is not None and record.exc_info[0] is ValueError


def test_trying_lets_what_it_does_not_catch_through_and_passes_a_success():
    health = Health("worker w1")
    with health.trying("claiming", "default", "never logged") as attempt:
        pass
    assert not attempt.failed and not attempt.outage and attempt.error is None
    with (
        pytest.raises(KeyError),
        health.trying("claiming", "default", "never logged", catching=DatabaseError),
    ):
        raise KeyError("not a database error")
