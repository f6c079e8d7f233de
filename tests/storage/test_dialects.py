"""One set of cases every dialect passes, run on whichever database the suite runs on.

The suite runs once per database (SQLite, PostgreSQL, MariaDB), so each case here runs on
each dialect in turn, as River's ``riverdrivertest`` does for its drivers. A case states
what every dialect must do; where the answer differs by database, the difference is
written once, in ``EXPECTED``, not in the case.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.runtime.listener import Listener
from jobqueue.runtime.service import Service
from jobqueue.runtime.watcher import Watcher
from jobqueue.sql import (
    SUPPORTED_VENDORS,
    ClaimedRow,
    Dialect,
    Queries,
    dialect_class,
    in_transaction,
    load,
    unsupported_vendor,
)
from jobqueue.store.channel import NOTIFY_CHANNEL
from jobqueue.store.jobs import Store
from tests.conftest import listen_for_jobs, notifications
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"

# What each database answers where the answers differ. The test database of a SQLite run
# is a file, so its workers watch it.
EXPECTED: dict[str, dict[str, Any]] = {
    "postgresql": {"wake_up": "listen", "callers_clock": False, "estimates": True},
    "sqlite": {"wake_up": "watch", "callers_clock": True, "estimates": False},
    "mysql": {"wake_up": "poll", "callers_clock": False, "estimates": False},
}


@pytest.fixture
def q() -> Dialect:
    return Queries("default")


@pytest.fixture
def expected(vendor: str) -> dict[str, Any]:
    return EXPECTED[vendor]


def test_every_supported_vendor_has_its_expectations_here():
    assert set(EXPECTED) == set(SUPPORTED_VENDORS)


def test_the_dialect_is_the_vendors_and_holds_its_statements(q: Dialect, vendor: str):
    assert q.vendor == vendor
    assert type(q) is dialect_class(connection)
    assert q.using == "default"
    assert q.statements == load(vendor) == type(q).load()


def insert(q: Dialect, *keys: str | None, on_crash: str = "retry") -> list[tuple[int, Any]]:
    """Insert one job of ADD per key through the dialect, as the enqueue does; the id and
    key of each row written (PostgreSQL's rows carry pg_notify's empty value after them,
    which the enqueue never reads)."""
    now = timezone.now()
    inserted = q.insert_jobs(
        {
            "task_name": ADD,
            "queue": "default",
            "priority": 0,
            "max_attempts": 3,
            "on_crash": on_crash,
            "channel": NOTIFY_CHANNEL,
        },
        run_at=now,
        now=now,
        rows=([[1, 2]] * len(keys), [{}] * len(keys), list(keys)),
    )
    return [(row[0], row[1]) for row in inserted]


def claim_params(q: Dialect, *, limit: int, ahead: int = 0) -> dict[str, Any]:
    """record_and_claim's parameters, as the store passes them: claim only."""
    return {
        "worker": "w1",
        "task_names": q.names([ADD]),
        "all_queues": True,
        "queues": q.names([]),
        "excluded": q.names([]),
        "limit": limit,
        "ahead": ahead,
        "max_crashes": 3,
        "lease": 300,
        "done": "[]",
        "done_ids": q.ids([]),
        "started": "[]",
        "started_ids": q.ids([]),
        "buffer": 5,
        **q.clock(lease_until=300, fence=5),
    }


# -- parameter shapes and the clock ----------------------------------------------------


def test_a_list_of_ids_round_trips_through_a_statement(q: Dialect):
    rows = q.fetchall("operator_ids", {"ids": q.ids([3, 1, 2])})
    assert sorted(int(value) for (value,) in rows) == [1, 2, 3]
    assert q.fetchall("operator_ids", {"ids": q.ids([])}) == []


def test_names_select_what_they_name(q: Dialect):
    JobFactory(task_name=ADD)
    JobFactory(task_name="other")
    selection = {"all_queues": True, "queues": q.names([]), "excluded": q.names([])}
    for names, due in (([ADD], True), (["nothing"], False), ([ADD, "other"], True)):
        [(seconds,)] = q.fetchall(
            "next_due", {"task_names": q.names(names), **selection, **q.clock()}
        )
        assert (seconds is not None) is due, names


def test_the_clock_is_the_callers_only_where_the_statements_take_it(q: Dialect, expected):
    params = q.clock(later=5)
    if not expected["callers_clock"]:
        assert params == {}
        return
    assert set(params) == {"now", "later"}
    now, later = (dt.datetime.fromisoformat(str(params[name])) for name in ("now", "later"))
    assert later - now == dt.timedelta(seconds=5)


def test_database_now_is_an_aware_time_near_this_hosts(q: Dialect):
    now = q.database_now()
    assert timezone.is_aware(now)
    assert abs((now - timezone.now()).total_seconds()) < 5


# -- the enqueue -----------------------------------------------------------------------


def test_insert_returns_ids_in_order_and_leaves_out_held_keys(q: Dialect):
    [(first, key)] = insert(q, "k1")
    assert key == "k1" and Job.objects.get(pk=first).idempotency_key == "k1"
    inserted = insert(q, None, "k1", "k2", "k2", None)
    # k1 is held by the first job, and the batch's second k2 by its first.
    assert [key for _, key in inserted] == [None, "k2", None]
    ids = [pk for pk, _ in inserted]
    assert ids == sorted(ids) and first < ids[0]
    assert set(Job.objects.values_list("pk", flat=True)) == {first, *ids}
    assert Job.objects.filter(status="pending").count() == 4
    assert insert(q, "k1", "k2") == []


