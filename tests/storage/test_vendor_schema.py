"""What the schema itself enforces and how the claim finds its rows, below the store: the
idempotency key's unique index (on MySQL and MariaDB a generated column, migration
0009_mysql), the model checks, the MySQL version floor, and the MySQL claim's plan on a
table of many finished rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue.checks import check_database
from jobqueue.models import Job
from jobqueue.sql import Queries
from jobqueue.sql.mysql import MySQLDialect
from jobqueue.tasks.base import Call
from tests.factories import JobFactory
from tests.testapp import tasks

ADD = "tests.testapp.tasks.add"

COLUMNS = (
    "task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts, "
    "crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at"
)


def insert_raw(key: str, status: str = "pending") -> None:
    """One job row written with raw SQL, past every check jobqueue's code makes."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO jobqueue_job ({COLUMNS}) "
            "VALUES (%s, 'default', 0, '[]', '{}', %s, %s, 0, 3, 0, 'retry', %s, '', '[]', "
            "'{}', %s, %s)",
            [ADD, status, now, key, now, now],
        )


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_a_second_unfinished_job_with_a_key_until_the_first_finished():
    insert_raw("order:7")
    first = Job.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_raw("order:7")
    # Running is unfinished too.
    Job.objects.filter(pk=first.pk).update(status="running")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_raw("order:7")
    # Keys are compared as the bytes they are, whatever the table's collation: on MySQL
    # and MariaDB a case-insensitive one would make these the same key, and even a binary
    # one would ignore the trailing space. (By pk below: Django's own filters compare by
    # the collation there.)
    insert_raw("ORDER:7")
    insert_raw("order:7 ")
    # Finished: the key is free again, and a finished row never collides.
    Job.objects.filter(pk=first.pk).update(status="succeeded")
    insert_raw("order:7")
    insert_raw("order:7", status="failed")
    keys = sorted(job.idempotency_key for job in Job.objects.all())
    assert keys == ["ORDER:7", "order:7", "order:7", "order:7", "order:7 "]


@pytest.mark.django_db
def test_the_job_model_checks_have_no_warning_about_its_partial_indexes():
    # Django warns that MySQL and MariaDB ignore an index's condition (models.W037) and skip
    # a conditional unique constraint (models.W036); migration 0009_mysql builds them there,
    # so jobqueue's own models leave those warnings out, on every database.
    assert [message.id for message in Job.check(databases=["default"])] == []


@pytest.mark.parametrize(
    ("mariadb", "version", "error"),
    [
        (
            False,
            (5, 7, 44),
            "jobqueue needs MySQL 8.0 or later; the default database is MySQL 5.7.44.",
        ),
        (
            True,
            (10, 5, 27),
            "jobqueue needs MariaDB 10.6 or later; the default database is MariaDB 10.5.27.",
        ),
        (False, (8, 0, 11), None),
        (True, (10, 6, 0), None),
        (True, (11, 4, 2), None),
    ],
)
def test_an_older_mysql_or_mariadb_is_refused_naming_its_version(
    monkeypatch: pytest.MonkeyPatch, mariadb: bool, version: tuple[int, ...], error: str | None
) -> None:
    # The server's answers faked: the check reads Django's mysql_is_mariadb and
    # mysql_version, which the MySQL backend asks the server for once.
    monkeypatch.setattr(connection, "vendor", "mysql")
    monkeypatch.setattr(connection, "mysql_is_mariadb", mariadb, raising=False)
    monkeypatch.setattr(connection, "mysql_version", version, raising=False)
    messages = check_database()
    if error is None:
        assert messages == []
    else:
        assert [(m.id, m.msg) for m in messages] == [("jobqueue.E005", error)]


# -- MySQL and MariaDB: the claim's plan ----------------------------------------------


@pytest.fixture
def mysql_only() -> None:
    if connection.vendor != "mysql":
        pytest.skip("MySQL and MariaDB only; run with DATABASE_URL=mysql://...")


FINISHED = 50_000


def insert_finished_rows() -> None:
    """FINISHED succeeded jobs in one raw INSERT ... SELECT (five tens of digits crossed,
    which MySQL 8 and MariaDB both read, unlike MariaDB's seq_1_to_N tables)."""
    digits = " UNION ALL ".join(f"SELECT {d} AS d" for d in range(10))
    tens = ", ".join(f"({digits}) AS d{i}" for i in range(5))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO jobqueue_job ({COLUMNS}, finished_at) "
            f"SELECT %s, 'default', 0, '[]', '{{}}', 'succeeded', UTC_TIMESTAMP(6), 1, 3, 0, "
            f"'retry', NULL, '', '[]', '{{}}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), "
            f"UTC_TIMESTAMP(6) FROM {tens} LIMIT {FINISHED}",
            [ADD],
        )


def explain(statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE jobqueue_job")
        cursor.fetchall()
        cursor.execute("EXPLAIN " + statement, params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def job_table_row(plan: list[dict[str, Any]]) -> dict[str, Any]:
    [row] = [row for row in plan if row["table"] == "jobqueue_job"]
    return row


@pytest.mark.django_db(transaction=True)
def test_the_claim_reads_its_index_past_many_finished_rows(mysql_only: None) -> None:
    insert_finished_rows()
    JobFactory.create_batch(20)
    assert Job.objects.count() == FINISHED + 20
    q = Queries("default")
    scope = {
        "task_names": q.names([ADD]),
        "all_queues": True,
        "queues": q.names([]),
        "excluded": q.names([]),
        "max_crashes": 3,
    }
    plan = explain(q.statements["claim_lock"], {**scope, "claim_limit": 4})
    row = job_table_row(plan)
    # The head of jobqueue_job_claim, in its order: a range over the non-NULL claim_rank,
    # the pending rows only, no sort, no scan of the finished ones.
    assert row["key"] == "jobqueue_job_claim", plan
    assert row["type"] == "range", plan
    assert "filesort" not in (row["Extra"] or ""), plan
    assert int(row["rows"]) < 1_000, plan
    # The idle worker's next look, and the recovery check, stay off the finished rows too.
    row = job_table_row(explain(q.statements["next_due"], scope))
    assert row["key"] == "jobqueue_job_claim" and int(row["rows"]) < 1_000, row
    row = job_table_row(explain(q.statements["rescue_check"], {}))
    assert row["key"] == "jobqueue_job_running_lease", row


@pytest.mark.django_db(transaction=True)
def test_without_insert_returning_as_on_mysql_the_enqueue_goes_row_by_row(
    mysql_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MySQL 8 is not on this machine: MariaDB takes the path MySQL's enqueue takes (no
    # INSERT ... RETURNING, one insert per job, the id from the driver).
    monkeypatch.setattr(MySQLDialect, "insert_returning", property(lambda self: False))
    held = tasks.add.using(idempotency_key="k1").enqueue(1, 2)
    assert held is not None
    with CaptureQueriesContext(connection) as queries:
        jobs = tasks.add.enqueue_many(
            [Call((1, 2), {}, "k1"), (3, 4), Call((5, 6), {}, "k2"), Call((7, 8), {}, "k2")]
        )
    assert not any("RETURNING" in q["sql"] for q in queries.captured_queries)
    assert jobs[0] is None and jobs[3] is None  # k1 is held; the batch's second k2
    assert [Job.objects.get(pk=job.pk).args for job in jobs[1:3]] == [[3, 4], [5, 6]]
    assert tasks.add.using(idempotency_key="k1").enqueue(1, 2) is None
    assert Job.objects.count() == 3
