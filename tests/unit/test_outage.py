"""Database outages: one line when the database goes, one when it is back, and a backoff."""

import logging

from django.db import DataError, InterfaceError, OperationalError

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