# -- the claim ---------------------------------------------------------------------------


def test_the_claim_returns_named_rows_for_free_slots_then_held_ones(q: Dialect):
    ids = [pk for pk, _ in insert(q, None, None, None)]
    Job.objects.filter(pk=ids[0]).update(steps={"fetched": 1})
    matched, claimed, next_due = q.record_and_claim(
        claim_params(q, limit=1, ahead=1), done=False, started=False, claiming=True
    )
    assert matched == [] and next_due is None
    assert all(isinstance(row, ClaimedRow) for row in claimed)
    free, held = sorted(claimed, key=lambda row: row.held)
    assert (free.id, held.id) == (ids[0], ids[1])
    assert (free.held, held.held) == (False, True)
    for row in claimed:
        job = Job.objects.get(pk=row.id)
        assert (row.task_name, row.queue, row.priority) == (ADD, "default", 0)
        assert (row.args, row.kwargs) == ([1, 2], {})
        assert (row.attempt, row.max_attempts, row.crashes) == (1, 3, 0) == (job.attempts, 3, 0)
        assert job.status == "running" and job.worker == "w1"
        assert row.token == job.token and len(row.token) == 32
        assert isinstance(row.waited, float) and row.waited >= 0.0
        assert row.trace_context is None
        assert (job.started_at is None) is row.held
    assert (free.steps, held.steps) == ({"fetched": 1}, {})
    assert Job.objects.get(pk=ids[2]).status == "pending"


def test_a_job_that_may_not_be_held_is_left_for_the_next_claim(q: Dialect):
    ids = [pk for pk, _ in insert(q, None)]
    ids += [pk for pk, _ in insert(q, None, on_crash="park")]
    _, claimed, _ = q.record_and_claim(
        claim_params(q, limit=1, ahead=5), done=False, started=False, claiming=True
    )
    assert [row.id for row in claimed] == ids[:1]
    assert Job.objects.get(pk=ids[1]).status == "pending"


def test_a_claim_that_finds_nothing_says_when_the_next_job_is_due(q: Dialect):
    params = claim_params(q, limit=2)
    assert q.record_and_claim(params, done=False, started=False, claiming=True) == (
        [],
        [],
        None,
    )
    JobFactory(run_at=timezone.now() + dt.timedelta(seconds=60))
    matched, claimed, next_due = q.record_and_claim(
        claim_params(q, limit=2), done=False, started=False, claiming=True
    )
    assert matched == [] and claimed == []
    assert next_due is not None and 55 < next_due <= 60


# -- answers the rest of jobqueue asks ------------------------------------------------


def test_a_raw_transaction_is_seen_and_a_finished_one_is_not(vendor: str):
    connection.ensure_connection()
    assert in_transaction(connection) is False
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute("SELECT 1")
        # MySQL (not MariaDB) has no way to tell; every database on this machine has one.
        seen = vendor != "mysql" or bool(connection.mysql_is_mariadb)
        assert in_transaction(connection) is seen
        cursor.execute("ROLLBACK")
    assert in_transaction(connection) is False


def test_a_transaction_django_opened_is_seen_too(vendor: str):
    with transaction.atomic():
        Job.objects.count()
        seen = vendor != "mysql" or bool(connection.mysql_is_mariadb)
        assert in_transaction(connection) is seen
    assert in_transaction(connection) is False


def test_wake_up_is_the_vendors_and_the_runtime_builds_its_part(q: Dialect, expected):
    assert q.wake_up == expected["wake_up"]
    assert (q.wake_up == "watch") is (q.database_file() is not None)
    listener = Service(store=Store(), settings=conf.get()).listener
    part = {"listen": Listener, "watch": Watcher, "poll": type(None)}[q.wake_up]
    assert type(listener) is part


def test_notify_is_safe_everywhere_and_heard_at_commit_where_workers_listen(q: Dialect):
    listener = listen_for_jobs() if q.wake_up == "listen" else None
    try:
        with transaction.atomic():
            q.notify(NOTIFY_CHANNEL, ["reports", "emails"])
            q.notify(NOTIFY_CHANNEL, [])
            if listener is not None:
                assert notifications(listener, wait=0.1) == []  # not before the commit
        if listener is not None:
            heard = notifications(listener)
            assert sorted(heard) == [(NOTIFY_CHANNEL, "emails"), (NOTIFY_CHANNEL, "reports")]
    finally:
        if listener is not None:
            listener.close()


def test_estimated_rows_is_a_planners_estimate_or_none(q: Dialect, expected):
    JobFactory.create_batch(30)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job" if q.vendor == "postgresql" else "SELECT 1")
    estimate = q.estimated_rows("jobqueue_job")
    if not expected["estimates"]:
        assert estimate is None
        return
    assert estimate == 30


def test_refresh_statistics_is_asked_of_every_dialect(q: Dialect, expected):
    JobFactory.create_batch(3)
    refreshed = q.refresh_statistics(1_000_000)
    assert refreshed is expected["estimates"]


def test_a_database_without_a_dialect_is_named_and_asked_nothing(
    monkeypatch: pytest.MonkeyPatch,
):
    assert unsupported_vendor(connection) is None
    monkeypatch.setattr(connection, "vendor", "oracle")
    assert dialect_class(connection) is None
    assert unsupported_vendor(connection) == "oracle"
    assert in_transaction(connection) is False
    with pytest.raises(NotImplementedError, match="database 'default' is oracle"):
        Queries("default")
